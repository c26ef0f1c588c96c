"""`gpudrv matrix history` on real repositories with scripted histories, through main()."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_main
from tests.git.conftest import ISOLATED, MATRIX, Script

R1 = "550,5.15.0-119-generic,ubuntu22.04"
R2 = "535,5.15.0-107-generic,ubuntu22.04"
R3 = "550,6.8.0-45-generic,ubuntu24.04"
R4 = "550,6.8.0-52-generic,ubuntu24.04"
R5 = "550,5.15.0-107-generic,ubuntu22.04"


def history(cwd: Path, *args: str) -> list[dict[str, Any]]:
    result = run_main("matrix", "history", "-o", "json", *args, cwd=cwd)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    document = json.loads(result.stdout)
    assert (document["kind"], document["ok"]) == ("matrix-history", True)
    rows: list[dict[str, Any]] = document["rows"]
    return rows


def added(entry: dict[str, Any]) -> tuple[str, str, str, int | None]:
    change = entry["added"]
    return change["commit"], change["author"], change["date"], change["pr"]


def row(entry: dict[str, Any]) -> str:
    return f"{entry['driver_branch']},{entry['kernel']},{entry['os_tag']}"


def test_plain_adds_squash_prs_and_other_files(script: Script) -> None:
    script.matrix(R1, R2)
    first = script.commit("Start the support matrix", author="Ann Author")
    script.write("README.md", "unrelated\n")
    script.commit("Docs only (#3)")
    script.matrix(R1, R2, R3)
    squash = script.commit("Add 550 for kernel 6.8.0-45 (#12)", author="Bo Builder")

    entries = history(script.root)
    assert [row(e) for e in entries] == [R1, R2, R3]
    assert added(entries[0]) == (first, "Ann Author", script.date(1), None)
    assert added(entries[2]) == (squash, "Bo Builder", script.date(3), 12)
    assert all(e["removed"] is None for e in entries)
    assert set(entries[0]) == {"driver_branch", "kernel", "os_tag", "tag", "added", "removed"}
    assert entries[0]["tag"] == "550-5.15.0-119-generic-ubuntu22.04"


def test_merged_pull_request_is_the_merge_commits(script: Script) -> None:
    """Rows of a merged PR belong to the commit that landed them on the branch (first parent)."""
    script.matrix(R1)
    script.commit("Start")
    script.git("checkout", "-q", "-b", "team/add-r2")
    script.matrix(R1, R2)
    script.commit("Add the 535 image", author="Dana Dev")
    script.git("checkout", "-q", "main")
    merge = script.merge("team/add-r2", "Merge pull request #13 from team/add-r2", author="Mo Merger")
    # A second PR while main moved on: the merge is then not the same as either parent.
    script.git("checkout", "-q", "-b", "team/add-r3")
    script.matrix(R1, R2, R3)
    script.commit("Add the 6.8 image", author="Dana Dev")
    script.git("checkout", "-q", "main")
    script.write("README.md", "moved on\n")
    script.commit("Docs")
    merge2 = script.merge("team/add-r3", "Merge pull request #14 from team/add-r3", author="Mo Merger")

    entries = history(script.root)
    assert [row(e) for e in entries] == [R1, R2, R3]
    assert added(entries[1]) == (merge, "Mo Merger", script.date(3), 13)
    assert added(entries[2]) == (merge2, "Mo Merger", script.date(6), 14)


def test_resort_and_reformat_keep_the_original_addition(script: Script) -> None:
    script.matrix(R3, R1)
    script.commit("Start (#1)")
    script.matrix(R3, R1, R2)
    script.commit("Add 535 (#2)", author="Bo Builder")
    before = history(script.root)
    script.matrix(R1, R2, R3)
    script.commit("Sort the matrix (#3)")
    script.matrix('"550","5.15.0-119-generic","ubuntu22.04"', R2, R3, newline="\r\n")
    script.commit("CRLF and quotes (#4)")
    after = history(script.root)
    assert after == before
    assert [e["added"]["pr"] for e in after] == [1, 1, 2]


def test_removal_and_readdition(script: Script) -> None:
    script.matrix(R1, R2)
    script.commit("Start (#1)")
    script.matrix(R1)
    removal = script.commit("Retire 535 (#2)", author="Cy Cleaner")
    script.matrix(R1, R2)
    back = script.commit("Bring 535 back (#3)")

    entries = history(script.root)
    assert [row(e) for e in entries] == [R1, R2, R2]
    assert entries[1]["removed"] == {
        "commit": removal,
        "author": "Cy Cleaner",
        "date": script.date(2),
        "pr": 2,
    }
    assert entries[2]["added"]["commit"] == back and entries[2]["removed"] is None
    assert entries[0]["removed"] is None


def test_text_output(script: Script) -> None:
    script.matrix(R1)
    sha = script.commit("Start (#1)")
    script.matrix()
    gone = script.commit("Empty it")
    result = run_main("matrix", "history", cwd=script.root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ROW                                 ADDED                                REMOVED",
        f"550,5.15.0-119-generic,ubuntu22.04  2024-03-01 {sha[:8]} Ann Author (#1)  "
        f"2024-03-02 {gone[:8]} Ann Author",
    ]


def test_from_a_subdirectory_of_a_bigger_repository(script: Script) -> None:
    script.matrix(R1, path=f"infra/gpu/{MATRIX}")
    script.write("infra/gpu/clusters/lab/README.md", "nodes\n")
    script.commit("Start (#5)")
    project = script.root / "infra" / "gpu"
    assert [row(e) for e in history(project)] == [R1]  # the default --matrix, relative to the CWD
    assert [row(e) for e in history(project / "clusters", "--matrix", f"../{MATRIX}")] == [R1]


def test_shallow_clone_says_fetch_depth_0(script: Script, tmp_path: Path) -> None:
    script.matrix(R1)
    script.commit("Start")
    script.matrix(R1, R2)
    script.commit("Add (#2)")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{script.root}", str(clone)],
        env={**ISOLATED, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    result = run_main("matrix", "history", cwd=clone)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert "shallow clone" in result.stderr and "fetch-depth: 0" in result.stderr


def test_errors_are_one_line(script: Script, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    result = run_main("matrix", "history", cwd=outside)
    assert (result.returncode, result.stderr) == (2, f"gpudrv: {MATRIX}: not inside a git repository\n")

    result = run_main("matrix", "history", cwd=script.root)
    assert (result.returncode, result.stderr) == (2, f"gpudrv: {script.root}: no commits yet\n")

    script.write("README.md", "x\n")
    script.commit("No matrix yet")
    result = run_main("matrix", "history", cwd=script.root)
    assert result.returncode == 2
    assert result.stderr == f"gpudrv: {MATRIX}: no such file, and no commit on HEAD ever had it\n"

    result = run_main("matrix", "history", "--matrix", str(outside / "m.csv"), cwd=script.root)
    assert result.returncode == 2 and "not inside a git repository" in result.stderr


def test_uncommitted_matrix_has_no_history(script: Script) -> None:
    script.write("README.md", "x\n")
    script.commit("Start")
    script.matrix(R1)
    assert history(script.root) == []


@pytest.mark.parametrize(
    "junk",
    ["garbage\n", "0123456789012345678901234567890123456789\n"],  # no hash at all; a commit that is not there
)
def test_a_broken_branch_ref_is_named_not_no_commits(script: Script, junk: str) -> None:
    script.matrix(R1)
    script.commit("Start")
    (script.root / ".git" / "refs" / "heads" / "main").write_text(junk)
    result = run_main("matrix", "history", cwd=script.root)
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpudrv: {script.root}: HEAD (refs/heads/main) is a broken ref: ")
    assert "no commits yet" not in line


def test_a_detached_head_on_a_missing_commit_is_broken_too(script: Script) -> None:
    script.matrix(R1)
    script.commit("Start")
    (script.root / ".git" / "HEAD").write_text("0123456789012345678901234567890123456789\n")
    result = run_main("matrix", "history", cwd=script.root)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"gpudrv: {script.root}: HEAD is a broken ref: it names no commit git can read"
    )
