"""`gpudrv apply` on a GPU Operator fleet, against the operator's own upgrade controller (the real
operator, built from the Go module proxy, see tests/e2e/gpu_operator.py): gpudrv gates, stages the
rollout through the operator's skip label and explains stalls; the operator moves every state."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpudrv_command, gpudrv_env
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.gitops import GitLab
from tests.e2e.gpu_operator import (
    REGISTRY,
    SKIP_LABEL,
    VALIDATOR_APP,
    GpuOperator,
    StateRecorder,
    cluster_policy,
)
from tests.e2e.test_gpu_operator import gpu_workload, pdb
from tests.git.conftest import Script

# scripts/operator builds github.com/NVIDIA/gpu-operator@v0.0.0-20250917190837-d73a0086a6ba: the
# commit of tag v25.3.4 (git describe in the operator's repository).
OPERATOR_VERSION = "v25.3.4"
HELD = "gpudrv.dev/held"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
OLD, NEW = "550", "570"
KERNELS = ("5.15.0-119-generic", "6.8.0-45-generic")


def precompiled(version: str, **upgrade: Any) -> dict[str, Any]:
    """The module's ClusterPolicy with precompiled drivers (gpudrv gates those). maxUnavailable 100%:
    the operator counts every cordoned GPU node in the cluster against it, and these tests must not
    depend on what other nodes the cluster has; gpudrv's holds do the staging."""
    upgrade = {"maxUnavailable": "100%", **upgrade}
    document = cluster_policy(version, **upgrade)
    document["spec"]["driver"]["usePrecompiled"] = True
    return document


@dataclass
class GitFleet:
    """A GitOps repository on `main` and `gpudrv apply` run in it against the test's nodes."""

    root: Path
    kube: Kube
    nodes: FakeNodes
    repo: Script = field(init=False, repr=False)  # the repository at root, on main

    def __post_init__(self) -> None:
        self.repo = Script.init(self.root)

    def args(self, *extra: str) -> list[str]:
        return [
            "apply", "--from", "fleet", "--matrix", "matrix/support-matrix.csv", "--merged-ref", "main",
            "--operator-version", OPERATOR_VERSION, "-l", self.nodes.selector, *extra,
        ]  # fmt: skip

    def apply(
        self, *extra: str, timeout: float = 600, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*gpudrv_command(), *self.args(*extra)],
            cwd=self.root,
            env=gpudrv_env({**self.kube.env, **(env or {})}),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*gpudrv_command(), *self.args(*extra)],
            cwd=self.root,
            env=gpudrv_env(self.kube.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


@dataclass
class Fleet(GitFleet):
    """The ClusterPolicy and the support matrix, on `main`."""

    names: list[str]

    def write(self, version: str, rows: list[str], **upgrade: Any) -> None:
        (self.root / "fleet").mkdir(exist_ok=True)
        (self.root / "fleet" / "cluster-policy.yaml").write_text(  # JSON is YAML
            json.dumps(precompiled(version, **upgrade), indent=2) + "\n"
        )
        (self.root / "matrix").mkdir(exist_ok=True)
        lines = ["driver_branch,kernel,os_tag", *rows]
        (self.root / "matrix" / "support-matrix.csv").write_text("\n".join(lines) + "\n")
        self.repo.commit(f"driver {version}")


def rows(version: str) -> list[str]:
    return [f"{version},{kernel},ubuntu22.04" for kernel in KERNELS]


@pytest.fixture
def fleet(gpu_operator: GpuOperator, operator_nodes: FakeNodes, tmp_path: Path, kube: Kube) -> Fleet:
    """The GitOps repository, and no node yet (`start_nodes`)."""
    set_policy(gpu_operator, precompiled(OLD))
    return Fleet(tmp_path, kube, operator_nodes, [])


def start_nodes(fleet: Fleet, operator: GpuOperator, count: int) -> list[str]:
    """`count` operator-managed nodes (kernel pools alternate) on the old precompiled driver."""
    names = [f"op-{fleet.nodes.id[:6]}-{i}" for i in range(count)]
    for index, name in enumerate(names):
        operator.add_nodes(fleet.nodes, name, **{KERNEL: KERNELS[index % 2]})
    for name in names:
        fleet.kube.wait_for(f"{name} on {OLD}", lambda n=name: on_image(operator, n, OLD), 180)
        operator.wait_for_state(name, "upgrade-done")
    fleet.names = names
    return names


def set_policy(operator: GpuOperator, document: dict[str, Any]) -> None:
    """The live ClusterPolicy as an earlier `gpudrv apply` left it: field manager gpudrv, which the
    module's first ClusterPolicy has too (GpuOperator.apply_policy), so gpudrv may change its fields.
    test_operator_pools.py has a resource another manager owns."""
    operator.kube.run(
        "apply", "--server-side", "--field-manager=gpudrv", "--force-conflicts", "-f", "-",
        stdin=json.dumps(document),
    )  # fmt: skip


def on_image(operator: GpuOperator, node: str, version: str) -> bool:
    """A Running, Ready driver pod on the node with the precompiled image of `version`."""
    pod = operator.driver_pod(node)
    if not pod or pod["status"].get("phase") != "Running":
        return False
    images = [c["image"] for c in pod["spec"]["containers"]]
    statuses = pod["status"].get("containerStatuses") or []
    return image_of(operator, node, version) in images and all(s["ready"] for s in statuses)


def image_of(operator: GpuOperator, node: str, version: str) -> str:
    kernel = operator.node(node)["metadata"]["labels"][KERNEL]
    return f"{REGISTRY}/driver:{version}-{kernel}-ubuntu22.04"


def leftovers(operator: GpuOperator, names: list[str]) -> list[str]:
    found = []
    for name in names:
        node = operator.node(name)
        labels = node["metadata"].get("labels") or {}
        if labels.get(SKIP_LABEL) or HELD in (node["metadata"].get("annotations") or {}):
            found.append(f"{name} held")
        if node["spec"].get("unschedulable"):
            found.append(f"{name} cordoned")
    return found


def test_canary_then_batches_to_upgrade_done(fleet: Fleet, gpu_operator: GpuOperator) -> None:
    start_nodes(fleet, gpu_operator, 3)
    fleet.write(NEW, rows(OLD) + rows(NEW))
    with gpu_operator.recording(fleet.nodes.selector) as recorder:
        began = time.monotonic()
        result = fleet.apply("--canary", "1", "--batch", "1")
        took = time.monotonic() - began
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    canary, *rest = fleet.names
    assert f"held 2 node(s) with {SKIP_LABEL}=true until the canary is done: {', '.join(rest)}" in out
    assert "applied ClusterPolicy/" in out
    assert f"released 1 node(s) to the operator: {rest[0]}" in out
    assert f"released 1 node(s) to the operator: {rest[1]}" in out
    assert out.rstrip().endswith("audit: OK"), out
    for name in fleet.names:
        assert gpu_operator.state(name) == "upgrade-done"
        assert on_image(gpu_operator, name, NEW), name
    assert leftovers(gpu_operator, fleet.names) == []
    # The operator took the held nodes only after the canary was done, one batch at a time.
    started = {name: first(recorder, name, "cordon-required") for name in fleet.names}
    done = {name: first(recorder, name, "upgrade-done", after=started[name]) for name in fleet.names}
    assert done[canary] < started[rest[0]] and done[rest[0]] < started[rest[1]], recorder.transitions
    print(f"\n{took:.1f}s for 3 nodes, canary 1, batch 1:\n{out}")


def test_a_missing_image_is_refused_with_nothing_changed(fleet: Fleet, gpu_operator: GpuOperator) -> None:
    start_nodes(fleet, gpu_operator, 2)
    fleet.write(NEW, rows(OLD) + rows(NEW)[:1])  # no row for the second kernel
    result = fleet.apply()
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        f"image gate: {NEW}-{KERNELS[1]}-ubuntu22.04 is not in matrix/support-matrix.csv on main"
        in result.stdout
    )
    assert result.stdout.rstrip().endswith("nothing was changed")
    assert gpu_operator.get_policy()["spec"]["driver"]["version"] == OLD
    assert leftovers(gpu_operator, fleet.names) == []


def first(recorder: StateRecorder, node: str, state: str, after: float = 0.0) -> float:
    """When the node watch first showed the node at `state` (after `after`)."""
    return next(t.at for t in recorder.transitions if t.node == node and t.state == state and t.at >= after)


def gpu_job(operator: GpuOperator, namespace: str, node: str, name: str) -> None:
    """A one-pod GPU Deployment on `node` and a PDB (minAvailable 1) over it: no disruption allowed."""
    operator.advertise_gpus(node, 8)
    operator.kube.apply(json.dumps(gpu_workload(name, namespace, node)))
    operator.kube.apply(json.dumps(pdb(name, namespace)))
    operator.kube.wait_for(
        f"{name} to allow no disruption", lambda: allowed(operator, namespace, name) == 0, 120
    )


def allowed(operator: GpuOperator, namespace: str, name: str) -> int | None:
    status = operator.kube.get("pdb", name, "-n", namespace).get("status") or {}
    if status.get("expectedPods") != 1:
        return None
    value: int = status.get("disruptionsAllowed", 0)
    return value


UNVERIFIED = "--allow-unverified-images"


def test_a_budget_refusal_is_named_before_any_node_is_touched(
    fleet: Fleet, gpu_operator: GpuOperator, namespace: str
) -> None:
    canary, _ = start_nodes(fleet, gpu_operator, 2)
    gpu_job(gpu_operator, namespace, canary, "train")
    fleet.write(NEW, rows(OLD) + rows(NEW))
    # The GPU pod's image is fictitious (no registry answers for it): the CUDA gate would refuse the
    # change first (it fails closed); this test is about the budget, so it lets the image through.
    result = fleet.apply(UNVERIFIED)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        f"budget: PDB {namespace}/train allows 0 disruption(s) and the batch needs 1 ({namespace}/train-"
    ) in result.stdout
    assert "minAvailable 1, currentHealthy 1, desiredHealthy 1, disruptionsAllowed 0" in result.stdout
    assert result.stdout.rstrip().endswith("the canary's drain would be refused: nothing was changed")
    assert gpu_operator.get_policy()["spec"]["driver"]["version"] == OLD
    assert leftovers(gpu_operator, fleet.names) == []


def test_a_budget_that_starts_refusing_mid_rollout_is_explained(
    fleet: Fleet, gpu_operator: GpuOperator, namespace: str
) -> None:
    """The budget allows the eviction when gpudrv checks, then refuses it (a second replica went away,
    say): the operator's pod deletion is refused until its timeout, the node fails, and gpudrv says
    which budget, keeps the other node held, and exits 1."""
    canary, held = start_nodes(fleet, gpu_operator, 2)
    gpu_operator.advertise_gpus(canary, 8)
    gpu_operator.kube.apply(json.dumps(gpu_workload("train", namespace, canary)))
    fleet.kube.wait_for("train Running", lambda: running(gpu_operator, namespace, "train"), 120)
    fleet.write(NEW, rows(OLD) + rows(NEW), podDeletion={"timeoutSeconds": 30})
    process = fleet.start("--timeout", "5m", UNVERIFIED)  # the budget, not the CUDA gate, is tested
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("applied ClusterPolicy/"):
            gpu_operator.kube.apply(json.dumps(pdb("train", namespace)))  # now it refuses
    assert process.wait(timeout=60) == 1, "".join(lines)
    out = "".join(lines)
    assert f"{canary}: upgrade-required -> cordon-required" in out
    assert f"GPU pod deletion refused: PDB {namespace}/train allows 0 disruption(s)" in out
    assert "upgrade failed: Failed to delete workload pods on the node for the driver upgrade" in out
    assert f"upgrade failed on {canary}; 1 node(s) stay held by gpudrv" in out
    assert gpu_operator.state(held) == "upgrade-required"
    assert gpu_operator.node(held)["metadata"]["labels"][SKIP_LABEL] == "true"
    released = fleet.apply("--release")
    assert released.returncode == 0 and f"{held}: released" in released.stdout, released.stdout
    assert leftovers(gpu_operator, [held]) == []
    print("\n" + out)


def running(operator: GpuOperator, namespace: str, app: str) -> bool:
    pods = operator.kube.get("pods", "-n", namespace, "-l", f"app={app}")["items"]
    return len(pods) == 1 and pods[0]["status"].get("phase") == "Running"


def test_a_validator_that_never_gets_ready_is_named_and_a_rerun_finishes(
    fleet: Fleet, gpu_operator: GpuOperator
) -> None:
    canary, _ = start_nodes(fleet, gpu_operator, 2)
    (validator,) = gpu_operator.pods(VALIDATOR_APP, canary)
    gpu_operator.set_pod_ready(validator, False)
    fleet.write(NEW, rows(OLD) + rows(NEW))
    result = fleet.apply("--timeout", "150s")  # the operator may requeue after 2m
    assert result.returncode == 1, result.stdout + result.stderr
    name = validator["metadata"]["name"]
    assert f"validator pod {gpu_operator.namespace}/{name} is not Ready" in result.stdout
    assert f"timed out after 150s waiting for {canary}; gpudrv's holds stay" in result.stdout
    (validator,) = gpu_operator.pods(VALIDATOR_APP, canary)
    gpu_operator.set_pod_ready(validator, True)
    again = fleet.apply()
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.rstrip().endswith("audit: OK")
    assert leftovers(gpu_operator, fleet.names) == []


def test_killed_mid_rollout_a_rerun_completes_with_nothing_left_held(
    fleet: Fleet, gpu_operator: GpuOperator
) -> None:
    canary, *rest = start_nodes(fleet, gpu_operator, 3)
    fleet.write(NEW, rows(OLD) + rows(NEW))
    process = fleet.start("--batch", "1")
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith(f"{canary}: cordon-required"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=30)
    assert gpu_operator.node(rest[0])["metadata"]["labels"].get(SKIP_LABEL) == "true", "".join(seen)
    again = fleet.apply("--batch", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"released 1 node(s) to the operator: {rest[0]}" in again.stdout
    assert again.stdout.rstrip().endswith("audit: OK")
    for name in fleet.names:
        assert on_image(gpu_operator, name, NEW) and gpu_operator.state(name) == "upgrade-done"
    assert leftovers(gpu_operator, fleet.names) == []


def test_lab_mode_refuses_to_run_beside_the_operator(
    gpu_operator: GpuOperator, kube: Kube, tmp_path: Path
) -> None:
    """The lab's label-driven apply on a cluster where the real operator runs: exit 2, one line,
    before it writes anything."""
    lab = GitLab.create(kube, tmp_path)
    result = lab.gpudrv("apply", "--from", "clusters/lab")
    assert (result.returncode, result.stdout) == (2, ""), result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"gpudrv: lab mode refused: ClusterPolicy {gpu_operator.policy} in the cluster at "
    )
    assert "two controllers must never drive one label" in line
