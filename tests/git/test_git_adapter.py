"""The git adapter's functions for other commands (the upgrade image gate) on real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters import git
from reconciler.core.images.history import CommitInfo
from reconciler.core.images.tags import ImageKey
from reconciler.errors import GpudrvError
from tests.git.conftest import HEADER, MATRIX, Script

R1 = "550,5.15.0-119-generic,ubuntu22.04"
R2 = "535,5.15.0-107-generic,ubuntu22.04"
KEY2 = ImageKey("535", "5.15.0-107-generic", "ubuntu22.04")


def test_open_repo_from_a_subdirectory_and_outside(script: Script, tmp_path: Path) -> None:
    (script.root / "a" / "b").mkdir(parents=True)
    repo = git.open_repo(script.root / "a" / "b")
    assert Path(str(repo.working_tree_dir)).resolve() == script.root.resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(GpudrvError, match="not inside a git repository"):
        git.open_repo(outside)


def test_read_at(script: Script) -> None:
    script.matrix(R1, newline="\r\n")
    first = script.commit("Start")
    script.matrix(R1, R2)
    script.commit("Add")
    repo = git.open_repo(script.root)
    assert git.read_at(repo, first, MATRIX) == f"{HEADER}\r\n{R1}\r\n"  # bytes exactly as committed
    assert git.read_at(repo, "HEAD", MATRIX) == f"{HEADER}\n{R1}\n{R2}\n"
    assert git.read_at(repo, "HEAD~1", "nope.csv") is None
    with pytest.raises(GpudrvError, match="git ref 'no-such-branch' not found"):
        git.read_at(repo, "no-such-branch", MATRIX)
    with pytest.raises(GpudrvError, match="not found"):
        git.read_at(repo, "--all", MATRIX)
    with pytest.raises(GpudrvError, match="is a tree, not a file"):
        git.read_at(repo, "HEAD", "matrix")


def test_default_merged_ref_prefers_origin_main(script: Script) -> None:
    script.matrix(R1)
    script.commit("Start")
    repo = git.open_repo(script.root)
    assert git.default_merged_ref(repo) == "main"
    script.git("update-ref", "refs/remotes/origin/main", "HEAD")
    assert git.default_merged_ref(repo) == "origin/main"
    script.git("update-ref", "-d", "refs/remotes/origin/main")
    script.git("branch", "-m", "main", "trunk")
    with pytest.raises(GpudrvError, match="neither origin/main nor main exists"):
        git.default_merged_ref(repo)


def test_a_broken_ref_is_named_as_broken(script: Script) -> None:
    script.matrix(R1)
    script.commit("Start")
    script.git("checkout", "-q", "-b", "work")
    (script.root / ".git" / "refs" / "heads" / "main").write_text("garbage\n")
    repo = git.open_repo(script.root)
    broken = f"{script.root}: refs/heads/main is a broken ref: it names no commit git can read"
    with pytest.raises(GpudrvError, match=broken):
        git.default_merged_ref(repo)
    for ref in ("main", "refs/heads/main"):
        with pytest.raises(GpudrvError, match=broken):
            git.commit_of(repo, ref)
    with pytest.raises(GpudrvError, match="git ref 'no-such-branch' not found"):
        git.commit_of(repo, "no-such-branch")
    assert git.commit_of(repo, "work") == script.git("rev-parse", "HEAD")


def test_row_added_at_on_a_ref(script: Script) -> None:
    script.matrix(R1)
    script.commit("Start")
    script.matrix(R1, R2)
    added = script.commit("Add 535 (#8)", author="Bo Builder")
    script.git("branch", "merged")
    script.matrix(R1)
    script.commit("Drop 535 (#9)")
    repo = git.open_repo(script.root)
    assert git.row_added_at(repo, "merged", MATRIX, KEY2) == CommitInfo(
        added, "Bo Builder", script.date(2), 8
    )
    assert git.row_added_at(repo, "HEAD", MATRIX, KEY2) is None  # removed since
    assert git.row_added_at(repo, "merged", MATRIX, ImageKey("1", "2", "3")) is None


def test_repo_path_relative_to_the_working_tree(script: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    (script.root / "sub").mkdir()
    monkeypatch.chdir(script.root / "sub")
    repo, path = git.locate(Path("../matrix/support-matrix.csv"))
    assert path == MATRIX
    assert git.repo_path(repo, Path("x.csv")) == "sub/x.csv"
    with pytest.raises(GpudrvError, match="outside the git repository"):
        git.repo_path(repo, script.root.parent / "elsewhere.csv")
