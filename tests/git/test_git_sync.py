"""The clone `gpudrv reconcile` keeps: fetched from a real repository (a path, as a local remote is),
one branch only, checked out exactly, with a worktree for apply; and the commit it puts in force."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from reconciler.adapters import git
from reconciler.adapters.git.sync import Credentials, Fetched, GitSync, Source
from reconciler.commands.reconcile import load_snapshot
from reconciler.commands.settings import ReconcileSettings
from reconciler.errors import GpudrvError
from tests.git.conftest import Script

ROW = "550,5.15.0-119-generic,ubuntu22.04"


def test_only_the_newest_commit_of_the_branch(script: Script, tmp_path: Path) -> None:
    script.matrix(ROW)
    first = script.commit("the fleet")
    script.git("checkout", "-q", "-b", "feature")
    script.matrix(ROW, "535,5.15.0-107-generic,ubuntu22.04")
    script.commit("on a branch")
    script.git("checkout", "-q", "main")
    clone = tmp_path / "clone"
    assert git.fetch_branch(clone, str(script.root), "main", {}, 30) == first
    git.check_out(clone, first)
    assert (clone / "matrix/support-matrix.csv").read_text().count("\n") == 2
    assert git.commit_of(git.open_repo(clone), "refs/remotes/origin/main") == first
    # A new commit on main is fetched; stray files in the checkout are gone after the next checkout.
    script.matrix(ROW, "550,6.8.0-45-generic,ubuntu24.04")
    second = script.commit("a row")
    (clone / "stray.txt").write_text("x")
    assert git.fetch_branch(clone, str(script.root), "main", {}, 30) == second
    git.check_out(clone, second)
    assert not (clone / "stray.txt").exists()
    assert git.commit_time(clone, second) > 0
    # Tags and other branches are not fetched.
    assert git.open_repo(clone).git.branch("-r").split() == ["origin/main"]


def test_a_clone_cut_short_starts_again(script: Script, tmp_path: Path) -> None:
    script.matrix(ROW)
    commit = script.commit("the fleet")
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)  # killed right after git init began
    assert git.fetch_branch(clone, str(script.root), "main", {}, 30) == commit


def test_a_missing_branch_or_remote_is_one_error_without_credentials(script: Script, tmp_path: Path) -> None:
    script.matrix(ROW)
    script.commit("the fleet")
    with pytest.raises(GpudrvError, match=r"git fetch .* nope: .*nope"):
        git.fetch_branch(tmp_path / "c", str(script.root), "nope", {}, 30)
    with pytest.raises(GpudrvError, match=r"git fetch https://user:\*\*\*@127.0.0.1:9/x.git main"):
        git.fetch_branch(
            tmp_path / "d", "https://user:tok@127.0.0.1:9/x.git", "main", {"GIT_TERMINAL_PROMPT": "0"}, 30
        )


def test_redact() -> None:
    assert (
        git.redact("https://x-access-token:ghp_abc@github.com/o/r.git")
        == "https://x-access-token:***@github.com/o/r.git"
    )
    assert git.redact("https://ghp_abc@github.com/o/r.git") == "https://***@github.com/o/r.git"
    assert git.redact("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert git.redact("/srv/fleet.git") == "/srv/fleet.git"


def test_a_worktree_at_the_commit_for_apply(script: Script, tmp_path: Path) -> None:
    script.matrix(ROW)
    commit = script.commit("the fleet")
    clone = tmp_path / "clone"
    git.fetch_branch(clone, str(script.root), "main", {}, 30)
    git.check_out(clone, commit)
    tree = tmp_path / "apply"
    git.add_worktree(clone, tree, commit)
    assert (tree / "matrix/support-matrix.csv").is_file()
    repo, path = git.locate(tree / "matrix/support-matrix.csv")
    assert path == "matrix/support-matrix.csv" and git.read_at(repo, commit, path) is not None
    git.remove_worktree(clone, tree)
    assert not tree.exists()


def test_the_commit_in_force_reads_the_repositorys_gpudrv_yaml(script: Script, tmp_path: Path) -> None:
    script.write("fleet/matrix.csv", f"driver_branch,kernel,os_tag\n{ROW}\n")
    script.write("gpudrv.yaml", "matrix: fleet/matrix.csv\nfleet: clusters/prod\noperatorVersion: v25.3.0\n")
    commit = script.commit("the fleet, configured")
    clone = tmp_path / "clone"
    git.fetch_branch(clone, str(script.root), "main", {}, 30)
    git.check_out(clone, commit)
    settings = ReconcileSettings(str(script.root), workdir=tmp_path)
    snapshot = load_snapshot(clone, commit, settings)
    assert (snapshot.matrix, snapshot.fleet, snapshot.operator_version) == (
        "fleet/matrix.csv", "clusters/prod", "v25.3.0",
    )  # fmt: skip
    assert snapshot.tags == {"550-5.15.0-119-generic-ubuntu22.04"}
    # Flags win; a path out of the repository is refused; a broken matrix is refused.
    pinned = ReconcileSettings("x", workdir=tmp_path, repo_matrix="../../etc/passwd")
    with pytest.raises(GpudrvError, match="outside the repository"):
        load_snapshot(clone, commit, pinned)
    script.write("fleet/matrix.csv", "driver_branch,kernel,os_tag\nr550,x,y\n")
    broken = script.commit("broken")
    git.fetch_branch(clone, str(script.root), "main", {}, 30)
    git.check_out(clone, broken)
    with pytest.raises(GpudrvError, match=r"fleet/matrix\.csv:2"):
        load_snapshot(clone, broken, settings)


def test_the_sync_thread_posts_each_new_commit_once_and_survives_failures(
    script: Script, tmp_path: Path
) -> None:
    script.matrix(ROW)
    first = script.commit("the fleet")
    posted: queue.Queue[Fetched] = queue.Queue()
    results: queue.Queue[tuple[bool, str | None]] = queue.Queue()
    sync = GitSync(Source(str(script.root), "main", Credentials()), tmp_path / "work" / "repo", 3600,
                   posted.put, lambda ok, error: results.put((ok, error))).start()  # fmt: skip
    try:
        assert posted.get(timeout=30) == Fetched(first)
        assert results.get(timeout=5) == (True, None)
        sync.trigger()  # nothing new: nothing posted
        assert results.get(timeout=30) == (True, None)
        assert posted.empty()
        moved = script.root.rename(tmp_path / "elsewhere")
        sync.trigger()
        ok, error = results.get(timeout=30)
        assert not ok and error is not None and "git fetch" in error
        moved.rename(script.root)
        script.matrix(ROW, "535,5.15.0-107-generic,ubuntu22.04")
        second = script.commit("a row")
        sync.trigger()
        assert posted.get(timeout=30) == Fetched(second)
    finally:
        sync.stop()
