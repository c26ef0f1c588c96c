"""Issue 22, item 7: `gpudrv init` into a fresh git repository, then the pre-commit hooks it wrote, for
real: `pre-commit run --all-files` passes, the first `git commit` goes through the installed hook, and
a commit that breaks the matrix is refused by it (so the hook is known to run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import gpudrv_env, run_gpudrv

ACTION = f"example/gpudrv@{'0' * 40}"
IDENTITY = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]


def pre_commit() -> str:
    found = Path(sys.executable).with_name("pre-commit")
    if not found.exists():
        raise RuntimeError(f"pre-commit is not installed next to {sys.executable}: pip install -e '.[dev]'")
    return str(found)


def run(folder: Path, env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_hooks_init_writes_pass_and_guard_the_first_commit(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    # The gpudrv under test first on PATH (the hooks are local: `gpudrv` on PATH); pre-commit's cache
    # inside the test's folder; git's user configuration out of the way.
    env = gpudrv_env(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache"),
            "HOME": str(tmp_path),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    assert run(fleet, env, "git", "init", "-q", "-b", "main").returncode == 0
    made = run_gpudrv("init", "--action", ACTION, cwd=fleet, env=env)
    assert made.returncode == 0, made.stderr
    assert "git init" not in made.stdout  # already a repository: not among the next steps
    assert (
        f"  pre-commit: it runs the hooks of .pre-commit-config.yaml (found: {pre_commit()})" in made.stdout
    )

    assert run(fleet, env, "git", "add", "-A").returncode == 0
    checked = run(fleet, env, pre_commit(), "run", "--all-files")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "gpudrv matrix validate" in checked.stdout and "gpudrv manifests validate" in checked.stdout
    assert "Passed" in checked.stdout and "Failed" not in checked.stdout

    installed = run(fleet, env, pre_commit(), "install")
    assert installed.returncode == 0, installed.stderr
    first = run(fleet, env, "git", *IDENTITY, "commit", "-m", "Fleet repository for gpudrv")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "gpudrv matrix validate" in first.stdout + first.stderr  # the hook ran
    log = run(fleet, env, "git", "log", "--format=%s")
    assert log.stdout == "Fleet repository for gpudrv\n"

    with (fleet / "matrix/support-matrix.csv").open("a") as handle:
        handle.write("r550,5.15.0-1-generic,ubuntu22.04\n")  # not a driver branch
    assert run(fleet, env, "git", "add", "-A").returncode == 0
    refused = run(fleet, env, "git", *IDENTITY, "commit", "-m", "a bad row")
    assert refused.returncode != 0
    assert "matrix/support-matrix.csv:3" in refused.stdout + refused.stderr
    assert run(fleet, env, "git", "log", "--format=%s").stdout == "Fleet repository for gpudrv\n"
