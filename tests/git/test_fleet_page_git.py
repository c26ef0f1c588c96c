"""The fleet page's history and commit from real repositories: a full clone, a shallow one, a dirty tree."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REPO, run_main
from tests.git.conftest import ISOLATED, Script

R1 = "550,5.15.0-119-generic,ubuntu22.04"
R2 = "535,5.15.0-107-generic,ubuntu22.04"
R3 = "550,6.8.0-45-generic,ubuntu24.04"


def fleet(script: Script) -> None:
    """The lab's nodes beside the matrix."""
    for path in sorted((REPO / "clusters" / "lab" / "nodes").glob("*.yaml")):
        script.write(f"clusters/lab/nodes/{path.name}", path.read_text())


def page(cwd: Path) -> str:
    result = run_main("report", "--from", "clusters/lab", "-o", "html", cwd=cwd)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def test_history_points_carry_author_and_pr(script: Script) -> None:
    fleet(script)
    script.matrix(R1)
    script.commit("Start the matrix", author="Ann Author")
    script.matrix(R1, R2)
    script.commit("Add the 535 image (#12)", author="Bo Builder")
    script.matrix(R2, R3)
    head = script.commit("Swap 550 kernels (#15)", author="Cy Ops")
    html = page(script.root)
    assert f'<dd id="commit"><code>{head}</code></dd>' in html
    titles = re.findall(r"<circle [^>]*><title>([^<]*)</title>", html)
    assert len(titles) == 3
    assert titles[0].startswith("2024-03-01 | ")
    assert "Ann Author | no PR" in titles[0]
    assert (
        "Bo Builder | PR #12&#10;+1 / -0 rows, 2 after&#10;+535-5.15.0-107-generic-ubuntu22.04" in titles[1]
    )
    assert "Cy Ops | PR #15&#10;+1 / -1 rows, 2 after" in titles[2]
    assert re.search(r'<circle class="both"', html)  # added and removed rows in one commit
    # The table of changes, newest first, says the same.
    rows = re.findall(r"<tr><td>(\d{4}-\d\d-\d\d)</td><td><code>(\w+)</code></td><td>([^<]+)</td>", html)
    assert [(date, author) for date, _sha, author in rows] == [
        ("2024-03-03", "Cy Ops"),
        ("2024-03-02", "Bo Builder"),
        ("2024-03-01", "Ann Author"),
    ]


def test_uncommitted_changes_are_named(script: Script) -> None:
    fleet(script)
    script.matrix(R1)
    script.commit("Start the matrix")
    script.matrix(R1, R2)  # not committed
    assert "the work tree has uncommitted changes</dd>" in page(script.root)


def test_shallow_clone_says_so_instead_of_failing(script: Script, tmp_path: Path) -> None:
    fleet(script)
    for rows in ([R1], [R1, R2], [R1, R2, R3]):
        script.matrix(*rows)
        head = script.commit(f"{len(rows)} rows")
    clone = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", script.root.as_uri(), str(clone)],
        env={**ISOLATED, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    html = page(clone)
    assert f'<dd id="commit"><code>{head}</code></dd>' in html
    note = re.search(r'<p class="notice" id="history-unavailable">([^<]*)</p>', html)
    assert note and "is a shallow clone: the matrix history needs the full clone" in note[1]
    assert "<circle" not in html
    # The rest of the page is all there.
    assert len(re.findall(r'<td class="c ok"', html)) == 3


def test_no_commits_yet(script: Script) -> None:
    fleet(script)
    script.matrix(R1)
    html = page(script.root)
    assert re.search(r'<dd id="commit">none &#8212; [^<]*: no commits yet</dd>', html)
    assert "No matrix history on this page:" in html
