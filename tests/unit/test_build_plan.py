"""The build plan (reconciler/core/images/build_plan.py) on plain data, and the recipe file it reads."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from reconciler.adapters.files import precompiled
from reconciler.core.images import build_plan
from reconciler.core.images.build_plan import BuildEntry, BuildPlanError, Recipe, build_entries, github_matrix
from reconciler.core.images.tags import ImageKey

REPOSITORY = "registry.example:5000/gpu/driver"
COMMIT = "06a208ca9747c82b1ba99b76ecdcf2469b0a0207"
DOCUMENT: dict[str, Any] = {
    "upstream": {"repository": "NVIDIA/gpu-driver-container", "commit": COMMIT},
    "recipes": [
        {
            "os_tag": "ubuntu22.04",
            "dockerfile": "ubuntu22.04/precompiled",
            "base_image": "ubuntu:jammy-20260731.1",
            "platforms": "linux/amd64",
            "source": "Makefile:199-204",
        },
        {
            "os_tag": "ubuntu24.04",
            "dockerfile": "ubuntu24.04/precompiled",
            "base_image": "ubuntu:noble-20260730.1",
            "platforms": "linux/amd64",
            "source": "Makefile:206-211",
        },
    ],
    "without_recipe": [{"os_prefix": "rhel", "reason": "needs a Red Hat subscription", "source": "README"}],
}
RECIPES = build_plan.parse_recipes(DOCUMENT)
JAMMY = ImageKey("580", "5.15.0-119-generic", "ubuntu22.04")
NOBLE_AWS = ImageKey("570", "6.8.0-1015-aws", "ubuntu24.04")


def test_a_key_with_a_recipe_gets_the_upstream_folder_base_image_and_target_image() -> None:
    [entry] = build_entries([JAMMY], REPOSITORY, RECIPES)
    assert entry.key == JAMMY
    assert entry.image == f"{REPOSITORY}:580-5.15.0-119-generic-ubuntu22.04"
    assert entry.reason is None
    assert entry.recipe == Recipe(
        "ubuntu22.04", "ubuntu22.04/precompiled", "ubuntu:jammy-20260731.1", "linux/amd64", "Makefile:199-204"
    )
    assert entry.recipe.dockerfile == "ubuntu22.04/precompiled/Dockerfile"


def test_the_matrix_row_carries_the_build_args_by_their_upstream_names() -> None:
    matrix = github_matrix(build_entries([NOBLE_AWS], REPOSITORY, RECIPES))
    assert matrix == {
        "include": [
            {
                "branch": "570",
                "kernel": "6.8.0-1015-aws",
                "os_tag": "ubuntu24.04",
                "base_image": "ubuntu:noble-20260730.1",
                "context": "ubuntu24.04/precompiled",
                "dockerfile": "ubuntu24.04/precompiled/Dockerfile",
                "platforms": "linux/amd64",
                "BASE_IMAGE": "ubuntu:noble-20260730.1",
                "DRIVER_BRANCH": "570",
                "KERNEL_VERSION": "6.8.0-1015-aws",
                "target_tag": "570-6.8.0-1015-aws-ubuntu24.04",
                "image": f"{REPOSITORY}:570-6.8.0-1015-aws-ubuntu24.04",
            }
        ]
    }
    json.dumps(matrix)  # plain JSON for fromJSON


def test_entries_are_sorted_by_tag_and_deduplicated_and_the_matrix_keeps_that_order() -> None:
    other = ImageKey("550", "5.15.0-119-generic", "ubuntu22.04")
    entries = build_entries([NOBLE_AWS, JAMMY, other, JAMMY], REPOSITORY, RECIPES)
    assert [entry.key for entry in entries] == [other, NOBLE_AWS, JAMMY]
    assert [row["target_tag"] for row in github_matrix(entries)["include"]] == [
        "550-5.15.0-119-generic-ubuntu22.04",
        "570-6.8.0-1015-aws-ubuntu24.04",
        "580-5.15.0-119-generic-ubuntu22.04",
    ]


def test_an_os_tag_without_a_recipe_says_why_and_stays_out_of_the_matrix() -> None:
    rhel = ImageKey("580", "5.14.0-427.13.1.el9_4.x86_64", "rhel9")
    resolute = ImageKey("595", "7.0.0-12-generic", "ubuntu26.04")
    entries = build_entries([rhel, resolute, JAMMY], REPOSITORY, RECIPES)
    reasons = {entry.key.os_tag: entry.reason for entry in entries}
    assert reasons == {
        "rhel9": "needs a Red Hat subscription",
        "ubuntu26.04": "no precompiled recipe upstream for os tag ubuntu26.04 "
        "(there are: ubuntu22.04, ubuntu24.04)",
        "ubuntu22.04": None,
    }
    assert [entry.recipe is None for entry in entries] == [True, False, True]
    assert [row["os_tag"] for row in github_matrix(entries)["include"]] == ["ubuntu22.04"]


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (ImageKey("58", "5.15.0-119-generic", "ubuntu22.04"), "the driver branch is not"),
        (ImageKey("580;id", "5.15.0-119-generic", "ubuntu22.04"), "the driver branch is not"),
        (ImageKey("580", "5.15.0-119-generic$(id)", "ubuntu22.04"), "the kernel is not an Ubuntu kernel"),
        (ImageKey("580", "5.15.0-generic", "ubuntu22.04"), "the kernel is not an Ubuntu kernel"),
        (ImageKey("580", "5.15.0-119-Generic", "ubuntu22.04"), "the kernel is not an Ubuntu kernel"),
        (ImageKey("580", "5.15.0-119-generic\n", "ubuntu22.04"), "the kernel is not an Ubuntu kernel"),
        (
            ImageKey("580", "5.15.0-119-generic", "ubuntu22.04\n"),
            "no precompiled recipe upstream for os tag (not",
        ),
    ],
)
def test_values_that_fail_the_strict_patterns_get_no_recipe(key: ImageKey, reason: str) -> None:
    [entry] = build_entries([key], REPOSITORY, RECIPES)
    assert entry.recipe is None
    assert entry.reason is not None and entry.reason.startswith(reason)
    assert "$(" not in entry.reason and "\n" not in entry.reason
    assert github_matrix([entry]) == {"include": []}


def test_flavoured_kernels_pass() -> None:
    for kernel in ("6.8.0-1020-azure-fde", "6.8.0-1011-nvidia", "5.15.0-1063-oracle", "7.0.0-12-generic"):
        [entry] = build_entries([ImageKey("580", kernel, "ubuntu24.04")], REPOSITORY, RECIPES)
        assert entry.recipe is not None, kernel


@pytest.mark.parametrize(
    "repository",
    [
        "",
        "registry.example/Driver",
        "-registry.example/driver",
        "registry.example/driver:tag",
        "registry.example",
        "a b/c",
        "r/x;y",
    ],
)
def test_a_target_repository_that_is_not_an_oci_name_is_refused(repository: str) -> None:
    with pytest.raises(BuildPlanError, match="is not an OCI repository name"):
        build_entries([JAMMY], repository, RECIPES)


def test_a_registry_host_may_have_capitals_and_a_port() -> None:
    [entry] = build_entries([JAMMY], "Registry.Example:5000/gpu/driver", RECIPES)
    assert entry.image == "Registry.Example:5000/gpu/driver:580-5.15.0-119-generic-ubuntu22.04"
    assert github_matrix([entry])["include"][0]["image"] == entry.image


def test_the_matrix_checks_each_row_again() -> None:
    [entry] = build_entries([JAMMY], REPOSITORY, RECIPES)
    assert entry.recipe is not None
    forged = BuildEntry(
        ImageKey("580", "5.15.0-119-generic;id", "ubuntu22.04"), entry.image, entry.recipe, None
    )
    with pytest.raises(BuildPlanError, match="the kernel of"):
        github_matrix([forged])
    elsewhere = BuildEntry(JAMMY, f"{REPOSITORY}:other", entry.recipe, None)
    with pytest.raises(
        BuildPlanError, match=re.escape("is not <repository>:580-5.15.0-119-generic-ubuntu22.04")
    ):
        github_matrix([elsewhere])
    wrong_recipe = BuildEntry(JAMMY, entry.image, RECIPES.by_os_tag["ubuntu24.04"], None)
    with pytest.raises(BuildPlanError):
        github_matrix([wrong_recipe])


def test_a_tag_twice_is_refused_and_the_matrix_stops_at_githubs_limit() -> None:
    [entry] = build_entries([JAMMY], REPOSITORY, RECIPES)
    with pytest.raises(BuildPlanError, match=re.escape("the tag 580-5.15.0-119-generic-ubuntu22.04 twice")):
        github_matrix([entry, entry])
    keys = [ImageKey("580", f"5.15.0-{number}-generic", "ubuntu22.04") for number in range(300)]
    rows = github_matrix(build_entries(keys, REPOSITORY, RECIPES))["include"]
    assert len(rows) == build_plan.MATRIX_LIMIT == 256
    assert rows[0]["kernel"] == "5.15.0-0-generic"  # the first in tag order
    assert [row["target_tag"] for row in rows] == sorted(key.tag for key in keys)[:256]


def test_build_lines() -> None:
    rhel = ImageKey("580", "5.14.0-427.el9.x86_64", "rhel9")
    lines = [build_plan.build_line(entry) for entry in build_entries([JAMMY, rhel], REPOSITORY, RECIPES)]
    assert lines == [
        "BUILD 580-5.14.0-427.el9.x86_64-rhel9: needs a Red Hat subscription",
        "BUILD 580-5.15.0-119-generic-ubuntu22.04: ubuntu22.04/precompiled/Dockerfile from "
        "ubuntu:jammy-20260731.1 (linux/amd64)",
    ]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("upstream", "commit"), "main", "commit: 'main' does not pass"),
        (("recipes", 0, "base_image"), "ubuntu:jammy $(id)", "base_image:"),
        (("recipes", 0, "dockerfile"), "../etc", "dockerfile:"),
        (("recipes", 0, "platforms"), "linux/s390x", "platforms:"),
        (("recipes", 1, "os_tag"), "ubuntu22.04", "os tag ubuntu22.04 twice"),
        (("without_recipe", 0, "reason"), "two\nlines", "reason:"),
    ],
)
def test_a_recipe_file_that_fails_is_refused(path: tuple[Any, ...], value: str, message: str) -> None:
    document = copy.deepcopy(DOCUMENT)
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    with pytest.raises(BuildPlanError, match=re.escape(message)):
        build_plan.parse_recipes(document)


def test_the_shipped_recipe_file_parses_and_every_entry_names_its_source() -> None:
    shipped = precompiled.recipes()
    assert shipped.repository == "NVIDIA/gpu-driver-container"
    assert shipped.commit == COMMIT
    assert sorted(shipped.by_os_tag) == ["ubuntu22.04", "ubuntu24.04", "ubuntu26.04"]
    for recipe in shipped.by_os_tag.values():
        assert recipe.folder == f"{recipe.os_tag}/precompiled"
        assert recipe.source.startswith("Makefile:")
    document = json.loads(precompiled.RECIPES_FILE.read_text())
    assert all(entry["source"] for entry in document["without_recipe"])
