"""The GPU Operator installed by the real `helm install` of its own chart, upgraded the GitOps way.

The operator is the real one (scripts/operator, as in the other operator tests); its ClusterPolicy is
not applied by the test but rendered and applied by the real Helm (scripts/helm) from the chart of the
same operator module (tests/helm/chart.py), as Flux's helm-controller would. The fleet repository holds
a Flux HelmRelease pinning that chart with the driver's values. gpudrv reads the desired state once
(adapters/desired.py): `plan` and `apply --dry-run` agree on the operator-mode plan, `apply --hold`
holds all but the canary, the test plays the engine's sync (`helm upgrade` with the merged values), and
`apply --await-sync` supervises the operator's upgrade to the end. The same again with the values
files named in gpudrv.yaml's helm: instead of a HelmRelease, --await-sync started before the sync (it
waits for it). gpudrv never writes the ClusterPolicy: its field managers are Helm and the operator.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
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
from tests.git.conftest import Script
from tests.helm import chart
from tests.schemas import output_schema

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
        self.sync(self.values_file(version))

    def sync(self, *values_files: Path) -> None:
        """`helm upgrade` of the release with these values files, in order (`helm -f a -f b`)."""
        files = [arg for path in values_files for arg in ("-f", str(path))]
        self.run("upgrade", RELEASE, str(self.chart), "--skip-crds", *files)


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


# What apply --dry-run says of the ClusterPolicy the chart renders.
WOULD_WAIT = (
    f"would wait for Helm or its GitOps engine to apply ClusterPolicy/{POLICY} "
    f"(version {NEW}, rendered from Helm values)"
)


def as_yaml(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"  # JSON is YAML


@dataclass
class HelmFleet:
    """The fleet repository on `main` (the operator's Helm installation: a Flux HelmRelease in fleet/;
    the matrix) and gpudrv run in it."""

    root: Path
    kube: Kube
    nodes: FakeNodes
    repo: Script = field(init=False, repr=False)  # the repository at root, on main

    def __post_init__(self) -> None:
        self.repo = Script.init(self.root)

    def installation(self, version: str) -> dict[str, str]:
        """The files (path: text) that install the operator's chart with driver `version`."""
        return {"fleet/helmrelease.yaml": as_yaml(helm_release(version))}

    def write(self, version: str) -> None:
        """The installation at driver `version` and the matrix (both branches), committed on main."""
        for path, text in self.installation(version).items():
            self.repo.write(path, text)
        rows = [f"{branch},{kernel},ubuntu22.04" for branch in (OLD, NEW) for kernel in KERNELS]
        self.repo.write("matrix/support-matrix.csv", "\n".join(["driver_branch,kernel,os_tag", *rows]) + "\n")
        self.repo.commit(f"driver {version}")

    def command(self, *args: str) -> list[str]:
        common = ["--from", "fleet", "--matrix", "matrix/support-matrix.csv", "-l", self.nodes.selector]
        if args[0] in ("plan", "apply"):
            common += ["--merged-ref", "main"]
        return [*gpudrv_command(), *args, *common]

    def gpudrv(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            cwd=self.root,
            env=gpudrv_env(self.kube.env),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """gpudrv running in the background: its stdout and stderr are pipes the test reads."""
        return subprocess.Popen(
            self.command(*args),
            cwd=self.root,
            env=gpudrv_env(self.kube.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


# gpudrv.yaml's helm: names the values files, in order (later over earlier); they live in the fleet
# folder, which holds no Node manifest (the nodes are the cluster's).
VALUES_FILES = ("fleet/values/gpu-operator.yaml", "fleet/values/driver.yaml")
GPUDRV_YAML = f"""helm:
  valuesFiles:
    - {VALUES_FILES[0]}
    - {VALUES_FILES[1]}
  chartVersion: {CHART_VERSION}
"""


@dataclass
class ValuesFleet(HelmFleet):
    """The operator installed from its chart with values files named in gpudrv.yaml (docs/helm.md):
    the operator's values (driver 550), then the driver's pin alone, which a driver PR changes."""

    def installation(self, version: str) -> dict[str, str]:
        return {
            "gpudrv.yaml": GPUDRV_YAML,
            VALUES_FILES[0]: as_yaml(values(OLD)),
            VALUES_FILES[1]: as_yaml({"driver": {"version": version}}),
        }

    def sync(self, helm: Helm) -> None:
        """The engine's sync of main: `helm upgrade` with the values files gpudrv.yaml names, in order."""
        helm.sync(*(self.root / path for path in VALUES_FILES))


def managers(operator: GpuOperator) -> set[str]:
    """The ClusterPolicy's field managers (`kubectl get` leaves managedFields out unless asked)."""
    policy = operator.kube.get("clusterpolicy", operator.policy, "--show-managed-fields")
    return {str(entry.get("manager")) for entry in policy["metadata"].get("managedFields") or []}


@pytest.fixture
def helm_nodes(helm_operator: tuple[GpuOperator, Helm], nodes: FakeNodes) -> Iterator[FakeNodes]:
    """`nodes`, whose nodes go with the pods bound to them at the end (GpuOperator.remove_nodes). Not
    operator_nodes: that one starts the module fixture that applies a ClusterPolicy of its own."""
    yield nodes
    helm_operator[0].remove_nodes(nodes.created)


def start_nodes(operator: GpuOperator, nodes: FakeNodes, prefix: str) -> list[str]:
    """Two operator-managed nodes, one per kernel, upgrade-done on the release's driver (OLD)."""
    assert operator.get_policy()["spec"]["driver"]["version"] == OLD
    names = [f"{prefix}-{nodes.id[:6]}-{i}" for i in range(2)]
    for index, name in enumerate(names):
        operator.add_nodes(nodes, name, **{KERNEL: KERNELS[index % 2]})
    for name in names:
        nodes.kube.wait_for(f"{name} on {OLD}", lambda n=name: on_image(operator, n, OLD), 180)
        operator.wait_for_state(name, "upgrade-done")
    return names


def test_helm_installed_operator_planned_held_synced_and_supervised(
    helm_operator: tuple[GpuOperator, Helm], helm_nodes: FakeNodes, tmp_path: Path, kube: Kube
) -> None:
    operator, helm = helm_operator
    operator_nodes = helm_nodes
    helm.upgrade(OLD)  # the release as installed, whatever an earlier test left
    names = start_nodes(operator, operator_nodes, "hm")
    assert "helm" in managers(operator) and "gpudrv" not in managers(operator), managers(operator)
    fleet = HelmFleet(tmp_path, kube, operator_nodes)
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
    assert WOULD_WAIT in dry.stderr
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
    assert "helm" in managers(operator) and "gpudrv" not in managers(operator), managers(operator)
    print(f"\nplan:\n{plan.stderr}\nhold:\n{hold.stdout}\nawait-sync:\n{synced.stdout}")


WAITING = "waiting for the GitOps engine to apply the driver resources"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def test_a_gpudrv_yaml_helm_fleet_is_planned_held_and_awaited_as_one_operator_plan(
    helm_operator: tuple[GpuOperator, Helm], helm_nodes: FakeNodes, tmp_path: Path, kube: Kube
) -> None:
    """The operator's values are files named in gpudrv.yaml's helm: (no HelmRelease, no Application).
    plan, apply --dry-run, apply --hold and apply --await-sync all take the operator path through the
    ClusterPolicy the chart renders from those files, and say the same mode, release (the chart version,
    from gpudrv.yaml's line) and image for each node; the same change as a Flux HelmRelease plans the
    same. --await-sync, started before the engine's sync, waits for the real `helm upgrade` of those
    files, then supervises the rollout; gpudrv writes nodes only, never Helm's ClusterPolicy."""
    operator, helm = helm_operator
    fleet = ValuesFleet(tmp_path / "values", kube, helm_nodes)
    fleet.write(OLD)  # the fleet as installed: driver 550
    fleet.sync(helm)  # the engine's sync of it (whatever an earlier test left)
    names = start_nodes(operator, helm_nodes, "hv")
    canary, held = names
    fleet.write(NEW)  # the PR, merged: fleet/values/driver.yaml's driver.version 550 -> 570
    images = {name: image_of(operator, name, NEW) for name in names}
    desired: dict[str, Any] = {
        "mode": "ClusterPolicy",
        "operator": {"version": CHART_VERSION, "from": "chart", "origin": "gpudrv.yaml:5"},  # chartVersion
        "sources": [{"kind": "gpudrv.yaml helm", "where": "gpudrv.yaml:1"}],
        "resources": [{"ref": f"ClusterPolicy/{POLICY}", "origin": "gpudrv.yaml:1", "rendered": True}],
    }

    def read(result: subprocess.CompletedProcess[str], command: str) -> dict[str, Any]:
        """The -o json of a run that exited 0, valid, on the operator path with the one desired state."""
        assert result.returncode == 0, result.stdout + result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        jsonschema.validate(document, output_schema(command))
        assert (document["mode"], document["desired"]) == ("ClusterPolicy", desired), document
        return document

    planned = read(fleet.gpudrv("plan", "-o", "json"), "plan")
    assert {node["node"]: node["image"] for node in planned["nodes"]} == images, planned["nodes"]
    for node in planned["nodes"]:
        assert (node["resource"], node["live_driver"], node["target_driver"], node["blocked"]) == (
            f"ClusterPolicy/{POLICY}", OLD, NEW, False,
        ), node  # fmt: skip
    flux = HelmFleet(tmp_path / "flux", kube, helm_nodes)
    flux.write(NEW)  # the same values as a Flux HelmRelease: the same plan, another provenance
    flux_run = flux.gpudrv("plan", "-o", "json")
    assert flux_run.returncode == 0, flux_run.stdout + flux_run.stderr
    flux_plan = json.loads(flux_run.stdout)
    assert flux_plan["nodes"] == planned["nodes"]
    assert {**flux_plan["desired"]["operator"], "origin": None} == {**desired["operator"], "origin": None}
    assert flux_plan["desired"]["operator"]["origin"].startswith("fleet/helmrelease.yaml:")

    dry = fleet.gpudrv("apply", "--dry-run", "-o", "json")
    dry_run = read(dry, "apply")
    assert {node["node"]: (node["outcome"], node["detail"]) for node in dry_run["nodes"]} == {
        name: ("planned", image) for name, image in images.items()
    }
    assert "the driver resources are rendered from Helm values (gpudrv.yaml:1)" in dry.stderr
    assert WOULD_WAIT in dry.stderr
    assert f"canary: {canary} -> {images[canary]}\n" in dry.stderr
    assert f"would hold: {held} -> {images[held]} (skip label" in dry.stderr

    hold = fleet.gpudrv("apply", "--hold", "-o", "json")
    assert {node["node"] for node in read(hold, "apply")["nodes"]} == set(names)
    assert f"held 1 node(s) with {SKIP_LABEL}=true until the canary is done: {held}\n" in hold.stderr
    assert [(operator.node(name)["metadata"].get("labels") or {}).get(SKIP_LABEL) for name in names] == [
        None, "true",
    ]  # fmt: skip
    assert operator.get_policy()["spec"]["driver"]["version"] == OLD

    # --await-sync before the engine's sync: it names what it waits for, and Helm as its owner, and waits.
    runs: list[tuple[subprocess.CompletedProcess[str], str]] = []

    def await_sync_then_helm_upgrade() -> None:
        process = fleet.start("apply", "--await-sync", "--timeout", "5m", "-o", "json")
        assert process.stderr is not None
        before: list[str] = []
        for line in process.stderr:
            before.append(line)
            if line.startswith(WAITING):
                break
        waiting = (
            f"{WAITING} (owned by 'helm'): ClusterPolicy/{POLICY}: spec.driver.version '{OLD}' -> '{NEW}'"
        )
        assert before[-1:] == [waiting + "\n"], "".join(before)
        time.sleep(6)
        assert process.poll() is None, "".join(before)  # still waiting: nothing has synced
        assert operator.get_policy()["spec"]["driver"]["version"] == OLD
        assert operator.state(canary) == "upgrade-done" and on_image(operator, canary, OLD)
        fleet.sync(helm)  # the engine's sync of the merged commit: the same values files, in order
        out, err = process.communicate(timeout=600)
        runs.append(
            (subprocess.CompletedProcess(process.args, process.returncode, out, err), "".join(before))
        )

    requests = kube.requests_of(await_sync_then_helm_upgrade)
    ((synced, before),) = runs
    document = read(synced, "apply")
    assert {node["node"]: (node["outcome"], node["detail"]) for node in document["nodes"]} == {
        name: ("done", image) for name, image in images.items()
    }
    assert (document["summary"], document["audited"], document["findings"]) == ("audit: OK", True, [])
    assert "the driver resources in the cluster are as declared" in synced.stderr, before + synced.stderr
    assert f"released 1 node(s) to the operator: {held}\n" in synced.stderr
    for name in names:
        assert operator.state(name) == "upgrade-done" and on_image(operator, name, NEW), name
    assert leftovers(operator, names) == []
    # Helm wrote the ClusterPolicy; gpudrv read it and wrote one thing: the held node's release.
    assert operator.get_policy()["spec"]["driver"]["version"] == NEW
    assert "helm" in managers(operator) and "gpudrv" not in managers(operator), managers(operator)
    writes = {(request.verb, request.path) for request in requests if request.verb in WRITES}
    assert writes == {("patch", f"/api/v1/nodes/{held}")}, writes  # the release of the held node
    assert any("/clusterpolicies" in request.path for request in requests), [str(r) for r in requests]
    print(f"\nfield managers of ClusterPolicy/{POLICY}: {sorted(managers(operator))}")
    print(f"await-sync:\n{before}{synced.stderr}")
