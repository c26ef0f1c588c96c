"""`gpudrv init` end to end: a new fleet repository in an empty git repository, committed, and the PR
check it scaffolded, read from its own .github/workflows/pr.yml and run as the runner runs the gpudrv
action (tests/actions.py): green as made, red once a pull request adds a node whose image was never
built. With --from-cluster the fleet is the live cluster's: its GPU nodes, its NVIDIADriver, a matrix
row for every image that runs there.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests import actions
from tests.conftest import REPO, run_gpudrv
from tests.e2e.conftest import FakeNodes, Kube

CRDS = Path(__file__).parent / "manifests" / "gpu-operator-crds.yaml"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
OS_ID = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
OS_MAJOR = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
POOL = "e2e.gpudrv.dev/pool"
CHECKS = [
    "Validate the support matrix",
    "Validate the node manifests",
    "Audit the desired fleet against the matrix",
    "Impact of the matrix change",
    "CUDA workloads against the desired drivers",
]


def head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


ACTION = f"example/gpudrv@{head()}"


def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
    result = subprocess.run(
        ["git", *identity, *args], cwd=folder, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def pull_request(origin: Path, tmp_path: Path, branch: str) -> Path:
    """A full clone of the fleet repository on a PR branch (actions/checkout with fetch-depth: 0)."""
    workspace = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", str(origin), str(workspace))
    git(workspace, "checkout", "-q", "-b", branch)
    return workspace


def pr_check(workspace: Path, runner: Path) -> dict[str, actions.StepRun]:
    """The scaffolded PR check: its own workflow file, its own steps and inputs."""
    workflow = workspace / ".github/workflows/pr.yml"
    assert [step["uses"] for step in actions.gpudrv_steps(workflow)] == [ACTION] * len(CHECKS)
    return actions.run_workflow(workflow, workspace, runner, {"github.base_ref": "main"})


def assert_green(steps: dict[str, actions.StepRun]) -> None:
    assert list(steps) == CHECKS
    for step in steps.values():
        assert (step.code, step.commands()) == (0, []), f"{step.name}: {step.stdout}{step.stderr}"


def add_node_without_image(workspace: Path, fleet: str, model: str, node: str) -> None:
    """A pull request's new node: a copy of `model` on a kernel no image was built for."""
    manifest = f"{fleet}/nodes/{node}.yaml"
    document = YAML(typ="safe").load((workspace / fleet / "nodes" / f"{model}.yaml").read_text())
    document["metadata"]["name"] = node
    document["metadata"]["labels"][KERNEL] = "6.8.0-999-generic"
    (workspace / manifest).write_text(json.dumps(document, indent=2) + "\n")  # JSON is YAML
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", f"Add {node}")


def assert_red_on(steps: dict[str, actions.StepRun], driver: str, node: str, tag: str) -> None:
    """The audit fails with one annotation, at the NVIDIADriver's version line (the operator's mode:
    the resource decides the image), naming the node and the image; the other checks pass."""
    matrix, manifests, audit, impact, workloads = (steps[name] for name in CHECKS)
    assert (matrix.code, manifests.code, impact.code, workloads.code) == (0, 0, 0, 0)
    assert audit.code == 1  # the check fails
    [error] = audit.commands()
    assert error.startswith(f"::error file={driver},line=")
    assert f"title=driver image {tag} is not in the support matrix::" in error
    assert f"1 node ({node}) would be stuck in ImagePullBackOff" in error
    assert any(
        f"`{node}`" in row and "**MISSING**" in row and tag in row for row in audit.summary.splitlines()
    )


def test_init_then_the_scaffolded_pr_check_is_green_then_red(tmp_path: Path) -> None:
    origin = tmp_path / "fleet"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    made = run_gpudrv("init", "--action", ACTION, cwd=origin)
    assert (made.returncode, made.stderr) == (0, ""), made.stderr
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "Fleet repository for gpudrv")

    workspace = pull_request(origin, tmp_path, "nothing-yet")
    assert_green(pr_check(workspace, tmp_path / "runner-green"))

    add_node_without_image(workspace, "clusters/prod", "gpu-node-0", "gpu-node-1")
    driver = "clusters/prod/nvidiadriver-ubuntu22.04.yaml"
    tag = "550-6.8.0-999-generic-ubuntu22.04"
    assert_red_on(pr_check(workspace, tmp_path / "runner-red"), driver, "gpu-node-1", tag)


# --- from the live cluster ------------------------------------------------------------------------------


@pytest.fixture
def nvidiadriver(kube: Kube, unique: str) -> Iterator[str]:
    """An NVIDIADriver (precompiled, 550) for this test's pool; deleted afterwards."""
    kube.run("apply", "-f", str(CRDS))
    kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    name = f"{unique}-pool"
    document = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": {
            "usePrecompiled": True,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": "550",
            "nodeSelector": {POOL: unique},
        },
    }
    kube.apply(json.dumps(document))
    yield name
    kube.run("delete", "nvidiadriver", name, "--ignore-not-found", "--wait=true", check=False)


def gpu_labels(pool: str, version: str, kernel: str) -> dict[str, str]:
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": "550",
        KERNEL: kernel,
        OS_ID: "ubuntu",
        OS_VERSION: version,
        OS_MAJOR: version.split(".", maxsplit=1)[0],
        POOL: pool,
        "topology.kubernetes.io/zone": "zone-a",  # not gpudrv's: left out of the manifest
    }


def test_init_from_the_cluster_fills_fleet_and_matrix(
    kube: Kube, nodes: FakeNodes, nvidiadriver: str, unique: str, tmp_path: Path
) -> None:
    jammy = nodes.add(f"{unique}-jammy", **gpu_labels(unique, "22.04", "5.15.0-119-generic"))
    noble = nodes.add(f"{unique}-noble", **gpu_labels(unique, "24.04", "6.8.0-45-generic"))
    origin = tmp_path / "fleet"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    made = run_gpudrv(
        "init",
        "--from-cluster",
        "--name",
        "live",
        "--action",
        ACTION,
        "--kubeconfig",
        str(kube.kubeconfig),
        cwd=origin,
    )
    assert made.returncode == 0, made.stderr
    assert f"  clusters/live/nvidiadriver-{nvidiadriver}.yaml" in made.stdout.splitlines()
    assert "(from the cluster)" in made.stdout

    rows = (origin / "matrix/support-matrix.csv").read_text().splitlines()
    assert rows[0] == "driver_branch,kernel,os_tag"
    assert {"550,5.15.0-119-generic,ubuntu22.04", "550,6.8.0-45-generic,ubuntu24.04"} <= set(rows[1:])
    yaml = YAML(typ="safe")
    labels = yaml.load((origin / f"clusters/live/nodes/{noble}.yaml").read_text())["metadata"]["labels"]
    assert labels[POOL] == unique  # the NVIDIADriver selects on it: kept
    assert "topology.kubernetes.io/zone" not in labels
    driver = yaml.load((origin / f"clusters/live/nvidiadriver-{nvidiadriver}.yaml").read_text())
    assert driver["spec"]["nodeSelector"] == {POOL: unique}
    assert driver["spec"]["version"] == "550"

    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "Fleet repository for gpudrv, from the cluster")
    workspace = pull_request(origin, tmp_path, "nothing-yet")
    assert_green(pr_check(workspace, tmp_path / "runner-green"))

    node = f"{unique}-new"
    add_node_without_image(workspace, "clusters/live", jammy, node)
    driver = f"clusters/live/nvidiadriver-{nvidiadriver}.yaml"
    tag = "550-6.8.0-999-generic-ubuntu22.04"
    assert_red_on(pr_check(workspace, tmp_path / "runner-red"), driver, node, tag)
