"""The os-tag rule per GPU Operator release, against the operator's code (docs/operator-contract.md)."""

import pytest

from reconciler.adapters.files import operator_contract
from reconciler.core.images import os_tags, tags
from reconciler.core.images.os_tags import RuleError

RULES = operator_contract.rules()
# (ID, VERSION_ID): the os tag under v25.10.x, v26.3.0, v26.3.1-3 and v26.7.0, as the operator computes it.
EXPECTED = {
    ("ubuntu", "22.04"): ("ubuntu22.04", "ubuntu22.04", "ubuntu22.04", "ubuntu22.04"),
    ("ubuntu", "24.04"): ("ubuntu24.04", "ubuntu24.04", "ubuntu24.04", "ubuntu24.04"),
    ("debian", "12"): ("debian12", "debian12", "debian12", "debian12"),
    ("rhel", "8.10"): ("rhel8.10", "rhel8.10", "rhel8.10", "rhel8"),
    ("rhel", "9.4"): ("rhel9.4", "rhel9.4", "rhel9.4", "rhel9"),
    ("rhel", "10.0"): ("rhel10.0", "rhel10", "rhel10", "rhel10"),
    ("rhel", "10.1"): ("rhel10.1", "rhel10", "rhel10", "rhel10"),
    ("rocky", "8.10"): ("rocky8.10", "rocky8", "rocky8", "rocky8"),
    ("rocky", "9.5"): ("rocky9.5", "rocky9", "rocky9", "rocky9"),
    ("ol", "8.9"): ("ol8.9", "ol8.9", "ol8.9", "ol8"),
    ("ol", "9.4"): ("ol9.4", "ol9.4", "ol9.4", "ol9"),
    ("sles", "15.6"): ("sles15.6", "sles15.6", "sles15.6", "sles15.6"),
    ("amzn", "2023"): ("amzn2023", "amzn2023", "amzn2023", "amzn2023"),
    ("amzn", "2"): ("amzn2", "amzn2", "amzn2", "amzn2"),
    ("rhcos", "4.16"): ("rhcos4.16", "rhcos4.16", "rhcos4.16", "rhcos4.16"),
    ("archlinux", "rolling"): ("archlinuxrolling", None, "archlinuxrolling", "archlinuxrolling"),
}
RELEASES = ("v25.10.1", "v26.3.0", "v26.3.3", "v26.7.0")


@pytest.mark.parametrize(("os_id", "version"), sorted(EXPECTED))
@pytest.mark.parametrize("release", RELEASES)
def test_rule_per_release(os_id: str, version: str, release: str) -> None:
    expected = EXPECTED[(os_id, version)][RELEASES.index(release)]
    rule = RULES.for_version(release)
    if expected is None:  # v26.3.0 parses the major of every ID as an integer and fails otherwise
        with pytest.raises(RuleError, match="not an integer"):
            rule.os_tag(os_id, version)
    else:
        assert rule.os_tag(os_id, version) == expected


@pytest.mark.parametrize("release", ["v24.9.2", "v25.3.4", "v25.10.0", "25.10.1"])
def test_older_releases_keep_the_whole_version(release: str) -> None:
    assert RULES.for_version(release).os_tag("rhel", "9.4") == "rhel9.4"


def test_v26_3_1_parses_only_rhel_and_drops_a_leading_v() -> None:
    rule = RULES.for_version("v26.3.1")
    assert rule.os_tag("talos", "v1.12.6") == "talosv1.12.6"
    assert rule.os_tag("rhel", "v10.0") == "rhelv10"  # parseOSMajorVersion strips the v; the tag keeps it
    with pytest.raises(RuleError):
        rule.os_tag("rhel", "ten")


def test_v26_7_cuts_without_parsing() -> None:
    rule = RULES.for_version("v26.7.0")
    assert rule.os_tag("talos", "v1.12.6") == "talosv1.12.6"
    assert rule.os_tag("rhel", "nine.4") == "rhelnine"


def test_the_lab_default_is_the_newest_rule() -> None:
    for os_id, version in EXPECTED:
        assert tags.os_tag(os_id, version) == RULES.newest.os_tag(os_id, version)


@pytest.mark.parametrize("version", ["v26.4.0", "v23.9.2", "v27.1.0"])
def test_unknown_release_lines(version: str) -> None:
    with pytest.raises(RuleError, match="unknown GPU Operator release"):
        RULES.for_version(version)


@pytest.mark.parametrize("version", ["v99", "99", "v26.9", "v27"])
def test_unknown_release_lines_as_a_chart_writes_them(version: str) -> None:
    # A chart's partial version (Masterminds: v99 is 99.x): the line is named, not "not a release".
    with pytest.raises(
        RuleError, match=f"unknown GPU Operator release line '{version}': gpudrv knows the lines"
    ):
        RULES.for_version(version)


@pytest.mark.parametrize("version", ["main-latest", "", "26", "v26.x", "0.0.0-git-abc"])
def test_not_a_release(version: str) -> None:
    with pytest.raises(RuleError):
        RULES.for_version(version)


def test_future_patches_of_known_lines_take_their_line_s_rule() -> None:
    assert RULES.for_version("v26.7.5").os_tag("ol", "9.4") == "ol9"
    assert RULES.for_version("v26.3.9-rc.1").os_tag("ol", "9.4") == "ol9.4"


def test_every_rule_names_its_source() -> None:
    assert all("gpu-operator v" in rule.source and ".go:" in rule.source for rule in RULES.rules)


def test_rules_must_cover_each_line_once() -> None:
    data = {
        "releaseLines": ["v26.3"],
        "rules": [
            {"releases": "a", "since": None, "until": None, "source": "x"},
            {"releases": "b", "since": "v26.3.0", "until": None, "source": "y"},
        ],
    }
    with pytest.raises(RuleError, match="covered 2 times"):
        os_tags.parse_rules(data)
