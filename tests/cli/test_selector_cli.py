"""Issue 12, item 6: `-l/--selector` on the commands that list nodes; offline, on the manifests' labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main


def audited(lab: Path, *selector: str) -> list[str]:
    result = run_main("audit", "--from", "clusters/lab", "-o", "json", *selector, cwd=lab)
    assert result.returncode in (0, 1), result.stderr
    return [node["node"] for node in json.loads(result.stdout)["nodes"]]


def test_audit_selects_nodes_by_their_declared_labels(lab: Path) -> None:
    everyone = audited(lab)
    assert len(everyone) > 2
    assert audited(lab, "-l", "kubernetes.io/hostname=lab-node-1") == ["lab-node-1"]
    assert audited(lab, "--selector", "kubernetes.io/hostname notin (lab-node-1)") == [
        name for name in everyone if name != "lab-node-1"
    ]
    assert audited(lab, "-l", "nvidia.com/cuda.driver.major in (535),type=kwok") == ["lab-node-1"]
    assert audited(lab, "-l", "no-such-label", "--allow-empty") == []


def test_a_selector_that_matches_no_node_is_an_error(lab: Path) -> None:
    result = run_main("audit", "--from", "clusters/lab", "-l", "no-such-label", cwd=lab)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "gpudrv: no GPU node in clusters/lab matches -l no-such-label: nothing was checked "
        "(--allow-empty if that is expected)\n"
    )


def test_a_missing_image_outside_the_selection_is_not_reported(lab: Path) -> None:
    node = lab / "clusters/lab/nodes/lab-node-1.yaml"
    node.write_text(node.read_text().replace('"5.15.0-107-generic"', '"9.9.9-odd"'))
    assert run_main("audit", "--from", "clusters/lab", cwd=lab).returncode == 1
    other = run_main("audit", "--from", "clusters/lab", "-l", "kubernetes.io/hostname!=lab-node-1", cwd=lab)
    assert (other.returncode, other.stdout) == (0, "OK\n")


def test_explain_judges_only_the_selected_nodes(lab: Path) -> None:
    result = run_main(
        "explain", "--from", "clusters/lab", "-o", "json", "-l", "kubernetes.io/hostname=lab-node-2", cwd=lab
    )
    reports = json.loads(result.stdout)["workloads"]
    assert reports
    for report in reports:
        assert [node["node"] for node in report["nodes"]] == ["lab-node-2"]


@pytest.mark.parametrize(
    "command",
    [
        ["audit", "--from", "clusters/lab"],
        ["explain", "--from", "clusters/lab"],
        ["status"],
        ["report"],
        ["diff", "--from", "clusters/lab"],
        ["plan", "--from", "clusters/lab"],
        ["apply", "--from", "clusters/lab"],
        ["matrix", "impact", "--base", "main"],
    ],
)
def test_a_bad_selector_is_one_line_before_anything_is_read(lab: Path, command: list[str]) -> None:
    result = run_main(*command, "-l", "pool in (a", cwd=lab)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "-l/--selector: 'pool in (a': expected ',' or ')'" in result.stderr
    empty = run_main(*command, "-l", "", cwd=lab)
    assert (empty.returncode, empty.stderr) == (
        2,
        "gpudrv: -l/--selector: empty selector (is a variable unset?)\n",
    )


def test_commands_for_one_node_take_no_selector(lab: Path) -> None:
    for command in (["tag", "lab-node-0", "--from", "clusters/lab"], ["drain", "lab-node-0"]):
        result = run_main(*command, "-l", "a=b", cwd=lab)
        assert result.returncode == 2
        assert "unrecognized arguments: -l a=b" in result.stderr
