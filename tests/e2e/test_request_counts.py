"""Every live command makes the same API requests whatever the size of the fleet: the API server's audit
log (scripts/cluster with GPUDRV_CLUSTER_AUDIT=1, as this tier starts it) counts them, no mock.

Each command runs on a fleet of 2 GPU nodes, then of 10, with upgrades pending on every node (so
`status` and `plan` need the pods of every node) and a pod to explain; the requests must be the very
same list both times, and exactly the ones docs/scale.md names: one list per resource, never one
request per node.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconciler.core.contract.operator import API_VERSIONS, PLURALS, Kind
from tests.e2e.conftest import GPU_LABELS, FakeNodes, Kube, Request, node_manifest

GPU = ("labelSelector", "nvidia.com/gpu.present=true")
CORDONED = ("fieldSelector", "spec.unschedulable=true")
STATE = "nvidia.com/gpu-driver-upgrade-state"
DESIRED = {"nvidia.com/cuda.driver.minor": "127", "nvidia.com/cuda.driver.rev": "05"}
MATRIX = "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n"


def driver_resources() -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    return [
        ("list", f"/apis/{API_VERSIONS[kind]}/{PLURALS[kind]}", (("limit", "500"),))
        for kind in (Kind.CLUSTER_POLICY, Kind.NVIDIA_DRIVER)
    ]


def expected(namespace: str, node: str) -> dict[str, list[tuple[str, str, tuple[tuple[str, str], ...]]]]:
    """Each command's requests, in the order it makes them."""
    resources = driver_resources()
    gpu_nodes = [("list", "/api/v1/nodes", (GPU,))]
    live_nodes = [("list", "/api/v1/nodes", tuple(sorted((CORDONED, GPU)))), *gpu_nodes]
    budgets = [("list", "/apis/policy/v1/poddisruptionbudgets", ())]
    pods = [("list", "/api/v1/pods", ())]
    return {
        "tag": [*resources, ("get", f"/api/v1/nodes/{node}", ())],
        "audit": [*resources, *gpu_nodes],
        "report": [*resources, *gpu_nodes],
        "status": [*live_nodes, *budgets, *pods],  # --from: the desired state is git's (lab here)
        "plan": [*live_nodes, *pods, *budgets],  # lab mode: no operator release to learn
        "diff": [
            ("list", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", ()),
            *resources,
            ("list", "/api/v1/nodes", ()),
        ],
        "explain": [("list", f"/api/v1/namespaces/{namespace}/pods", ()), ("list", "/api/v1/nodes", ())],
    }


def commands(folder: Path, namespace: str, node: str) -> dict[str, list[str]]:
    matrix, fleet = str(folder / "matrix.csv"), str(folder / "fleet")
    return {
        "tag": ["tag", node],
        "audit": ["audit", "--matrix", matrix],
        "report": ["report", "--matrix", matrix],
        "status": ["status", "--from", fleet, "--matrix", matrix],
        "plan": ["plan", "--from", fleet, "--matrix", matrix],
        "diff": ["diff", "--from", fleet],
        "explain": ["explain", "-n", namespace],
    }


def desired_fleet(folder: Path, names: list[str], namespace: str) -> None:
    """The fleet in git: each node on driver 550.127.05 (live runs 550.90.07), and one budget."""
    nodes = folder / "fleet"
    nodes.mkdir(parents=True, exist_ok=True)
    for name in names:
        (nodes / f"{name}.yaml").write_text(node_manifest(name, {**GPU_LABELS, **DESIRED}) + "\n")
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    (nodes / "budget.yaml").write_text(json.dumps(budget) + "\n")
    (folder / "matrix.csv").write_text(MATRIX)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    if not (folder / ".git").exists():
        subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "fleet"], cwd=folder, check=True)


def add_fleet(nodes: FakeNodes, names: list[str]) -> None:
    for name in names:
        nodes.add_gpu(name, {STATE: "upgrade-required"})


def requests(kube: Kube, args: list[str], cwd: Path) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    found: list[Request] = []

    def run() -> None:
        result = kube.gpudrv(*args, cwd=cwd)
        assert result.returncode in (0, 1), result.stderr

    found = kube.requests_of(run)
    return [(request.verb, request.path, request.query) for request in found]


def test_every_live_command_makes_the_same_requests_for_2_and_10_nodes(
    kube: Kube, nodes: FakeNodes, unique: str, namespace: str, tmp_path: Path
) -> None:
    names = [f"{unique}-{index:02d}" for index in range(10)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer-0", "namespace": namespace, "labels": {"app": "trainer"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": names[0]},
            "containers": [{"name": "c", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"}],
        },
    }
    want = expected(namespace, names[0])
    seen: dict[int, dict[str, list[tuple[str, str, tuple[tuple[str, str], ...]]]]] = {}
    for size in (2, 10):
        add_fleet(nodes, names[len(nodes.created) : size])
        desired_fleet(tmp_path, names[:size], namespace)
        if size == 2:
            kube.apply(json.dumps(pod))
        seen[size] = {
            verb: requests(kube, args, tmp_path)
            for verb, args in commands(tmp_path, namespace, names[0]).items()
        }
    for verb in want:
        assert seen[2][verb] == seen[10][verb], verb
        assert seen[10][verb] == want[verb], verb


@pytest.mark.parametrize("verb", ["audit", "status"])
def test_no_request_names_a_node(
    kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path, verb: str
) -> None:
    """Nodes mid-upgrade (every one of them needs its pods) still cost no request of their own."""
    names = [f"{unique}-{index}" for index in range(4)]
    add_fleet(nodes, names)
    desired_fleet(tmp_path, names, "default")
    args = commands(tmp_path, "default", names[0])[verb]
    made = requests(kube, args, tmp_path)
    assert not [request for request in made if any(name in str(request) for name in names)]
