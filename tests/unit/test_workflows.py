"""The GitHub workflows and pre-commit hooks: actionlint (with shellcheck on every `run:`) and zizmor
(offline) find nothing, and the rules this project keeps are checked one by one."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import run_gpudrv

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
BIN = Path(sys.executable).parent
ACTIONLINT_MODULE = REPO / "tests" / "tools" / "actionlint"
TOOLS_CACHE = Path(os.environ.get("GPUDRV_TOOLS_CACHE") or Path.home() / ".cache" / "gpudrv" / "tools")
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
SELF = "$/"  # this repository's gpudrv action (action.yml) at the running commit
# actionlint 1.7.12 (the newest) does not know GitHub's `$/` self-repository syntax yet
# (rhysd/actionlint#711); zizmor's pedantic self-repository audit asks for it. Only that one message
# is ignored; test_action_inputs_are_declared checks the `with:` keys actionlint would have checked.
SELF_REF = ["-ignore", r'specifying action "\$/" in invalid format because ref is missing']


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def workflow(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = load(WORKFLOWS / name)
    return loaded


def steps(name: str) -> list[dict[str, Any]]:
    return [step for job in workflow(name)["jobs"].values() for step in job["steps"]]


def actionlint() -> Path:
    """actionlint built from the pinned Go module (tests/tools/actionlint), once per version."""
    version = re.search(r"github.com/rhysd/actionlint (v\S+)", (ACTIONLINT_MODULE / "go.mod").read_text())
    assert version, "tests/tools/actionlint/go.mod must require github.com/rhysd/actionlint"
    binary = TOOLS_CACHE / f"actionlint-{version[1]}"
    if not binary.exists():
        TOOLS_CACHE.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(f".{os.getpid()}.partial")
        build = [
            "go",
            "build",
            "-mod=readonly",
            "-trimpath",
            "-o",
            str(partial),
            "github.com/rhysd/actionlint/cmd/actionlint",
        ]
        result = subprocess.run(build, cwd=ACTIONLINT_MODULE, capture_output=True, text=True, check=False)
        assert result.returncode == 0, (
            f"building actionlint failed (needs Go and the module proxy):\n{result.stderr}"
        )
        partial.replace(binary)  # atomic: a concurrent run sees the whole binary or none
    return binary


def test_actionlint_finds_nothing() -> None:
    shellcheck = BIN / "shellcheck"
    assert shellcheck.exists(), "shellcheck is not installed: pip install -e '.[dev]'"
    files = sorted(str(path) for path in WORKFLOWS.glob("*.yml"))
    assert len(files) == 3
    result = subprocess.run(
        [str(actionlint()), "-no-color", "-shellcheck", str(shellcheck), "-pyflakes", "", *SELF_REF, *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_zizmor_finds_nothing() -> None:
    zizmor = BIN / "zizmor"
    assert zizmor.exists(), "zizmor is not installed: pip install -e '.[dev]'"
    # pedantic: the regular audits plus code smells. Offline: no GitHub API (and none is reachable).
    result = subprocess.run(
        [str(zizmor), "--offline", "--persona", "pedantic", "--no-progress", "--format", "plain", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout
    assert "suppressed" not in result.stdout  # nothing hidden below the persona


# --- the rules, one by one --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pr.yml", "audit.yml", "apply.yml"])
def test_actions_pinned_permissions_minimal_no_persisted_credentials(name: str) -> None:
    flow = workflow(name)
    assert flow["permissions"] == {"contents": "read"}
    text = (WORKFLOWS / name).read_text()
    for step in steps(name):
        if "uses" not in step or step["uses"] == SELF:
            continue
        assert PINNED.match(step["uses"]), f"{name}: {step['uses']} is not pinned by commit SHA"
        line = next(line for line in text.splitlines() if step["uses"] in line)
        assert re.search(r"# v\d+\.\d+\.\d+$", line), f"{name}: {line.strip()} has no version comment"
        if step["uses"].startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_history_is_fetched_where_it_is_read() -> None:
    for name in ("pr.yml", "apply.yml"):  # matrix impact's base; apply's image gate at origin/main
        [checkout] = [step for step in steps(name) if step.get("uses", "").startswith("actions/checkout@")]
        assert checkout["with"]["fetch-depth"] == 0


def gpudrv_calls(name: str) -> list[tuple[str, str]]:
    """(command, args) of each step that uses this repository's gpudrv action."""
    return [
        (step["with"]["command"], step["with"].get("args", ""))
        for step in steps(name)
        if step.get("uses") == SELF
    ]


def test_pr_check_runs_every_check_and_no_template_in_scripts() -> None:
    assert gpudrv_calls("pr.yml") == [
        ("matrix validate", ""),
        ("manifests validate", "--from ${{ env.FLEET }}"),
        ("audit", "--from ${{ env.FLEET }}"),
        ("matrix impact", "--base origin/${{ github.base_ref }} --from ${{ env.FLEET }}"),
    ]
    assert workflow("pr.yml")["env"]["FLEET"] == "clusters/lab"
    checks = [step for step in steps("pr.yml") if step.get("uses") == SELF]
    assert all(
        step["if"] == "${{ !cancelled() && steps.checkout.outcome == 'success' }}" for step in checks[1:]
    )
    for name in ("pr.yml", "audit.yml", "apply.yml"):
        for step in steps(name):
            assert "${{" not in step.get("run", ""), f"{name}: an expression inside a script can inject"


def test_apply_is_gated_and_serialised() -> None:
    flow = workflow("apply.yml")
    assert flow["on"]["push"] == {"branches": ["main"], "paths": ["matrix/**", "clusters/**"]}
    assert flow["concurrency"] == {"group": "gpudrv-apply", "cancel-in-progress": False}
    assert flow["jobs"]["apply"]["environment"] == "production"
    [apply] = [step["with"] for step in steps("apply.yml") if step.get("uses") == SELF]
    assert apply == {
        "command": "apply",
        "args": "--from ${{ env.FLEET }} --merged-ref origin/main",
        "output": "",
        "kubeconfig": "${{ secrets.KUBECONFIG }}",
    }


def test_audit_runs_on_a_schedule_and_by_hand() -> None:
    flow = workflow("audit.yml")
    assert set(flow["on"]) == {"schedule", "workflow_dispatch"}
    [audit] = [step["with"] for step in steps("audit.yml") if step.get("with", {}).get("command") == "audit"]
    assert audit == {"command": "audit", "kubeconfig": "${{ secrets.KUBECONFIG }}"}


# --- the action ---------------------------------------------------------------------------------------


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = load(REPO / "action.yml")
    return loaded


def test_action_inputs_are_declared() -> None:
    """What actionlint checks for `./` and cannot for `$/` yet: every `with:` key is an input, and
    every required input is given."""
    inputs = action()["inputs"]
    required = {key for key, spec in inputs.items() if spec.get("required")}
    for name in ("pr.yml", "audit.yml", "apply.yml"):
        for step in steps(name):
            if step.get("uses") != SELF:
                continue
            given = set(step.get("with") or {})
            assert given <= set(inputs), f"{name}: {step['name']}: unknown inputs {given - set(inputs)}"
            assert required <= given, f"{name}: {step['name']}: missing inputs {required - given}"


def test_action_is_composite_pinned_and_passes_inputs_through_the_environment() -> None:
    flow = action()
    assert flow["runs"]["using"] == "composite"
    assert set(flow["inputs"]) == {
        "command",
        "args",
        "output",
        "kubeconfig",
        "python-version",
        "working-directory",
    }
    text = (REPO / "action.yml").read_text()
    for step in flow["runs"]["steps"]:
        if "uses" in step:
            assert PINNED.match(step["uses"]), f"action.yml: {step['uses']} is not pinned by commit SHA"
            line = next(line for line in text.splitlines() if step["uses"] in line)
            assert re.search(r"# v\d+\.\d+\.\d+$", line)
        else:
            assert step["shell"] == "bash"
            assert "${{" not in step["run"], "action.yml: an expression inside a script can inject"
    [run] = [step for step in flow["runs"]["steps"] if "reconciler.action" in step.get("run", "")]
    assert run["run"].strip() == "python -P -m reconciler.action"
    assert run["env"] == {
        "GPUDRV_COMMAND": "${{ inputs.command }}",
        "GPUDRV_ARGS": "${{ inputs.args }}",
        "GPUDRV_OUTPUT": "${{ inputs.output }}",
        "GPUDRV_KUBECONFIG_DATA": "${{ inputs.kubeconfig }}",
    }


def test_audit_uploads_the_fleet_page_and_links_it_from_the_summary() -> None:
    audit_steps = steps("audit.yml")
    [checkout] = [step for step in audit_steps if step.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0  # the page draws the matrix's history
    [report] = [step for step in audit_steps if "gpudrv report -o html" in step.get("run", "")]
    [upload] = [step for step in audit_steps if step.get("uses", "").startswith("actions/upload-artifact@")]
    [link] = [step for step in audit_steps if "GITHUB_STEP_SUMMARY" in step.get("run", "")]
    names = [step["name"] for step in audit_steps]
    assert names.index(report["name"]) < names.index(upload["name"]) < names.index(link["name"])
    # After a failing audit too (missing images are when the page matters most).
    assert report["if"] == upload["if"] == "${{ !cancelled() }}"
    assert report["env"] == {"KUBECONFIG_DATA": "${{ secrets.KUBECONFIG }}"}
    assert upload["with"]["path"] == "${{ runner.temp }}/fleet-page/fleet.html"
    assert upload["with"]["if-no-files-found"] == "error"
    assert link["env"] == {"PAGE_URL": f"${{{{ steps.{upload['id']}.outputs.artifact-url }}}}"}


# --- pre-commit hooks -----------------------------------------------------------------------------------


def test_pre_commit_hooks_validate_matrix_and_manifests(lab: Path) -> None:
    hooks = {hook["id"]: hook for hook in load(REPO / ".pre-commit-hooks.yaml")}
    assert set(hooks) == {"gpudrv-matrix", "gpudrv-manifests"}
    for hook in hooks.values():
        assert (hook["language"], hook["pass_filenames"]) == ("python", False)
    assert re.search(hooks["gpudrv-matrix"]["files"], "matrix/support-matrix.csv")
    assert re.search(hooks["gpudrv-manifests"]["files"], "clusters/lab/nodes/lab-node-1.yml")
    assert not re.search(hooks["gpudrv-manifests"]["files"], "matrix/support-matrix.csv")

    def hook_exit(hook: str) -> int:
        entry = shlex.split(hooks[hook]["entry"])
        assert entry[0] == "gpudrv"
        return run_gpudrv(*entry[1:], cwd=lab, env={"GITHUB_ACTIONS": ""}).returncode

    assert (hook_exit("gpudrv-matrix"), hook_exit("gpudrv-manifests")) == (0, 0)
    with (lab / "matrix/support-matrix.csv").open("a") as handle:
        handle.write("r550,5.15.0-1-generic,ubuntu22.04\n")
    node = lab / "clusters/lab/nodes/lab-node-1.yaml"
    node.write_text(node.read_text().replace('major: "535"', "major: 535"))
    assert (hook_exit("gpudrv-matrix"), hook_exit("gpudrv-manifests")) == (2, 2)


# --- the workflows gpudrv init writes into a fleet repository -------------------------------------------


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fleet = tmp_path_factory.mktemp("fleet")
    result = run_gpudrv("init", str(fleet), "--action", f"example/gpudrv@{'0' * 40}")
    assert result.returncode == 0, result.stderr
    return fleet


def test_scaffolded_workflows_pass_actionlint(scaffolded: Path) -> None:
    files = sorted(str(path) for path in (scaffolded / ".github/workflows").glob("*.yml"))
    assert len(files) == 4
    result = subprocess.run(
        [str(actionlint()), "-no-color", "-shellcheck", str(BIN / "shellcheck"), "-pyflakes", "", *files],
        cwd=scaffolded,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_scaffolded_workflows_pass_zizmor(scaffolded: Path) -> None:
    result = subprocess.run(
        [
            str(BIN / "zizmor"),
            "--offline",
            "--persona",
            "pedantic",
            "--no-progress",
            "--format",
            "plain",
            ".",
        ],
        cwd=scaffolded,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout
    assert "suppressed" not in result.stdout
