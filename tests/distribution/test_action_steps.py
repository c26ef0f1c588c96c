"""The gpudrv action's own steps (action.yml), bash as the runner runs them, in a fresh virtual
environment standing in for the Python that actions/setup-python provides: the install step builds
and installs gpudrv from the action's source (not editable) once per job, and the run step audits the
example fleet with GitHub output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler import __version__
from tests.conftest import REPO


def action_step(predicate: str) -> dict[str, Any]:
    steps = YAML(typ="safe").load((REPO / "action.yml").read_text())["runs"]["steps"]
    [step] = [step for step in steps if predicate in step.get("run", "")]
    return step


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_action_installs_gpudrv_once_and_runs_it(tmp_path: Path) -> None:
    venv = tmp_path / "python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    shutil.copytree(REPO / "matrix", tmp_path / "workspace" / "matrix")
    shutil.copytree(REPO / "clusters", tmp_path / "workspace" / "clusters")
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_")) and key not in {"VIRTUAL_ENV", "PYTHONPATH"}
    }
    env = {
        **inherited,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTION_PATH": str(REPO),
        "RUNNER_TEMP": str(runner_temp),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    workspace = tmp_path / "workspace"

    install = action_step("pip install")["run"]
    first = bash(install, workspace, env)
    assert (first.returncode, first.stdout) == (0, f"gpudrv {__version__}\n"), first.stderr[-3000:]
    [marker] = runner_temp.glob("gpudrv-installed-*")
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import reconciler; print(reconciler.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert installed.stdout.startswith(str(venv)), "installed from the source, not editable"
    marker.write_text("")  # the second call of the job: no pip at all, even with pip unusable
    second = bash(install, workspace, {**env, "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_NO_INDEX": "1"})
    assert (second.returncode, second.stdout) == (0, f"gpudrv {__version__}\n"), second.stderr

    step = action_step("reconciler.action")
    summary = runner_temp / "summary.md"
    inputs = {"GPUDRV_COMMAND": "audit", "GPUDRV_ARGS": "--from clusters/lab", "GPUDRV_OUTPUT": "github"}
    audit = bash(step["run"], workspace, {**env, **inputs, "GITHUB_STEP_SUMMARY": str(summary)})
    assert (audit.returncode, audit.stdout, audit.stderr) == (
        0,
        "gpudrv audit: 3 GPU nodes, 0 MISSING, 0 INVALID\n",
        "",
    )
    assert summary.read_text().startswith("### gpudrv audit: OK\n")
