"""Run a workflow's steps as the GitHub runner runs them, on this machine.

Each `run:` step, and each step that uses the gpudrv action (this repository's `action.yml`: `$/`, or a
pinned `OWNER/NAME@SHA` as a fleet repository writes it), with GITHUB_ACTIONS, GITHUB_STEP_SUMMARY (one
file per step), GITHUB_WORKSPACE and RUNNER_TEMP set, in bash as the runner calls it. Expressions
(`${{ inputs.command }}`, `${{ env.FLEET }}`, `${{ secrets.KUBECONFIG }}`) are evaluated from the
step's inputs, the workflow's env and the contexts a test gives. Steps that set up Python or install
gpudrv are left out: gpudrv is installed next to this interpreter. `if:` is not evaluated: every
check runs, as in the PR check where each runs even when an earlier one failed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
ACTION = REPO / "action.yml"
BIN = Path(sys.executable).parent
INTENDED = re.compile(
    r"::(error|warning|notice)( (file|line|title)=[^,:\r\n]*(,(file|line|title)=[^,:\r\n]*)*)?::"
)
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


@dataclass
class StepRun:
    name: str
    code: int
    stdout: str
    stderr: str
    summary: str

    def commands(self) -> list[str]:
        """Every line the runner would read as a workflow command; each must be an annotation."""
        found = [line for line in (self.stdout + self.stderr).splitlines() if line.startswith("::")]
        for line in found:
            assert INTENDED.match(line), f"{self.name}: not an intended workflow command: {line!r}"
        return found


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def is_gpudrv(uses: str) -> bool:
    """The gpudrv action: this repository's own (`$/`), or a pinned `OWNER/gpudrv@SHA`."""
    return uses == "$/" or bool(re.fullmatch(r"[\w.-]+/gpudrv@[0-9a-f]{40}", uses))


def gpudrv_steps(workflow: Path) -> list[dict[str, Any]]:
    """The workflow's steps that use the gpudrv action."""
    flow = load(workflow)
    return [step for job in flow["jobs"].values() for step in job["steps"] if is_gpudrv(step.get("uses", ""))]


def run_workflow(
    workflow: Path, workspace: Path, runner: Path, contexts: dict[str, str], only: str | None = None
) -> dict[str, StepRun]:
    """Each `run:` step and each gpudrv action step of the workflow (`only`: those whose script or
    command contains it), by step name."""
    flow: dict[str, Any] = load(workflow)
    results: dict[str, StepRun] = {}
    for job in flow["jobs"].values():
        env_context = {**flow.get("env", {}), **job.get("env", {})}
        for number, step in enumerate(job["steps"]):
            scope = {**contexts, **{f"env.{key}": str(value) for key, value in env_context.items()}}
            temp = runner / str(number)
            if "run" in step and "pip install" not in step["run"]:
                if only and only not in step["run"]:
                    continue
                env = {
                    key: evaluate(value, scope)
                    for key, value in {**env_context, **step.get("env", {})}.items()
                }
                results[step["name"]] = run_script(step["name"], step["run"], env, workspace, temp)
            elif is_gpudrv(step.get("uses", "")):
                inputs = {key: evaluate(value, scope) for key, value in (step.get("with") or {}).items()}
                if only and only not in inputs.get("command", ""):
                    continue
                results[step["name"]] = run_action(step["name"], inputs, workspace, temp)
    return results


def run_action(name: str, given: dict[str, str], workspace: Path, temp: Path) -> StepRun:
    """The gpudrv action's own run steps (not setup-python, not its install) with these inputs."""
    action: dict[str, Any] = load(ACTION)
    declared = action["inputs"]
    unknown = set(given) - set(declared)
    assert not unknown, f"{name}: the action has no input {sorted(unknown)}"
    missing = [key for key, spec in declared.items() if spec.get("required") and key not in given]
    assert not missing, f"{name}: required inputs {missing} not given"
    inputs = {key: str(given.get(key, spec.get("default", ""))) for key, spec in declared.items()}
    scope = {f"inputs.{key}": value for key, value in inputs.items()}
    scope["github.action_path"] = str(REPO)
    [step] = [step for step in action["runs"]["steps"] if "run" in step and step.get("id") != "install"]
    env = {key: evaluate(value, scope) for key, value in (step.get("env") or {}).items()}
    folder = workspace / evaluate(step.get("working-directory", "."), scope)
    return run_script(name, step["run"], env, folder, temp, workspace=workspace)


def evaluate(value: Any, contexts: dict[str, str]) -> str:
    def lookup(match: re.Match[str]) -> str:
        assert match[1] in contexts, f"the test gives no value for ${{{{ {match[1]} }}}}"
        return contexts[match[1]]

    return EXPRESSION.sub(lookup, str(value))


def run_script(
    name: str, script: str, env: dict[str, str], cwd: Path, temp: Path, *, workspace: Path | None = None
) -> StepRun:
    temp.mkdir(parents=True)
    summary = temp / "step_summary.md"
    github = {
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace or cwd),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_ACTION_PATH": str(REPO),
        "RUNNER_TEMP": str(temp),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    ambient = {
        key: value
        for key, value in os.environ.items()
        if key != "KUBECONFIG" and not key.startswith(("GITHUB_", "RUNNER_"))
    }
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],  # the runner's default shell
        cwd=cwd,
        env={**ambient, **github, **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    text = summary.read_text() if summary.exists() else ""
    return StepRun(name, result.returncode, result.stdout, result.stderr, text)
