"""The GPU Operator's driver resources on the real API server: live audit, diff and plan read them.

ClusterPolicy and NVIDIADriver are cluster-scoped, so each test creates its own (unique names) and
deletes them when it ends; its NVIDIADrivers select only its own nodes (a unique pool label), and every
assertion looks only at this test's nodes. The CRDs (tests/e2e/manifests/gpu-operator-crds.yaml) are
installed once per run and stay: with no resource of theirs, the cluster is in the lab's mode.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FakeNodes, Kube

CRDS = Path(__file__).parent / "manifests" / "gpu-operator-crds.yaml"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
OS_ID = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
OS_MAJOR = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
POOL = "e2e.gpudrv.dev/pool"
UBUNTU_KERNEL, RHEL_KERNEL = "6.8.0-52-generic", "5.14.0-427.13.1.el9_4.x86_64"
MATRIX = f"""driver_branch,kernel,os_tag
535,{UBUNTU_KERNEL},ubuntu22.04
535,{RHEL_KERNEL},rhel9
550,{RHEL_KERNEL},rhel9
"""


@pytest.fixture(scope="module")
def crds(kube: Kube) -> Kube:
    kube.run("apply", "-f", str(CRDS))
    kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    return kube


@pytest.fixture
def resources(crds: Kube) -> Iterator[list[str]]:
    """Refs like nvidiadriver/x this test created; deleted afterwards, whatever happens."""
    created: list[str] = []
    yield created
    for ref in created:  # one at a time: a ref may carry its namespace ("deployment/x -n ns")
        crds.run("delete", *ref.split(), "--ignore-not-found", "--wait=true", check=False)


@dataclass
class Fleet:
    """This test's cluster side: its nodes, its operator resources, its unique prefix and a matrix."""

    kube: Kube
    nodes: FakeNodes
    resources: list[str]
    unique: str
    matrix: Path

    def create(self, *documents: dict[str, Any]) -> None:
        create(self.kube, self.resources, *documents)

    def audit(self, *extra: str) -> tuple[int, dict[str, Any]]:
        return audit(self.kube, self.matrix, *extra)

    def mine(self, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return mine(data, self.unique)

    def pools(self) -> tuple[str, str]:
        return pools(self.kube, self.nodes, self.unique)


@pytest.fixture
def fleet(kube: Kube, nodes: FakeNodes, resources: list[str], unique: str, tmp_path: Path) -> Fleet:
    matrix = tmp_path / "matrix.csv"
    matrix.write_text(MATRIX)
    return Fleet(kube, nodes, resources, unique, matrix)


def gpu_labels(pool: str, os_id: str, version: str, kernel: str, major: str) -> dict[str, str]:
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": major,
        KERNEL: kernel,
        OS_ID: os_id,
        OS_VERSION: version,
        OS_MAJOR: version.split(".", maxsplit=1)[0],
        POOL: pool,
    }


def nvidiadriver(name: str, pool: str, os_id: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": {
            "usePrecompiled": True,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": version,
            "nodeSelector": {POOL: pool, OS_ID: os_id},
        },
    }


def cluster_policy(name: str, **driver: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name},
        "spec": {"driver": driver},
    }


def create(kube: Kube, created: list[str], *documents: dict[str, Any]) -> None:
    for document in documents:
        kube.apply(json.dumps(document))
        created.append(f"{document['kind'].lower()}/{document['metadata']['name']}")


def audit(kube: Kube, matrix: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = kube.gpudrv("audit", "--matrix", str(matrix), "-o", "json", *extra)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def mine(data: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {f["node"]: f for f in data["findings"] if f["node"].startswith(prefix)}


def pools(kube: Kube, nodes: FakeNodes, unique: str) -> tuple[str, str]:
    ubuntu = nodes.add(f"{unique}-ubuntu", **gpu_labels(unique, "ubuntu", "22.04", UBUNTU_KERNEL, "535"))
    rhel = nodes.add(f"{unique}-rhel", **gpu_labels(unique, "rhel", "9.4", RHEL_KERNEL, "535"))
    return ubuntu, rhel


def test_live_audit_follows_the_nvidiadrivers_at_once(fleet: Fleet) -> None:
    kube, unique, matrix = fleet.kube, fleet.unique, fleet.matrix
    ubuntu, rhel = fleet.pools()
    fleet.create(
        cluster_policy(f"{unique}-policy", useNvidiaDriverCRD=True),
        nvidiadriver(f"{unique}-ubuntu", unique, "ubuntu", "535"),
        nvidiadriver(f"{unique}-rhel", unique, "rhel", "535"),
    )
    code, data = audit(kube, matrix)
    assert data["mode"] == "NVIDIADriver"
    assert {ubuntu, rhel} <= {node["node"] for node in data["nodes"]}
    assert mine(data, unique) == {}

    # The driver bump lands in the cluster: the very next audit names the stranded node and image.
    kube.run("patch", "nvidiadriver", f"{unique}-ubuntu", "--type=merge", "-p", '{"spec":{"version":"550"}}')
    code, data = audit(kube, matrix)
    finding = mine(data, unique)[ubuntu]
    assert code == 1
    assert finding["status"] == "MISSING"
    assert finding["image"] == f"nvcr.io/nvidia/driver:550-{UBUNTU_KERNEL}-ubuntu22.04"
    assert finding["resource"]["name"] == f"{unique}-ubuntu"
    assert rhel not in mine(data, unique)

    # The operator release decides the os tag: v26.3.3 keeps rhel's minor version, and the matrix lacks it.
    code, data = audit(kube, matrix, "--operator-version", "v26.3.3")
    assert mine(data, unique)[rhel]["image"] == f"nvcr.io/nvidia/driver:535-{RHEL_KERNEL}-rhel9.4"


def test_live_overlapping_nvidiadrivers_are_refused(fleet: Fleet) -> None:
    kube, unique, matrix = fleet.kube, fleet.unique, fleet.matrix
    ubuntu, _ = fleet.pools()
    fleet.create(
        cluster_policy(f"{unique}-policy", useNvidiaDriverCRD=True),
        nvidiadriver(f"{unique}-a", unique, "ubuntu", "535"),
        {**nvidiadriver(f"{unique}-b", unique, "ubuntu", "550"), "spec": {
            **nvidiadriver(f"{unique}-b", unique, "ubuntu", "550")["spec"], "nodeSelector": {POOL: unique}}},
    )  # fmt: skip
    result = kube.gpudrv("audit", "--matrix", str(matrix))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"node {ubuntu} is selected by both NVIDIADriver/{unique}-a and NVIDIADriver/{unique}-b" in line


OPERATOR = {"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}


def operator_deployment(namespace: str, image: str) -> dict[str, Any]:
    """The operator's Deployment as its Helm chart labels it, scaled to zero: only its image tag counts."""
    container = {"name": "gpu-operator", "image": image}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gpu-operator", "namespace": namespace, "labels": OPERATOR},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "gpu-operator"}},
            "template": {"metadata": {"labels": OPERATOR}, "spec": {"containers": [container]}},
        },
    }


def test_live_operator_release_from_its_deployment(fleet: Fleet, namespace: str) -> None:
    kube, unique, matrix = fleet.kube, fleet.unique, fleet.matrix
    _, rhel = fleet.pools()
    fleet.create(
        cluster_policy(f"{unique}-policy", useNvidiaDriverCRD=True),
        nvidiadriver(f"{unique}-rhel", unique, "rhel", "535"),
    )
    kube.apply(json.dumps(operator_deployment(namespace, "nvcr.io/nvidia/gpu-operator:v26.3.3")))
    fleet.resources.append(f"deployment/gpu-operator -n {namespace}")
    _, data = audit(kube, matrix)
    assert mine(data, unique)[rhel]["image"] == f"nvcr.io/nvidia/driver:535-{RHEL_KERNEL}-rhel9.4"
    _, data = audit(kube, matrix, "--operator-version", "v26.7.0")  # the flag wins
    assert rhel not in mine(data, unique)


def test_live_cluster_policy_on_mixed_os_warns(fleet: Fleet) -> None:
    kube, unique, matrix = fleet.kube, fleet.unique, fleet.matrix
    ubuntu, rhel = fleet.pools()
    policy = cluster_policy(
        f"{unique}-policy", usePrecompiled=True, repository="nvcr.io/nvidia", image="driver", version="535"
    )
    fleet.create(policy)
    code, data = audit(kube, matrix)
    assert (code, data["mode"]) == (1, "ClusterPolicy")
    (note,) = [n for n in data["notes"] if ubuntu in n["node_names"]]
    assert f"{rhel} pulls nvcr.io/nvidia/driver:535-{RHEL_KERNEL}-ubuntu22.04" in note["message"]
    assert f"{ubuntu} pulls nvcr.io/nvidia/driver:535-{UBUNTU_KERNEL}-rhel9" in note["message"]


def git(root: Path, *args: str) -> None:
    identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
    subprocess.run(["git", *identity, *args], cwd=root, check=True, capture_output=True)


def test_diff_and_plan_read_the_driver_resources(fleet: Fleet, tmp_path: Path) -> None:
    kube, unique = fleet.kube, fleet.unique
    ubuntu, rhel = fleet.pools()
    live = [
        cluster_policy(f"{unique}-policy", useNvidiaDriverCRD=True),
        nvidiadriver(f"{unique}-ubuntu", unique, "ubuntu", "535"),
        nvidiadriver(f"{unique}-rhel", unique, "rhel", "535"),
    ]
    fleet.create(*live)
    # The fleet repository: the same resources, with both pools bumped to 550 in git.
    fleet = tmp_path / "fleet"
    (fleet / "matrix").mkdir(parents=True)
    (fleet / "matrix/support-matrix.csv").write_text(MATRIX)
    desired = [live[0], *(nvidiadriver(d["metadata"]["name"], unique, os_id, "550") for d, os_id in
                          zip(live[1:], ("ubuntu", "rhel"), strict=True))]  # fmt: skip
    (fleet / "clusters").mkdir()
    (fleet / "clusters/drivers.yaml").write_text("\n---\n".join(json.dumps(d) for d in desired))
    git(fleet, "init", "-q", "-b", "main")
    git(fleet, "add", "-A")
    git(fleet, "commit", "-q", "-m", "bump the driver to 550")

    diff = kube.gpudrv("diff", "--from", "clusters", "-o", "json", cwd=fleet)
    assert diff.returncode == 1, diff.stderr
    drivers = {d["name"]: d for d in json.loads(diff.stdout)["drivers"]}
    assert drivers[f"{unique}-ubuntu"]["fields"] == [{"field": "version", "desired": "550", "live": "535"}]
    assert f"{unique}-policy" not in drivers

    plan = kube.gpudrv("plan", "--from", "clusters", "-o", "json", cwd=fleet)
    assert plan.returncode == 1, plan.stderr
    moves = {m["node"]: m for m in json.loads(plan.stdout)["nodes"] if m["node"].startswith(unique)}
    assert moves[ubuntu]["target_driver"] == "550"
    assert moves[ubuntu]["image"] == f"nvcr.io/nvidia/driver:550-{UBUNTU_KERNEL}-ubuntu22.04"
    assert moves[ubuntu]["blocked"] is True  # 550 for this kernel is not in the matrix
    assert moves[rhel]["blocked"] is False, moves[rhel]["gates"]
    assert moves[rhel]["resource"] == f"NVIDIADriver/{unique}-rhel"
