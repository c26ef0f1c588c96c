"""`gpudrv matrix impact --base REF --from DIR` on a git copy of the example fleet (docs/lab.md steps 4
and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.git.conftest import MATRIX, Script

NODE_3 = (Path(__file__).parents[1] / "cli" / "test_offline_lab.py").read_text().split('"""')[3]
ROW_3 = "550,6.8.0-52-generic,ubuntu24.04"
TAG_3 = "550-6.8.0-52-generic-ubuntu24.04"
ARROW = "\u2192"


@pytest.fixture
def fleet(lab: Path) -> Script:
    """The example fleet, committed on main; lab-node-3 joins in the working tree."""
    script = Script.committed(lab, "The lab fleet (#1)")
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    return script


def impact(fleet: Script, *args: str) -> tuple[int, str]:
    result = run_main("matrix", "impact", "--from", "clusters/lab", *args, cwd=fleet.root)
    assert result.stderr == ""
    return result.returncode, result.stdout


def test_added_row_fixes_the_new_node(fleet: Script) -> None:
    assert impact(fleet, "--base", "main")[1].splitlines()[1:3] == [
        "no rows added or removed",
        f"lab-node-0: OK {ARROW} OK  550-5.15.0-119-generic-ubuntu22.04",
    ]
    assert run_main("matrix", "add", "--tag", TAG_3, cwd=fleet.root).returncode == 0

    code, out = impact(fleet, "--base", "main")
    assert code == 0
    assert out.splitlines() == [
        f"{MATRIX}: main {ARROW} working tree",
        f"+ {ROW_3}",
        f"lab-node-0: OK {ARROW} OK  550-5.15.0-119-generic-ubuntu22.04",
        f"lab-node-1: OK {ARROW} OK  535-5.15.0-107-generic-ubuntu22.04",
        f"lab-node-2: OK {ARROW} OK  550-6.8.0-45-generic-ubuntu24.04",
        f"lab-node-3: MISSING {ARROW} OK  {TAG_3}",
    ]


def test_markdown_for_a_pr_summary(fleet: Script) -> None:
    run_main("matrix", "add", "--tag", TAG_3, cwd=fleet.root)
    code, out = impact(fleet, "--base", "HEAD", "-o", "markdown")
    assert code == 0
    assert out.splitlines() == [
        f"### Support matrix impact: `{MATRIX}`, `HEAD` {ARROW} this change",
        "",
        "| Row | Image tag | Change |",
        "|---|---|---|",
        f"| `{ROW_3}` | `{TAG_3}` | added |",
        "",
        "| Node | Image tag | Before | After |",
        "|---|---|---|---|",
        "| lab-node-0 | `550-5.15.0-119-generic-ubuntu22.04` | OK | OK |",
        "| lab-node-1 | `535-5.15.0-107-generic-ubuntu22.04` | OK | OK |",
        "| lab-node-2 | `550-6.8.0-45-generic-ubuntu24.04` | OK | OK |",
        f"| lab-node-3 | `{TAG_3}` | MISSING | **OK** |",
    ]


def test_removing_a_row_in_use_exits_1(fleet: Script) -> None:
    path = fleet.root / MATRIX
    path.write_text(path.read_text().replace("535,5.15.0-107-generic,ubuntu22.04\n", ""))
    code, out = impact(fleet, "--base", "main", "-o", "json")
    assert code == 1
    data = json.loads(out)
    assert data["removed"] == [
        {
            "driver_branch": "535",
            "kernel": "5.15.0-107-generic",
            "os_tag": "ubuntu22.04",
            "tag": "535-5.15.0-107-generic-ubuntu22.04",
        }
    ]
    assert [node["node"] for node in data["findings"]] == ["lab-node-1"]
    assert data["ok"] is False
    node_1 = next(n for n in data["nodes"] if n["node"] == "lab-node-1")
    assert node_1 == {
        "node": "lab-node-1",
        "tag": "535-5.15.0-107-generic-ubuntu22.04",
        "before_tag": "535-5.15.0-107-generic-ubuntu22.04",  # the lab's contract: the same on both sides
        "cause": None,
        "reason": None,
        "before": "OK",
        "after": "MISSING",
        "next_kernel": None,
        "next_tag": None,
        "changed": True,
        "broken": True,
    }


def test_base_without_the_matrix_adds_every_row(fleet: Script) -> None:
    fleet.git("checkout", "-q", "--orphan", "empty")
    fleet.git("rm", "-rq", "--cached", ".")
    fleet.git("commit", "-q", "--allow-empty", "-m", "Nothing yet")  # an empty tree
    fleet.git("checkout", "-q", "-f", "main")
    (fleet.root / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    code, out = impact(fleet, "--base", "empty")
    assert code == 0
    assert out.splitlines()[1:4] == [
        "+ 550,5.15.0-119-generic,ubuntu22.04",
        "+ 535,5.15.0-107-generic,ubuntu22.04",
        "+ 550,6.8.0-45-generic,ubuntu24.04",
    ]


def test_unknown_base_is_one_line(fleet: Script) -> None:
    result = run_main("matrix", "impact", "--base", "origin/nope", "--from", "clusters/lab", cwd=fleet.root)
    assert result.returncode == 2
    assert result.stderr.startswith("gpudrv: git ref 'origin/nope' not found in ")
    assert len(result.stderr.splitlines()) == 1


def test_base_is_required(fleet: Script) -> None:
    result = run_main("matrix", "impact", "--from", "clusters/lab", cwd=fleet.root)
    assert result.returncode == 2 and "--base" in result.stderr
