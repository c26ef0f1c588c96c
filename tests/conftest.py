"""Shared helpers: run the real `gpudrv` entry point, and a copy of the example fleet to change freely."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpudrv_command() -> list[str]:
    """The installed console script next to this interpreter, as a user would run it."""
    script = Path(sys.executable).with_name("gpudrv")
    if not script.exists():
        raise RuntimeError(f"gpudrv is not installed next to {sys.executable}: run pip install -e '.[dev]'")
    return [str(script)]


# Inside GitHub Actions gpudrv defaults to GitHub output; tests that want it say so in `env`.
GITHUB_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")


def gpudrv_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without GitHub's variables, plus `env`."""
    inherited = {key: value for key, value in os.environ.items() if key not in GITHUB_VARIABLES}
    return {**inherited, **(env or {})}


def run_gpudrv(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = gpudrv_env(env)
    return subprocess.run(
        [*gpudrv_command(), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A working copy of the bundled example: matrix/ and clusters/lab/."""
    shutil.copytree(REPO / "matrix", tmp_path / "matrix")
    shutil.copytree(REPO / "clusters", tmp_path / "clusters")
    return tmp_path
