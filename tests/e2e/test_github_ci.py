"""The workflows' own commands, run as GitHub Actions runs them (tests/actions.py): the gpudrv action's
steps (action.yml) with the inputs .github/workflows/*.yml give it, GITHUB_ACTIONS, GITHUB_STEP_SUMMARY
(one file per step), GITHUB_WORKSPACE and RUNNER_TEMP set, on a clone of a temporary git repository
(the PR check) and against the real cluster (the live audit, and diff).

Other tests share the cluster: assertions look only at this test's nodes, and a node that breaks an
audit (gpu.present=true, image not in the matrix) lives only while the audit runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import actions
from tests.actions import StepRun
from tests.conftest import REPO
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.gitops import GitLab

WORKFLOWS = REPO / ".github" / "workflows"
BIN = Path(sys.executable).parent
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
MAJOR = "nvidia.com/cuda.driver.major"
MATRIX = "matrix/support-matrix.csv"


def run_workflow(
    name: str, workspace: Path, runner: Path, contexts: dict[str, str], only: str | None = None
) -> dict[str, StepRun]:
    return actions.run_workflow(WORKFLOWS / name, workspace, runner, contexts, only)


def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=Pat Author", "-c", "user.email=pat@example.com"]
    result = subprocess.run(
        ["git", *identity, *args], cwd=folder, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def pull_request(kube: Kube, tmp_path: Path, branch: str) -> Path:
    """The lab on main in an "origin" repository, and a full clone on a PR branch (like actions/checkout
    with fetch-depth: 0, so origin/main is there for matrix impact)."""
    origin = GitLab.create(kube, tmp_path / "origin").root
    workspace = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", str(origin), str(workspace))
    git(workspace, "checkout", "-q", "-b", branch)
    return workspace


def pr_check(workspace: Path, tmp_path: Path) -> dict[str, StepRun]:
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "the pull request")
    return run_workflow("pr.yml", workspace, tmp_path / "runner", {"github.base_ref": "main"})


# --- the PR check -------------------------------------------------------------------------------------


def test_pr_check_fails_on_a_new_node_whose_image_is_not_built(
    kube: Kube, tmp_path: Path, unique: str
) -> None:
    workspace = pull_request(kube, tmp_path, "add-node")
    node = f"{unique}-new"
    manifest = f"clusters/lab/nodes/{node}.yaml"
    lab_node_2 = (workspace / "clusters/lab/nodes/lab-node-2.yaml").read_text()
    (workspace / manifest).write_text(
        lab_node_2.replace("lab-node-2", node).replace("6.8.0-45-generic", "6.8.0-99-generic")
    )
    tag = "550-6.8.0-99-generic-ubuntu24.04"

    steps = pr_check(workspace, tmp_path)
    assert list(steps) == [
        "Validate the support matrix",
        "Validate the node manifests",
        "Audit the desired fleet against the matrix",
        "Impact of the matrix change",
    ]
    matrix, manifests, audit, impact = steps.values()

    assert (matrix.code, matrix.stdout, matrix.commands()) == (0, f"{MATRIX}: 4 rows, valid\n", [])
    assert matrix.summary == f"### gpudrv matrix validate: valid\n\n`{MATRIX}`: 4 rows, valid.\n\n"
    assert (manifests.code, manifests.commands()) == (0, [])
    assert manifests.stdout == "clusters/lab: 5 Node manifests, valid\n"

    assert audit.code == 1  # the check fails
    assert audit.commands() == [
        f"::error file={manifest},line=1,title={node}%3A driver image not in the support matrix::"
        f"node {node} needs the driver image {tag}, which is not in {MATRIX}: its driver pod would be stuck "
        f"in ImagePullBackOff. Build the image, then add the row with gpudrv matrix add --tag {tag}"
    ]
    assert f"| `{node}` | **MISSING** | `{tag}` | `{manifest}:1` |" in audit.summary.splitlines()
    assert audit.summary.startswith("### gpudrv audit: 1 of 5 GPU nodes without a driver image\n")

    # The matrix did not change: nothing lost, nothing to annotate.
    assert (impact.code, impact.commands()) == (0, [])
    assert impact.summary.startswith("### gpudrv matrix impact: no GPU node loses its driver image\n")
    assert f"| `{node}` | `{tag}` | MISSING | MISSING |" in impact.summary.splitlines()


def test_pr_check_fails_on_retiring_a_row_still_needed(kube: Kube, tmp_path: Path) -> None:
    workspace = pull_request(kube, tmp_path, "retire-535")
    matrix_file = workspace / MATRIX
    matrix_file.write_text(matrix_file.read_text().replace("535,5.15.0-107-generic,ubuntu22.04\n", ""))

    matrix, manifests, audit, impact = pr_check(workspace, tmp_path).values()
    assert (matrix.code, manifests.code, audit.code, impact.code) == (0, 0, 1, 1)
    assert audit.commands()[0].startswith(
        "::error file=clusters/lab/nodes/lab-node-1.yaml,line=1,title=lab-node-1%3A driver image not in"
    )
    assert impact.commands() == [
        f"::error file={MATRIX},title=removing 535%2C5.15.0-107-generic%2Cubuntu22.04 breaks 1 GPU node::"
        "535,5.15.0-107-generic,ubuntu22.04 was in origin/main and is removed here, but the image "
        "535-5.15.0-107-generic-ubuntu22.04 is still needed by lab-node-1: a driver pod there would be stuck "
        "in ImagePullBackOff"
    ]
    assert (
        "| `535,5.15.0-107-generic,ubuntu22.04` | `535-5.15.0-107-generic-ubuntu22.04` | **removed** |"
        in (impact.summary.splitlines())
    )


# --- against the live cluster ---------------------------------------------------------------------------


def audit_counts(stdout: str) -> int:
    found = re.search(r"^gpudrv audit: \d+ GPU nodes?, (\d+) MISSING, (\d+) INVALID$", stdout, re.MULTILINE)
    assert found, stdout
    return int(found[1]) + int(found[2])


def test_live_audit_workflow_annotates_a_node_without_its_image(
    kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "matrix").mkdir()
    (workspace / MATRIX).write_bytes((REPO / MATRIX).read_bytes())
    covered = nodes.add_gpu(f"{unique}-ok")
    gap = nodes.add_gpu(f"{unique}-gap", {KERNEL: "5.15.0-999-generic"})
    try:
        contexts = {"secrets.KUBECONFIG": kube.kubeconfig.read_text()}
        [audit] = run_workflow("audit.yml", workspace, tmp_path / "runner", contexts, only="audit").values()
    finally:
        # A gpu.present node whose image is missing fails everyone's audit: gone as soon as possible.
        kube.run("delete", "node", gap, "--ignore-not-found", "--wait=false", check=False)

    tag = "550-5.15.0-999-generic-ubuntu22.04"
    assert audit.code == 1, audit.stderr
    assert "gpudrv: " not in audit.stderr
    found = audit.commands()
    mine = [line for line in found if unique in line]
    if audit_counts(audit.stdout) <= 10:  # GitHub shows 10 errors; past that the summary has the rest
        assert mine == [
            f"::error title={gap}%3A driver image not in the support matrix::"
            f"node {gap} needs the driver image {tag}, which is not in {MATRIX}: its driver pod would be "
            f"stuck in ImagePullBackOff. Build the image, then add the row with gpudrv matrix add --tag {tag}"
        ]
    rows = audit.summary.splitlines()
    assert f"| `{gap}` | **MISSING** | `{tag}` | `live` |" in rows
    assert not any(covered in row for row in rows)
    assert not any((tmp_path / "runner").glob("*/kubeconfig*")), "the workflow leaves the kubeconfig behind"


def test_diff_in_actions_annotates_the_manifest_that_drifted(
    kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    node = nodes.add_gpu(f"{unique}-drift", {"nvidia.com/gpu.present": "false"})  # nobody's audit sees it
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / f"{node}.yaml").write_text(
        f'apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n  labels:\n    {MAJOR}: "535"\n'
    )
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}
    result = subprocess.run(
        [str(BIN / "gpudrv"), "diff", "--from", "fleet"],
        cwd=tmp_path,
        env={**os.environ, **kube.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    step = StepRun("diff", result.returncode, result.stdout, result.stderr, summary.read_text())
    errors = step.commands()
    if len(errors) < 10:  # otherwise other tests' undeclared GPU nodes may take the slots GitHub shows
        assert [line for line in errors if unique in line] == [
            f"::error file=fleet/{node}.yaml,line=1,title=node/{node} drifted from git::"
            f"node/{node} differs live:%0A{MAJOR}: desired 535, live 550"
        ]
    assert (
        f"| `node/{node}` | `{MAJOR}` | `535` | `550` | `fleet/{node}.yaml:1` |" in step.summary.splitlines()
    )


@pytest.fixture(autouse=True)
def _no_stray_github_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests set GitHub's variables themselves; a real runner's must not leak into them.
    for key in [key for key in os.environ if key.startswith(("GITHUB_", "RUNNER_"))]:
        monkeypatch.delenv(key)
