"""docs/lab.md steps 1-8 on the real control plane: kubectl for the lab's own setup, gpudrv for its checks.

The upgrade of step 7 is walked by hand here (drain, relabel, uncordon, state label) as the lab does;
gpudrv's own `apply` will take it over.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Kube
from tests.e2e.gitops import LAB_LABEL, LAB_SELECTOR, STATES, confine

# The eight states LAB.md step 8 walks by hand (the operator's, without wait-for-jobs-required,
# which the operator passes through at once when no waitForCompletion selector is set).
LAB_STATES = [state for state in STATES if state != "wait-for-jobs-required"]

NS = "gpu-drv"
LAB_NODES = ["lab-node-0", "lab-node-1", "lab-node-2", "lab-node-3"]
# The lab's nodes only: the cluster may have other GPU nodes (a developer's own, another test's).
LAB = ("-l", LAB_SELECTOR)
NODE_3 = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "lab-node-3",
        "annotations": {"kwok.x-k8s.io/node": "fake"},
        "labels": {
            "kubernetes.io/hostname": "lab-node-3",
            "type": "kwok",
            LAB_LABEL: "true",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/cuda.driver.major": "550",
            "nvidia.com/cuda.driver.minor": "90",
            "nvidia.com/cuda.driver.rev": "07",
            "feature.node.kubernetes.io/kernel-version.full": "6.8.0-52-generic",
            "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
        },
    },
}
DRAIN = ["drain", "lab-node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s"]


@pytest.fixture
def lab_cluster(kube: Kube, lab: Path) -> Iterator[Path]:
    """The lab's nodes and namespace on the cluster, removed afterwards (the names are the lab's own);
    its workloads kept on its nodes (confine), whatever other nodes the cluster has."""
    confine(lab)
    yield lab
    kube.run("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False)
    kube.run("delete", "node", *LAB_NODES, "--ignore-not-found", check=False)


def pods(kube: Kube, selector: str = "") -> list[dict]:  # type: ignore[type-arg]
    args = ["pods", "-n", NS] + (["-l", selector] if selector else [])
    return list(kube.get(*args)["items"])


def running_trainers(kube: Kube) -> dict[str, str]:
    return {
        pod["metadata"]["name"]: pod["spec"].get("nodeName", "")
        for pod in pods(kube, "app=trainer")
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    }


def disruptions_allowed(kube: Kube) -> int:
    return int(kube.get("pdb", "trainer-pdb", "-n", NS).get("status", {}).get("disruptionsAllowed", -1))


def test_the_lab(kube: Kube, lab_cluster: Path) -> None:
    lab = lab_cluster

    def gpudrv(*args: str) -> tuple[int, str]:
        result = kube.gpudrv(*args, cwd=lab)
        assert "Traceback" not in result.stderr
        return result.returncode, result.stdout

    # 1. Namespace and three GPU nodes, from the bundled manifests.
    kube.run("apply", "-f", str(lab / "clusters/lab/workloads/namespace.yaml"))
    kube.run("apply", "-f", str(lab / "clusters/lab/nodes"))
    for name in LAB_NODES[:3]:
        kube.run("wait", "--for=condition=Ready", f"node/{name}", "--timeout=60s")

    # 2. Tags from labels, one node at a time.
    assert gpudrv("tag", "lab-node-0") == (0, "550-5.15.0-119-generic-ubuntu22.04\n")
    assert gpudrv("tag", "lab-node-1") == (0, "535-5.15.0-107-generic-ubuntu22.04\n")
    assert gpudrv("tag", "lab-node-2") == (0, "550-6.8.0-45-generic-ubuntu24.04\n")

    # 3. The matrix covers the fleet.
    assert gpudrv("audit", *LAB) == (0, "OK\n")

    # 4. A new node with a newer kernel: MISSING until its image row is added.
    kube.apply(json.dumps(NODE_3))
    kube.run("wait", "--for=condition=Ready", "node/lab-node-3", "--timeout=60s")
    assert gpudrv("audit", *LAB) == (1, "lab-node-3 MISSING 550-6.8.0-52-generic-ubuntu24.04\n")
    assert gpudrv("matrix", "add", "550", "6.8.0-52-generic", "ubuntu24.04")[0] == 0
    assert gpudrv("audit", *LAB) == (0, "OK\n")

    # 5. CUDA jobs state their driver as node-label conditions.
    kube.run("apply", "-f", str(lab / "clusters/lab/workloads/cuda-jobs.yaml"))
    kube.run("wait", "--for=jsonpath={.status.phase}=Running", "pod/cuda12-job", "-n", NS, "--timeout=60s")
    assert kube.get("pod", "cuda12-job", "-n", NS)["spec"]["nodeName"] == "lab-node-0"
    kube.run("wait", "--for=condition=PodScheduled=false", "pod/cuda13-job", "-n", NS, "--timeout=60s")
    cuda13 = kube.get("pod", "cuda13-job", "-n", NS)
    assert cuda13["status"]["phase"] == "Pending"
    scheduled = next(c for c in cuda13["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert "didn't match Pod's node affinity/selector" in scheduled["message"]

    # 6. Four trainers, one per node; a budget of 4 refuses the drain, which still cordons the node.
    kube.run("apply", "-f", str(lab / "clusters/lab/workloads/trainer.yaml"))
    kube.wait_for("4 trainers Running", lambda: len(running_trainers(kube)) == 4)
    assert sorted(running_trainers(kube).values()) == LAB_NODES
    kube.wait_for("trainer-pdb status", lambda: disruptions_allowed(kube) == 0)
    refused = kube.run(*DRAIN, check=False)
    assert refused.returncode != 0
    assert "disruption budget" in refused.stderr
    assert kube.get("node", "lab-node-1")["spec"].get("unschedulable") is True
    assert len(running_trainers(kube)) == 4

    # 7. The upgrade, in order: image row first, then room in the budget, drain, relabel, uncordon.
    label = "nvidia.com/gpu-driver-upgrade-state"
    assert len(LAB_STATES) == 8
    kube.run("label", "node", "lab-node-1", f"{label}={LAB_STATES[0]}", "--overwrite")
    assert gpudrv("matrix", "add", "--tag", "550-5.15.0-107-generic-ubuntu22.04")[0] == 0
    patch = json.dumps({"spec": {"minAvailable": 3}})
    kube.run("patch", "pdb", "trainer-pdb", "-n", NS, "--type=merge", "-p", patch)
    kube.wait_for("the disruption controller to allow 1", lambda: disruptions_allowed(kube) == 1)
    for state in LAB_STATES[1:4]:
        kube.run("label", "node", "lab-node-1", f"{label}={state}", "--overwrite")
    drained = kube.run(*DRAIN, check=False)
    assert drained.returncode == 0, drained.stderr
    assert "lab-node-1" not in running_trainers(kube).values()
    kube.run("label", "node", "lab-node-1", f"{label}={LAB_STATES[4]}", "--overwrite")
    driver = [
        "nvidia.com/cuda.driver.major=550",
        "nvidia.com/cuda.driver.minor=90",
        "nvidia.com/cuda.driver.rev=07",
    ]
    kube.run("label", "node", "lab-node-1", "--overwrite", *driver)
    kube.run("label", "node", "lab-node-1", f"{label}={LAB_STATES[5]}", "--overwrite")
    assert gpudrv("tag", "lab-node-1") == (0, "550-5.15.0-107-generic-ubuntu22.04\n")
    kube.run("label", "node", "lab-node-1", f"{label}={LAB_STATES[6]}", "--overwrite")
    kube.run("uncordon", "lab-node-1")
    kube.run("label", "node", "lab-node-1", f"{label}={LAB_STATES[7]}", "--overwrite")
    kube.wait_for("the trainer back on lab-node-1", lambda: "lab-node-1" in running_trainers(kube).values())
    assert gpudrv("audit", *LAB) == (0, "OK\n")

    # 8. The final report, computed from the live cluster and the files.
    code, out = gpudrv("report", *LAB)
    assert code == 0
    report = out.splitlines()
    assert report[:3] == ["NODES=4", "SKEW=0", "MATRIX_ROWS=5"]
    assert "LAB_NODE_1_TAG=550-5.15.0-107-generic-ubuntu22.04" in report
    assert "LAB_NODE_1_UPGRADE_STATE=upgrade-done" in report
    nodes = json.loads(gpudrv("report", "-o", "json", *LAB)[1])["nodes"]
    assert next(node for node in nodes if node["node"] == "lab-node-1") == {
        "node": "lab-node-1",
        "tag": "550-5.15.0-107-generic-ubuntu22.04",
        "upgrade_state": "upgrade-done",
        "next_kernel": None,
        "next_tag": None,
        "next_status": None,
    }
    node_1 = kube.get("node", "lab-node-1")
    assert node_1["metadata"]["labels"][label] == "upgrade-done"
    assert not node_1["spec"].get("unschedulable")
