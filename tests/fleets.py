"""One fleet written in every kind of source gpudrv reads (core/contract/desired.py SourceKind), for the
command
matrix: tests/cli/test_fleet_matrix.py runs the offline commands on each, tests/e2e/test_fleet_matrix_live.py
the commands that read a cluster. Every kind describes the same two Ubuntu 22.04 GPU nodes, running driver
550 and wanting precompiled 570, so every command on every kind must name the same images; each kind
pins (or not) the operator release its own way, and every command must say the same of that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.core.contract.desired import SourceKind
from tests.git.conftest import Script

BRANCH, RUNNING = "570", "550"
KERNELS = ("5.15.0-119-generic", "6.8.0-45-generic")
NEXT_KERNEL = "5.15.0-130-generic"  # preflight's kernel
NODES = ("fleet-node-0", "fleet-node-1")
FOLDER = "fleet"
MATRIX = "matrix/support-matrix.csv"
POLICY = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "100%"}


def node_labels(index: int, major: str = RUNNING) -> dict[str, str]:
    """What NFD and GFD put on the node: its kernel, its OS, the driver it runs (`major`)."""
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "feature.node.kubernetes.io/kernel-version.full": KERNELS[index],
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
    }


def tag(index: int, kernel: str | None = None) -> str:
    return f"{BRANCH}-{kernel or KERNELS[index]}-ubuntu22.04"


@dataclass(frozen=True)
class Expected:
    """What every command must say of the kind: its mode, the operator release and where it came from
    (`origin`: a prefix of the origin's text), and each node's desired tag (tags())."""

    mode: str
    version: str | None
    source: str
    origin: str | None = None

    def tags(self) -> dict[str, str]:
        return {name: tag(index) for index, name in enumerate(NODES)}

    def check(self, desired: dict[str, Any], what: str) -> None:
        operator = desired["operator"]
        assert (desired["mode"], operator["version"], operator["from"]) == (
            self.mode,
            self.version,
            self.source,
        ), f"{what}: {desired}"
        if self.origin is None:
            assert operator["origin"] in (None, "--operator-version"), f"{what}: {desired}"
        else:
            assert str(operator["origin"]).startswith(self.origin), f"{what}: {desired}"


def _yaml(documents: list[dict[str, Any]]) -> str:
    return "---\n".join(json.dumps(document, indent=2) + "\n" for document in documents)  # JSON is YAML


def _nodes(folder: Path, major: str, extra: dict[str, str]) -> None:
    (folder / "nodes").mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(NODES):
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {**node_labels(index, major), **extra}},
        }
        (folder / "nodes" / f"{name}.yaml").write_text(_yaml([node]))


def _driver_spec() -> dict[str, Any]:
    return {"usePrecompiled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": BRANCH}


def _policy(**driver: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"driver": {**driver, "upgradePolicy": POLICY}},
    }


def _values() -> dict[str, Any]:
    return {"driver": {"usePrecompiled": True, "version": BRANCH, "upgradePolicy": POLICY}}


def lab(root: Path, extra: dict[str, str] | None = None) -> Expected:
    _nodes(root / FOLDER, BRANCH, extra or {})  # the lab's desired state is the nodes' driver labels
    return Expected("lab", None, "newest")


def cluster_policy(root: Path, extra: dict[str, str] | None = None) -> Expected:
    folder = root / FOLDER
    _nodes(folder, RUNNING, extra or {})
    (folder / "cluster-policy.yaml").write_text(_yaml([_policy(**_driver_spec())]))
    return Expected("ClusterPolicy", None, "newest")


def nvidia_driver(root: Path, extra: dict[str, str] | None = None) -> Expected:
    folder = root / FOLDER
    _nodes(folder, RUNNING, extra or {})
    driver = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": "ubuntu"},
        "spec": {"driverType": "gpu", **_driver_spec(), "nodeSelector": {"nvidia.com/gpu.present": "true"}},
    }
    (folder / "cluster-policy.yaml").write_text(_yaml([_policy(useNvidiaDriverCRD=True), driver]))
    (root / "gpudrv.yaml").write_text("operatorVersion: v25.10.1\n")
    return Expected("NVIDIADriver", "v25.10.1", "gpudrv.yaml", "gpudrv.yaml")


def flux(root: Path, extra: dict[str, str] | None = None) -> Expected:
    folder = root / FOLDER
    _nodes(folder, RUNNING, extra or {})
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
        "spec": {
            "chart": {
                "spec": {
                    "chart": "gpu-operator",
                    "version": "v25.3.4",
                    "sourceRef": {"kind": "HelmRepository", "name": "nvidia"},
                }
            },
            "values": _values(),
        },
    }
    (folder / "helmrelease.yaml").write_text(_yaml([release]))
    return Expected("ClusterPolicy", "v25.3.4", "chart", f"{FOLDER}/helmrelease.yaml:")


def argo(root: Path, extra: dict[str, str] | None = None) -> Expected:
    folder = root / FOLDER
    _nodes(folder, RUNNING, extra or {})
    application = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "gpu-operator"},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": "https://helm.ngc.nvidia.com/nvidia",
                "chart": "gpu-operator",
                "targetRevision": "v25.10.1",
                "helm": {"valuesObject": _values()},
            },
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "gpu-operator"},
        },
    }
    (folder / "application.yaml").write_text(_yaml([application]))
    return Expected("ClusterPolicy", "v25.10.1", "chart", f"{FOLDER}/application.yaml:")


def gpudrv_helm(root: Path, extra: dict[str, str] | None = None) -> Expected:
    _nodes(root / FOLDER, RUNNING, extra or {})
    (root / "values.yaml").write_text(json.dumps(_values(), indent=2) + "\n")
    (root / "gpudrv.yaml").write_text("helm:\n  valuesFiles: [values.yaml]\n  chartVersion: v25.3.4\n")
    return Expected("ClusterPolicy", "v25.3.4", "chart", "gpudrv.yaml:")


# Every kind read from git; the live cluster (SourceKind.LIVE) is the e2e matrix's own column.
WRITERS = {
    SourceKind.NODE_MANIFESTS: lab,
    SourceKind.CLUSTER_POLICY: cluster_policy,
    SourceKind.NVIDIA_DRIVER: nvidia_driver,
    SourceKind.FLUX_HELM_RELEASE: flux,
    SourceKind.ARGO_APPLICATION: argo,
    SourceKind.GPUDRV_HELM: gpudrv_helm,
}


def repository(
    root: Path, kind: SourceKind, rows: list[str] | None = None, labels: dict[str, str] | None = None
) -> Expected:
    """A git repository at `root` holding the fleet of `kind` and a matrix (`rows`: default every desired
    image), committed on `main` (the image gate's merged ref and matrix impact's base). `labels`: more
    labels on each Node manifest (the e2e tier's selector)."""
    expected = WRITERS[kind](root, labels)
    rows = [f"{BRANCH},{kernel},ubuntu22.04" for kernel in KERNELS] if rows is None else rows
    matrix = "\n".join(["driver_branch,kernel,os_tag", *rows]) + "\n"
    Script.committed(root, f"the fleet as {kind}", {MATRIX: matrix})
    return expected


# The commands that read a fleet, each run on every kind: the offline ones from git alone
# (tests/cli/test_fleet_matrix.py), the others against a cluster (tests/e2e/test_fleet_matrix_live.py).
OFFLINE_COMMANDS = ("tag", "audit", "report", "matrix impact", "preflight", "explain")
LIVE_COMMANDS = (
    "status", "diff", "plan", "apply --dry-run", "apply --hold", "matrix fill --dry-run", "reconcile --once",
)  # fmt: skip
# Commands with --from or --operator-version that decide no node's image, and why.
NOT_A_FLEET_READING = {
    "manifests validate": "checks the manifests against their schema; decides no image",
    "drain": "drains one node through the eviction API; reads no desired state",
    "init": "writes a new fleet repository; --from-cluster reads the cluster as `audit` does",
}
