"""The real NVIDIA GPU Operator in the e2e tier: a module fixture and the helpers its tests need.

`scripts/operator up` builds the operator from the Go module proxy (cached) and runs it beside the
test control plane; `gpu_operator` (module scope) starts it, applies one ClusterPolicy (the operator
reconciles a single one) and, at teardown, runs `scripts/operator down`: the operator stops, and its
ClusterPolicy, DaemonSets, namespace, RuntimeClasses, node labels and CRDs go, so later tests see a
cluster with no operator (gpudrv's lab mode).

Fake GPU nodes for the operator carry what NFD would put on a real one (an NVIDIA PCI device, the
kernel and OS release) plus the FakeNodes selector label; the operator itself adds
nvidia.com/gpu.present and the nvidia.com/gpu.deploy.* labels and runs its driver and validator
DaemonSets there. kwok makes their pods Running and Ready.

One thing a kwok node cannot do is run the driver container, so nothing on the node changes when the
new driver pod starts. On a real node gpu-feature-discovery then relabels it with the running driver
(nvidia.com/cuda.driver.*), and the driver pod's k8s-driver-manager init container toggles the
nvidia.com/gpu.deploy.* labels; the operator's upgrade controller watches node labels, not pods
(controllers/upgrade_controller.go SetupWithManager), so without a label change a node waits at
pod-restart-required for the controller's 2-minute requeue. `DriverLabels` fakes the GFD part: when a
driver pod is Running and Ready on a node, it writes the driver version of the pod's image to the node's
nvidia.com/cuda.driver.* and nvidia.com/cuda.driver-version.* labels, as GFD would.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import REPO

if TYPE_CHECKING:  # tests/e2e/conftest.py imports this module's fixture
    from tests.e2e.conftest import FakeNodes, Kube

SCRIPT = REPO / "scripts" / "operator"
NAMESPACE = "gpu-operator"
POLICY = "gpu-cluster-policy"
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_APP = "nvidia-driver-daemonset"
# Every driver pod of the operator carries this label, a ClusterPolicy's (assets/state-driver/
# 0500_daemonset.yaml:22-25) and an NVIDIADriver's (manifests/state-driver/0500_daemonset.yaml:52-56).
DRIVER_COMPONENT = "app.kubernetes.io/component=nvidia-driver"
VALIDATOR_APP = "nvidia-operator-validator"
DRIVER_CONTAINER = "nvidia-driver-ctr"
# kwok never pulls images: a registry that cannot resolve keeps it honest.
REGISTRY = "registry.gpudrv.invalid/nvidia"
OS_TAG = "ubuntu22.04"
FIRST_VERSION = "550.90.07"

# What NFD puts on a GPU node that the operator reads (controllers/state_manager.go): an NVIDIA PCI
# device (gpuNodeLabels), the full kernel version and the OS release (kernelFullVersion; the driver
# image tag is <version>-<ID><VERSION_ID>); add_nodes adds them to the lab's GPU_LABELS, whose
# cuda.driver.* labels stand for GFD's.
NFD_GPU_LABEL = {"feature.node.kubernetes.io/pci-10de.present": "true"}
DRIVER_LABEL_KEYS = {
    "major": ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver-version.major"),
    "minor": ("nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver-version.minor"),
    "rev": ("nvidia.com/cuda.driver.rev", "nvidia.com/cuda.driver-version.revision"),
}


def upgrade_policy(**overrides: Any) -> dict[str, Any]:
    """The ClusterPolicy's driver.upgradePolicy: the Helm chart's defaults (auto-upgrade on, one node
    at a time, drain off, pod deletion with 300 s timeouts) with `overrides` merged in."""
    policy: dict[str, Any] = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "25%",
        "waitForCompletion": {"timeoutSeconds": 0},
        "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(policy.get(key), dict):
            policy[key] = {**policy[key], **value}
        else:
            policy[key] = value
    return policy


def cluster_policy(version: str = FIRST_VERSION, **upgrade: Any) -> dict[str, Any]:
    """A ClusterPolicy with the driver and the operator's validator on and every other operand off
    (their DaemonSets would only add pods). Images name a registry that does not exist."""

    def image(name: str, tag: str) -> dict[str, str]:
        return {"repository": REGISTRY, "image": name, "version": tag}

    off = {"enabled": False}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "operator": {
                "defaultRuntime": "containerd",
                "runtimeClass": "nvidia",
                "initContainer": image("cuda", "12.8.1-base-ubi9"),
            },
            "daemonsets": {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
            "driver": {
                "enabled": True,
                "useNvidiaDriverCRD": False,
                "usePrecompiled": False,
                **image("driver", version),
                "manager": image("k8s-driver-manager", "v0.8.1"),
                "upgradePolicy": upgrade_policy(**upgrade),
            },
            "validator": {**image("gpu-operator-validator", "v25.3.4"), "plugin": {"env": []}},
            "toolkit": off,
            "devicePlugin": off,
            "dcgm": off,
            "dcgmExporter": off,
            "gfd": off,
            "migManager": off,
            "nodeStatusExporter": off,
            "gds": off,
            "vgpuManager": off,
            "vgpuDeviceManager": off,
            "vfioManager": off,
            "sandboxDevicePlugin": off,
            "kataManager": off,
            "ccManager": off,
            "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
            "psa": {"enabled": False},
            "cdi": {"enabled": False},
            "mig": {"strategy": "single"},
        },
    }


def operator_script(verb: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """scripts/operator against the cluster named by GPUDRV_CLUSTER_STATE (the one `kube` uses)."""
    result = subprocess.run([str(SCRIPT), verb], capture_output=True, text=True, check=False, timeout=3600)
    if check and result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-20:])
        pytest.fail(f"scripts/operator {verb} failed (exit {result.returncode}):\n{tail}", pytrace=False)
    return result


@dataclass
class Transition:
    at: float
    node: str
    state: str | None


class StateRecorder:
    """Every value the upgrade-state label of the watched nodes takes, in order, from a node watch
    (kubectl get -w): transitions that last a few milliseconds are not lost between polls."""

    def __init__(self, kube: Kube, selector: str) -> None:
        jsonpath = '{.metadata.name}{"|"}{.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}{"\\n"}'
        self._proc = subprocess.Popen(
            [str(kube.kubectl_path), "get", "nodes", "-l", selector, "--watch", "-o", f"jsonpath={jsonpath}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **kube.env},
        )
        self.transitions: list[Transition] = []
        self._last: dict[str, str | None] = {}
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            name, _, state = line.rstrip("\n").partition("|")
            value = state or None
            if name and (name not in self._last or self._last[name] != value):
                self._last[name] = value
                self.transitions.append(Transition(time.monotonic(), name, value))

    def caught_up(self, node: str, state: str, timeout: float = 30) -> None:
        """Waits until the watch has delivered `state` for the node (it may trail the API)."""
        deadline = time.monotonic() + timeout
        while self._last.get(node) != state:
            if time.monotonic() > deadline:
                raise AssertionError(f"the node watch never showed {node} at {state}: {self.states_of(node)}")
            time.sleep(0.1)

    def states_of(self, node: str) -> list[str | None]:
        return [t.state for t in self.transitions if t.node == node]

    def seconds(self, node: str, start: str, end: str) -> float:
        """Time from the node's first `start` to its first `end` after it."""
        mine = [t for t in self.transitions if t.node == node]
        first = next(t for t in mine if t.state == start)
        last = next(t for t in mine if t.state == end and t.at >= first.at)
        return last.at - first.at

    def stop(self) -> None:
        self._proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        self._thread.join(timeout=5)


class DriverLabels:
    """Fakes gpu-feature-discovery's driver labels on operator nodes (see the module docstring): a
    Running, Ready driver pod's image tag <major>.<minor>.<rev>-<os> becomes the node's
    nvidia.com/cuda.driver.* and cuda.driver-version.* labels."""

    def __init__(self, kube: Kube, namespace: str = NAMESPACE) -> None:
        self.kube = kube
        jsonpath = (
            '{.spec.nodeName}{"|"}{.status.phase}{"|"}{.metadata.deletionTimestamp}{"|"}'
            '{.status.containerStatuses[*].ready}{"|"}'
            '{.spec.containers[?(@.name=="' + DRIVER_CONTAINER + '")].image}{"\\n"}'
        )
        self._cmd = [
            str(kube.kubectl_path), "get", "pods", "-n", namespace, "-l", DRIVER_COMPONENT,
            "--watch", "-o", f"jsonpath={jsonpath}",
        ]  # fmt: skip
        self._stop = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self.written: list[tuple[str, str]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():  # kubectl's watch ends now and then; start another
            self._proc = subprocess.Popen(
                self._cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env={**os.environ, **self.kube.env},
            )
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                self._handle(line.rstrip("\n").split("|"))
            self._proc.wait()
            self._stop.wait(1)

    def _handle(self, fields: list[str]) -> None:
        if len(fields) != 5:
            return
        node, phase, deleting, ready, image = fields
        if not node or phase != "Running" or deleting or "false" in ready.split() or not ready:
            return
        version = image.rpartition(":")[2].split("-")[0]
        parts = version.split(".")
        if len(parts) == 1 and version.isdigit():
            # A precompiled image's tag names the branch only (<branch>-<kernel>-<os>): GFD would
            # report the full version the driver has; the branch is what this fake knows of it.
            labels = dict.fromkeys(DRIVER_LABEL_KEYS["major"], version)
        elif len(parts) == 3:
            labels = {
                key: value
                for (_, keys), value in zip(DRIVER_LABEL_KEYS.items(), parts, strict=True)
                for key in keys
            }
            labels["nvidia.com/cuda.driver-version.full"] = version
        else:
            return
        current = self.kube.run("get", "node", node, "-o", "json", check=False)
        if current.returncode != 0:
            return
        have = json.loads(current.stdout)["metadata"].get("labels") or {}
        if all(have.get(k) == v for k, v in labels.items()):
            return
        patch = json.dumps({"metadata": {"labels": labels}})
        if self.kube.run("patch", "node", node, "--type=merge", "-p", patch, check=False).returncode == 0:
            self.written.append((node, version))

    def stop(self) -> None:
        self._stop.set()
        if self._proc:
            self._proc.terminate()
        self._thread.join(timeout=5)


@dataclass
class GpuOperator:
    """The running operator, its ClusterPolicy and what the tests read and change through them."""

    kube: Kube
    namespace: str = NAMESPACE
    policy: str = POLICY
    started_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    # -- the ClusterPolicy ------------------------------------------------------------------

    def apply_policy(self, version: str = FIRST_VERSION, **upgrade: Any) -> None:
        """The ClusterPolicy as gpudrv would apply it from git (field manager gpudrv): the rollout
        tests' `gpudrv apply` then changes fields it owns, as on a fleet gpudrv manages."""
        document = json.dumps(cluster_policy(version, **upgrade))
        self.kube.run(
            "apply",
            "--server-side",
            "--field-manager=gpudrv",
            "--force-conflicts",
            "-f",
            "-",
            stdin=document,
        )

    def get_policy(self) -> dict[str, Any]:
        policy: dict[str, Any] = self.kube.get("clusterpolicy", self.policy)
        return policy

    def set_driver_version(self, version: str) -> None:
        self._patch_policy({"spec": {"driver": {"version": version}}})

    def set_upgrade_policy(self, **fields: Any) -> None:
        """Merges `fields` into spec.driver.upgradePolicy (nested dicts merge, None removes)."""
        self._patch_policy({"spec": {"driver": {"upgradePolicy": fields}}})

    def _patch_policy(self, patch: dict[str, Any]) -> None:
        self.kube.run("patch", "clusterpolicy", self.policy, "--type=merge", "-p", json.dumps(patch))

    # -- nodes --------------------------------------------------------------------------------

    def add_nodes(self, nodes: FakeNodes, *names: str, **labels: str) -> list[str]:
        """Fake GPU nodes the operator manages (with the FakeNodes selector label)."""
        from tests.e2e.conftest import GPU_LABELS

        return [nodes.add(name, **{**GPU_LABELS, **NFD_GPU_LABEL, **labels}) for name in names]

    def remove_nodes(self, names: list[str]) -> None:
        """Deletes the nodes, then the pods bound to them. kwok stops simulating a deleted node's
        pods, and the pod garbage collector takes its time with them; until they go, the driver
        DaemonSet has more pods than nodes and the upgrade controller's BuildState fails
        ("driver DaemonSet should not have Unscheduled pods", k8s-operator-libs
        pkg/upgrade/upgrade_state.go), which would stall the next test's upgrade."""
        if not names:
            return
        self.kube.run("delete", "node", *names, "--ignore-not-found", "--wait=true", check=False)
        for pod in self.kube.get("pods", "-A")["items"]:
            if pod["spec"].get("nodeName") in names:
                meta = pod["metadata"]
                self.kube.run(
                    "delete", "pod", meta["name"], "-n", meta["namespace"], "--grace-period=0", "--force",
                    "--ignore-not-found", check=False,
                )  # fmt: skip

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.kube.get("node", name)
        return node

    def state(self, name: str) -> str | None:
        labels: dict[str, str] = self.node(name)["metadata"].get("labels") or {}
        return labels.get(STATE_LABEL)

    def states(self, selector: str) -> dict[str, str | None]:
        items = self.kube.get("nodes", "-l", selector)["items"]
        return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(STATE_LABEL) for n in items}

    def wait_for_state(self, name: str, state: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        current = self.state(name)
        while current != state:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"node {name} is at {current!r}, not {state!r}, after {timeout:.0f}s; its events:\n"
                    + "\n".join(self.node_events(name))
                )
            time.sleep(0.5)
            current = self.state(name)

    def wait_for_upgraded(self, name: str, version: str, timeout: float = 180) -> None:
        """upgrade-done with a Ready driver pod of `version`: right after a version change the node
        still shows the previous upgrade-done until the operator has seen the new DaemonSet."""
        deadline = time.monotonic() + timeout
        while not (self.state(name) == "upgrade-done" and self.driver_running(name, version)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"node {name} is at {self.state(name)!r} without a Ready {version} driver after "
                    f"{timeout:.0f}s; its events:\n" + "\n".join(self.node_events(name))
                )
            time.sleep(0.25)

    def label(self, name: str, key: str, value: str | None) -> None:
        self.kube.run(
            "label", "node", name, f"{key}={value}" if value is not None else f"{key}-", "--overwrite"
        )

    def node_events(self, name: str) -> list[str]:
        """The node's events, oldest first, as `type reason: message` (the operator's upgrade events
        have reason GPUDriverUpgrade; they land in the default namespace, nodes having none)."""
        items = self.kube.get(
            "events", "-A", "--field-selector", f"involvedObject.kind=Node,involvedObject.name={name}"
        )["items"]
        items.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        return [f"{e.get('type')} {e.get('reason')}: {e.get('message')}" for e in items]

    # -- the operator's pods --------------------------------------------------------------------

    def pods(self, app: str, node: str) -> list[dict[str, Any]]:
        return self.pods_matching(f"app={app}", node)

    def pods_matching(self, selector: str, node: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.kube.get(
            "pods", "-n", self.namespace, "-l", selector, "--field-selector", f"spec.nodeName={node}"
        )["items"]
        return items

    def driver_pod(self, node: str) -> dict[str, Any] | None:
        """The node's driver pod, of a ClusterPolicy or of an NVIDIADriver."""
        pods = [
            p
            for p in self.pods_matching(DRIVER_COMPONENT, node)
            if not p["metadata"].get("deletionTimestamp")
        ]
        return pods[0] if pods else None

    def driver_image(self, version: str) -> str:
        return f"{REGISTRY}/driver:{version}-{OS_TAG}"

    def driver_running(self, node: str, version: str) -> bool:
        pod = self.driver_pod(node)
        if not pod or pod["status"].get("phase") != "Running":
            return False
        images = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        statuses = pod["status"].get("containerStatuses") or []
        return images.get(DRIVER_CONTAINER) == self.driver_image(version) and all(
            s["ready"] for s in statuses
        )

    def wait_for_driver(self, names: list[str], version: str, timeout: float = 180) -> None:
        for name in names:
            self.kube.wait_for(
                f"a Ready {version} driver pod on {name}",
                functools.partial(self.driver_running, name, version),
                timeout,
            )

    def validator_ready(self, node: str) -> bool:
        pods = self.pods(VALIDATOR_APP, node)
        return bool(pods) and all(
            p["status"].get("phase") == "Running"
            and all(s["ready"] for s in p["status"].get("containerStatuses") or [])
            for p in pods
        )

    def set_pod_ready(self, pod: dict[str, Any], ready: bool) -> None:
        """Writes a pod's readiness as a kubelet would (kwok's pod-ready stage only acts on Pending
        pods, so a Running pod keeps what is written here): the fake for a validator that fails."""
        statuses = [{**s, "ready": ready} for s in pod["status"].get("containerStatuses") or []]
        conditions = [
            {**c, "status": "True" if ready else "False"} if c["type"] in ("Ready", "ContainersReady") else c
            for c in pod["status"].get("conditions") or []
        ]
        patch = json.dumps({"status": {"containerStatuses": statuses, "conditions": conditions}})
        meta = pod["metadata"]
        self.kube.run(
            "patch",
            "pod",
            meta["name"],
            "-n",
            meta["namespace"],
            "--subresource=status",
            "--type=merge",
            "-p",
            patch,
        )

    def advertise_gpus(self, name: str, count: int) -> None:
        """Puts nvidia.com/gpu in the node's capacity, as the device plugin would (it is off: kwok
        keeps a node's capacity), so GPU workloads schedule there."""
        resources = {"nvidia.com/gpu": str(count)}
        patch = json.dumps({"status": {"capacity": resources, "allocatable": resources}})
        self.kube.run("patch", "node", name, "--subresource=status", "--type=merge", "-p", patch)

    def daemonsets(self) -> list[str]:
        items = self.kube.get("daemonsets", "-n", self.namespace)["items"]
        return sorted(d["metadata"]["name"] for d in items)

    @contextlib.contextmanager
    def recording(self, selector: str) -> Iterator[StateRecorder]:
        recorder = StateRecorder(self.kube, selector)
        # kubectl lists, then watches from that list's revision: wait for the list, or a change
        # made before kubectl got there (a whole upgrade takes 2 s) is never seen.
        names = set(self.states(selector))
        self.kube.wait_for("the node watch to start", lambda: names <= set(recorder._last), 60)
        try:
            yield recorder
        finally:
            recorder.stop()


@pytest.fixture
def operator_nodes(gpu_operator: GpuOperator, nodes: FakeNodes) -> Iterator[FakeNodes]:
    """`nodes`, whose nodes go with the pods bound to them at the end (GpuOperator.remove_nodes)."""
    yield nodes
    gpu_operator.remove_nodes(nodes.created)


@pytest.fixture(scope="module")
def gpu_operator(kube: Kube) -> Iterator[GpuOperator]:
    """The GPU Operator running for this module with its ClusterPolicy applied; stopped and removed
    with everything it made afterwards (scripts/operator down)."""
    operator_script("down", check=False)  # leftovers of an interrupted run
    t0 = time.monotonic()
    operator_script("up")
    operator = GpuOperator(kube, started_seconds=time.monotonic() - t0)
    labels = DriverLabels(kube)
    try:
        operator.apply_policy()
        yield operator
    finally:
        labels.stop()
        operator_script("down", check=False)
