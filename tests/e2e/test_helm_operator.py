"""The GPU Operator installed by the real `helm install` of its own chart, upgraded the GitOps way.

The operator is the real one (scripts/operator, as in the other operator tests); its ClusterPolicy is
not applied by the test but rendered and applied by the real Helm (scripts/helm) from the chart of the
same operator module (tests/helm/chart.py), as Flux's helm-controller would. The fleet repository holds
a Flux HelmRelease pinning that chart with the driver's values. gpudrv reads the desired state once
(adapters/desired.py): `plan` and `apply --dry-run` agree on the operator-mode plan, `apply --hold`
holds all but the canary, the test plays the engine's sync (`helm upgrade` with the merged values), and
`apply --await-sync` supervises the operator's upgrade to the end. gpudrv never writes the
ClusterPolicy: its managedFields name Helm alone.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpudrv_command, gpudrv_env
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.gpu_operator import (
    NAMESPACE,
    REGISTRY,
    SKIP_LABEL,
    DriverLabels,
    GpuOperator,
    operator_script,
)
from tests.e2e.test_operator_rollout import HELD, KERNEL, KERNELS, image_of, leftovers, on_image
from tests.helm import chart

RELEASE = "gpu-operator"
CHART_VERSION = "v25.3.4"  # the chart of the operator module scripts/operator runs (tests/operator/go.mod)
POLICY = "cluster-policy"  # the ClusterPolicy the chart renders (templates/clusterpolicy.yaml)
OLD, NEW = "550", "570"
OFF = {"enabled": False}
OPERANDS_OFF = (
    "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager", "nodeStatusExporter", "gds",
    "vgpuManager", "vgpuDeviceManager", "vfioManager", "sandboxDevicePlugin", "kataManager", "ccManager",
    "psa", "cdi",
)  # fmt: skip


def values(version: str) -> dict[str, Any]:
    """The chart's values for a fleet of precompiled drivers, every operand but the driver and the
    validator off (their DaemonSets would only add pods), images from a registry that does not exist
    (kwok never pulls). maxUnavailable 100%: the operator counts every cordoned GPU node of the cluster
    against it; gpudrv's holds do the staging."""

    def image(name: str, tag: str) -> dict[str, str]:
        return {"repository": REGISTRY, "image": name, "version": tag}

    return {
        "nfd": OFF,
        "operator": {"upgradeCRD": False, "initContainer": image("cuda", "12.8.1-base-ubi9")},
        "driver": {
            "usePrecompiled": True,
            **image("driver", version),
            "manager": image("k8s-driver-manager", "v0.8.1"),
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "100%"},
        },
        "validator": image("gpu-operator-validator", "v25.3.4"),
        **dict.fromkeys(OPERANDS_OFF, OFF),
    }


def helm_release(version: str) -> dict[str, Any]:
    """The fleet's Flux HelmRelease: the operator's chart at CHART_VERSION with values(version)."""
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": RELEASE, "namespace": NAMESPACE},
        "spec": {
            "interval": "1h",
            "chart": {
                "spec": {
                    "chart": "gpu-operator",
                    "version": CHART_VERSION,
                    "sourceRef": {"kind": "HelmRepository", "name": "nvidia"},
                }
            },
            "values": values(version),
        },
    }


@dataclass
class Helm:
    """The real Helm against the test cluster, its own folders under `home`."""

    binary: Path
    chart: Path
    kube: Kube
    home: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.binary), *args, "--kubeconfig", str(self.kube.kubeconfig), "--namespace", NAMESPACE],
            capture_output=True,
            text=True,
            env=chart.helm_env(self.home),
            check=False,
            timeout=300,
        )
        assert proc.returncode == 0, f"helm {' '.join(args[:2])} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def values_file(self, version: str) -> Path:
        path = self.home / f"values-{version}.yaml"
        path.write_text(json.dumps(values(version), indent=2) + "\n")  # JSON is YAML
        return path

    def install(self, version: str) -> None:
        # scripts/operator up installed the CRDs (the chart's crds/ are the same files).
        self.run("install", RELEASE, str(self.chart), "--skip-crds", "-f", str(self.values_file(version)))

    def upgrade(self, version: str) -> None:
        """What the GitOps engine does once the change is merged (Flux's helm-controller: an upgrade)."""
        self.run("upgrade", RELEASE, str(self.chart), "--skip-crds", "-f", str(self.values_file(version)))


@pytest.fixture(scope="module")
def helm_operator(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GpuOperator, Helm]]:
    """The real operator, its ClusterPolicy and Deployment installed by `helm install` of its chart."""
    operator_script("down", check=False)  # leftovers of an interrupted run
    operator_script("up")
    home = tmp_path_factory.mktemp("helm")
    helm = Helm(chart.helm_binary(), chart.chart_copy(home), kube, home)
    labels = DriverLabels(kube)
    try:
        helm.install(OLD)
        yield GpuOperator(kube, policy=POLICY), helm
    finally:
        labels.stop()
        subprocess.run(
            [str(helm.binary), "uninstall", RELEASE, "--kubeconfig", str(kube.kubeconfig), "-n", NAMESPACE],
            capture_output=True,
            env=chart.helm_env(home),
            check=False,
            timeout=300,
        )
        operator_script("down", check=False)


@dataclass
class HelmFleet:
    """The fleet repository (a HelmRelease and the matrix on `main`) and gpudrv run in it."""

    root: Path
    kube: Kube
    nodes: FakeNodes

    def git(self, *args: str) -> None:
        identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
        subprocess.run(["git", *identity, *args], cwd=self.root, check=True, capture_output=True)

    def write(self, version: str) -> None:
        (self.root / "fleet").mkdir(exist_ok=True)
        (self.root / "fleet" / "helmrelease.yaml").write_text(
            json.dumps(helm_release(version), indent=2) + "\n"
        )
        (self.root / "matrix").mkdir(exist_ok=True)
        rows = [f"{branch},{kernel},ubuntu22.04" for branch in (OLD, NEW) for kernel in KERNELS]
        (self.root / "matrix" / "support-matrix.csv").write_text(
            "\n".join(["driver_branch,kernel,os_tag", *rows]) + "\n"
        )
        self.git("add", "-A")
        self.git("commit", "-q", "-m", f"driver {version}")

    def gpudrv(self, *args: str) -> subprocess.CompletedProcess[str]:
        common = ["--from", "fleet", "--matrix", "matrix/support-matrix.csv", "-l", self.nodes.selector]
        if args[0] in ("plan", "apply"):
            common += ["--merged-ref", "main"]
        return subprocess.run(
            [*gpudrv_command(), *args, *common],
            cwd=self.root,
            env=gpudrv_env(self.kube.env),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def managers(operator: GpuOperator) -> set[str]:
    fields = operator.get_policy()["metadata"].get("managedFields") or []
    return {str(entry.get("manager")) for entry in fields}


@pytest.fixture
def helm_nodes(helm_operator: tuple[GpuOperator, Helm], nodes: FakeNodes) -> Iterator[FakeNodes]:
    """`nodes`, whose nodes go with the pods bound to them at the end (GpuOperator.remove_nodes). Not
    operator_nodes: that one starts the module fixture that applies a ClusterPolicy of its own."""
    yield nodes
    helm_operator[0].remove_nodes(nodes.created)


def test_helm_installed_operator_planned_held_synced_and_supervised(
    helm_operator: tuple[GpuOperator, Helm], helm_nodes: FakeNodes, tmp_path: Path, kube: Kube
) -> None:
    operator, helm = helm_operator
    operator_nodes = helm_nodes
    names = [f"hm-{operator_nodes.id[:6]}-{i}" for i in range(2)]
    for index, name in enumerate(names):
        operator.add_nodes(operator_nodes, name, **{KERNEL: KERNELS[index % 2]})
    for name in names:
        kube.wait_for(f"{name} on {OLD}", lambda n=name: on_image(operator, n, OLD), 180)
        operator.wait_for_state(name, "upgrade-done")
    assert "gpudrv" not in managers(operator)
    fleet = HelmFleet(tmp_path, kube, operator_nodes)
    fleet.git("init", "-q", "-b", "main")
    fleet.write(NEW)  # the PR, merged: the HelmRelease's driver.version 550 -> 570

    # plan and apply --dry-run read one desired state: the chart's ClusterPolicy, the chart's release.
    plan = fleet.gpudrv("plan", "-o", "json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = json.loads(plan.stdout)
    origin = planned["desired"]["operator"]["origin"]
    assert planned["desired"]["mode"] == "ClusterPolicy"
    assert planned["desired"]["operator"] == {"version": CHART_VERSION, "from": "chart", "origin": origin}
    assert origin.startswith("fleet/helmrelease.yaml:")
    assert planned["desired"]["resources"] == [
        {"ref": f"ClusterPolicy/{POLICY}", "origin": "fleet/helmrelease.yaml:1", "rendered": True}
    ]
    assert sorted(node["node"] for node in planned["nodes"]) == names
    dry = fleet.gpudrv("apply", "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    dry_run = json.loads(dry.stdout)
    assert dry_run["desired"] == planned["desired"] and dry_run["mode"] == "ClusterPolicy"
    assert f"would wait for the GitOps engine to apply ClusterPolicy/{POLICY} (version {NEW})" in dry.stderr
    assert f"canary: {names[0]} -> {image_of(operator, names[0], NEW)}" in dry.stderr

    hold = fleet.gpudrv("apply", "--hold")
    assert hold.returncode == 0, hold.stdout + hold.stderr
    assert "the driver resources are left to their GitOps engine" in hold.stdout
    labels = [operator.node(name)["metadata"].get("labels") or {} for name in names]
    assert [item.get(SKIP_LABEL) for item in labels] == [None, "true"]
    assert operator.get_policy()["spec"]["driver"]["version"] == OLD

    helm.upgrade(NEW)  # the engine's sync of the merged HelmRelease
    synced = fleet.gpudrv("apply", "--await-sync", "--timeout", "5m")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert synced.stdout.rstrip().endswith("audit: OK"), synced.stdout
    for name in names:
        assert operator.state(name) == "upgrade-done" and on_image(operator, name, NEW), name
    assert leftovers(operator, names) == []
    assert not any(HELD in (operator.node(name)["metadata"].get("annotations") or {}) for name in names)
    assert "gpudrv" not in managers(operator)  # Helm's resource, never written by gpudrv
    print(f"\nplan:\n{plan.stderr}\nhold:\n{hold.stdout}\nawait-sync:\n{synced.stdout}")
