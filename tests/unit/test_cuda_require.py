"""reconciler/core/cuda/cuda_require.py on plain data: an image's requirements as the NVIDIA Container Toolkit
v1.20.2 reads and judges them (tests/toolkit compares the same code with the toolkit's, case by case)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.cuda import toolkit_semver
from reconciler.core.cuda.cuda_require import (
    NodeFacts,
    Requirement,
    evaluate,
    image_requirements,
)

NODE_550 = NodeFacts(cuda="12.4", driver="550.127.05", arch="8.0", brand="tesla")
BRAND_GROUPS = "brand=tesla,driver>=470,driver<471 brand=tesla,driver>=550,driver<551"


def judge(*env: str, node: NodeFacts = NODE_550) -> tuple[str, str]:
    verdict = evaluate(image_requirements(list(env)), node)
    return verdict.state, verdict.message


def test_spaces_separate_alternatives_and_commas_join_conditions() -> None:
    assert judge(f"NVIDIA_REQUIRE_CUDA=cuda>=12.8 {BRAND_GROUPS}") == ("satisfied", "")
    geforce = NodeFacts(cuda="12.4", driver="550.127.05", arch="8.0", brand="geforce")
    assert judge(f"NVIDIA_REQUIRE_CUDA=cuda>=12.8 {BRAND_GROUPS}", node=geforce) == (
        "unsatisfied",
        "cuda>=12.8||brand=tesla&&driver>=470&&driver<471||brand=tesla&&driver>=550&&driver<551 not met",
    )
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>=12.0,driver<550") == (
        "unsatisfied",
        "unsatisfied condition: driver<550 (driver=550.127.05)",
    )


def test_the_message_of_one_unmet_condition_is_the_toolkits() -> None:
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>=12.8") == (
        "unsatisfied",
        "unsatisfied condition: cuda>=12.8 (cuda=12.4)",
    )


def test_every_require_variable_counts_except_jetpack() -> None:
    image = image_requirements(
        [
            "NVIDIA_REQUIRE_CUDA=cuda>=12.0",
            "NVIDIA_REQUIRE_ARCH=arch>=9.0",
            "NVIDIA_REQUIRE_JETPACK=csv-mounts=all",
            "NVIDIA_REQUIRE_JETPACK_EXTRA=cuda>=99",
            "nvidia_require_cuda=cuda>=99",
        ]
    )
    assert image.requirements == (
        Requirement("NVIDIA_REQUIRE_CUDA", "cuda>=12.0"),
        Requirement("NVIDIA_REQUIRE_ARCH", "arch>=9.0"),
    )
    verdict = evaluate(image, NODE_550)
    assert (verdict.state, verdict.message) == ("unsatisfied", "unsatisfied condition: arch>=9.0 (arch=8.0)")
    assert [failure.requirement.source for failure in verdict.failures] == ["NVIDIA_REQUIRE_ARCH"]


def test_a_variable_set_twice_keeps_its_last_value() -> None:
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_REQUIRE_CUDA=cuda>=12") == ("satisfied", "")


def test_a_legacy_image_requires_its_cuda_version_major_minor() -> None:
    assert image_requirements(["CUDA_VERSION=12.8.1"]).requirements == (
        Requirement("CUDA_VERSION", "cuda>=12.8"),
    )
    assert judge("CUDA_VERSION=12.4.1") == ("satisfied", "")
    assert judge("CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA=") == (
        "unsatisfied",
        "unsatisfied condition: cuda>=12.8 (cuda=12.4)",
    )
    # With NVIDIA_REQUIRE_CUDA set, CUDA_VERSION adds nothing.
    assert judge("CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.0") == ("satisfied", "")
    assert judge("CUDA_VERSION=12.8.1.2") == (
        "invalid",
        "failed to get version: invalid CUDA version 12.8.1.2: "
        "invalid version string: invalid semantic version",
    )


@pytest.mark.parametrize(
    ("value", "disabled"), [("true", True), ("1", True), ("T", True), ("yes", False), ("tRUE", False)]
)
def test_disable_require_is_a_go_boolean(value: str, disabled: bool) -> None:
    image = image_requirements(["NVIDIA_REQUIRE_CUDA=cuda>=99", f"NVIDIA_DISABLE_REQUIRE={value}"])
    assert image.disabled is disabled
    assert evaluate(image, NODE_550).state == ("satisfied" if disabled else "unsatisfied")


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ("notvalid", "invalid constraint: notvalid"),
        ("cuda>=12.4\tbrand=tesla", "invalid version string: invalid semantic version"),
        ("cuda>=1.2.3.4", "invalid version string: invalid semantic version"),
        ("cuda>=12.4-01", "invalid version string: version segment starts with 0"),
        ("cuda!12.4", "invalid version string: invalid semantic version"),
    ],
)
def test_a_malformed_requirement_fails_whatever_the_node(requirement: str, message: str) -> None:
    assert judge(f"NVIDIA_REQUIRE_CUDA={requirement}", "NVIDIA_REQUIRE_B=cuda>=99") == ("invalid", message)


def test_unknown_properties_and_blank_requirements_are_skipped() -> None:
    for requirement in ("foo=bar", "CUDA>=99", "=12", "  ", "\u00a0", "cuda>=99,"):
        state, _ = judge(f"NVIDIA_REQUIRE_CUDA={requirement}")
        assert state == ("unsatisfied" if requirement == "cuda>=99," else "satisfied"), requirement


def test_a_brand_is_compared_byte_by_byte_and_needs_a_known_operator() -> None:
    assert judge("NVIDIA_REQUIRE_CUDA=brand=Tesla") == (
        "unsatisfied",
        "unsatisfied condition: brand=Tesla (brand=tesla)",
    )
    assert judge("NVIDIA_REQUIRE_CUDA=brand>=tesla") == ("satisfied", "")
    assert judge("NVIDIA_REQUIRE_CUDA=brand!tesla") == ("unsatisfied", "invalid operator ")


def test_an_unknown_fact_fails_every_version_condition() -> None:
    assert judge("NVIDIA_REQUIRE_CUDA=driver>=470", node=NodeFacts(cuda="12.4")) == (
        "unsatisfied",
        "invalid value for driver: invalid semantic version",
    )
    assert judge("NVIDIA_REQUIRE_CUDA=brand!=tesla", node=NodeFacts()) == ("satisfied", "")


def test_an_environment_entry_without_equals_is_refused() -> None:
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>=12", "PATH") == ("invalid", "invalid environment variable: PATH")


def test_versions_are_coerced_like_masterminds_semver() -> None:
    assert toolkit_semver.parse("550.127.05") == toolkit_semver.Version(550, 127, 5, "")
    assert toolkit_semver.parse("v12") == toolkit_semver.Version(12, 0, 0, "")
    assert judge("NVIDIA_REQUIRE_CUDA=cuda=12.4.0") == ("satisfied", "")
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>12.4-rc1") == ("satisfied", "")
    assert judge("NVIDIA_REQUIRE_CUDA=cuda>12.4+build.7") == (
        "unsatisfied",
        "unsatisfied condition: cuda>12.4+build.7 (cuda=12.4)",
    )
    for bad in ("", " 12.4", "12.4\n", "1.2.3.4", "12.x", "1" * 300):
        with pytest.raises(toolkit_semver.VersionError):
            toolkit_semver.parse(bad)


VERSIONS = st.from_regex(
    r"v?[0-9]{1,3}(\.[0-9]{1,3}){0,2}(-(rc|alpha|[1-9][0-9]?)(\.[a-z0-9]{1,2})?)?", fullmatch=True
)


@given(VERSIONS, VERSIONS)
def test_version_order_is_antisymmetric(first: str, second: str) -> None:
    try:
        left, right = toolkit_semver.parse(first), toolkit_semver.parse(second)
    except toolkit_semver.VersionError:
        return
    assert left.compare(right) == -right.compare(left)
    assert left.compare(left) == 0
