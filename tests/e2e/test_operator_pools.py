"""`gpudrv apply` on an NVIDIADriver fleet, against the real GPU Operator (tests/e2e/gpu_operator.py):
two pools, one NVIDIADriver each; one pool moves to a new driver, the other keeps its own. A node a
person holds with the skip label is named and left alone; a second apply writes nothing; a resource
another field manager owns is refused, and a rollout staged around that manager's sync
(`--hold`, then `--await-sync`) goes through with gpudrv never writing the resource."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.gpu_operator import REGISTRY, SKIP_LABEL, GpuOperator
from tests.e2e.test_operator_rollout import (
    HELD,
    KERNEL,
    KERNELS,
    NEW,
    OLD,
    GitFleet,
    leftovers,
    precompiled,
    set_policy,
)

POOL = "e2e.gpudrv.dev/pool"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def nvidia_driver(name: str, version: str, pool: str) -> dict[str, Any]:
    """A precompiled NVIDIADriver for the nodes labelled POOL=pool (the CRD's image default is
    nvcr.io; these name a registry that does not exist: kwok never pulls)."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": {
            "driverType": "gpu",
            "usePrecompiled": True,
            "repository": REGISTRY,
            "image": "driver",
            "version": version,
            "manager": {"repository": REGISTRY, "image": "k8s-driver-manager", "version": "v0.8.1"},
            "nodeSelector": {POOL: pool},
        },
    }


def crd_policy() -> dict[str, Any]:
    """The ClusterPolicy of an NVIDIADriver fleet: the drivers come from the NVIDIADrivers, the
    upgrade policy from here."""
    document = precompiled(OLD)
    document["spec"]["driver"]["useNvidiaDriverCRD"] = True
    return document


@dataclass
class PoolFleet(GitFleet):
    """A GitOps repository with the ClusterPolicy and two NVIDIADrivers (pools a and b)."""

    operator: GpuOperator
    pools: dict[str, list[str]] = field(default_factory=dict)

    def name(self, pool: str) -> str:
        return f"pool-{pool}-{self.nodes.id[:6]}"

    def pool_value(self, pool: str) -> str:
        return f"{pool}-{self.nodes.id}"

    def documents(self, versions: dict[str, str]) -> list[dict[str, Any]]:
        return [
            crd_policy(),
            *(
                nvidia_driver(self.name(pool), version, self.pool_value(pool))
                for pool, version in versions.items()
            ),
        ]

    def write(self, versions: dict[str, str]) -> None:
        """git: the resources at `versions`, and matrix rows for every branch and kernel in use."""
        (self.root / "fleet").mkdir(exist_ok=True)
        text = "\n---\n".join(json.dumps(doc, indent=2) for doc in self.documents(versions))
        (self.root / "fleet" / "driver.yaml").write_text(text + "\n")
        (self.root / "matrix").mkdir(exist_ok=True)
        rows = [f"{v},{k},ubuntu22.04" for v in sorted({OLD, *versions.values()}) for k in KERNELS]
        (self.root / "matrix" / "support-matrix.csv").write_text(
            "\n".join(["driver_branch,kernel,os_tag", *rows]) + "\n"
        )
        self.repo.commit(f"drivers {versions}")

    def set_live(self, pool: str, version: str, manager: str) -> None:
        """The live NVIDIADriver of `pool`, written by `manager` (server-side apply)."""
        document = nvidia_driver(self.name(pool), version, self.pool_value(pool))
        self.kube.run(
            "apply", "--server-side", f"--field-manager={manager}", "-f", "-", stdin=json.dumps(document)
        )

    def add(self, pool: str, count: int, kernel_offset: int = 0) -> list[str]:
        names = [f"{pool}{len(self.pools.get(pool, [])) + i}-{self.nodes.id[:6]}" for i in range(count)]
        for index, name in enumerate(names):
            kernel = KERNELS[(index + kernel_offset) % 2]
            self.operator.add_nodes(self.nodes, name, **{KERNEL: kernel, POOL: self.pool_value(pool)})
        self.pools.setdefault(pool, []).extend(names)
        return names

    def image(self, node: str, version: str) -> str:
        kernel = self.operator.node(node)["metadata"]["labels"][KERNEL]
        return f"{REGISTRY}/driver:{version}-{kernel}-ubuntu22.04"

    def on(self, node: str, version: str) -> bool:
        pod = self.operator.driver_pod(node)
        if not pod or pod["status"].get("phase") != "Running":
            return False
        statuses = pod["status"].get("containerStatuses") or []
        images = [c["image"] for c in pod["spec"]["containers"]]
        return self.image(node, version) in images and bool(statuses) and all(s["ready"] for s in statuses)

    def settle(self, version_of: dict[str, str]) -> None:
        """Every node on its pool's version and upgrade-done."""
        for pool, names in self.pools.items():
            for name in names:
                self.kube.wait_for(
                    f"{name} on {version_of[pool]}", lambda n=name, p=pool: self.on(n, version_of[p]), 240
                )
                self.operator.wait_for_state(name, "upgrade-done")

    def managers(self, pool: str) -> set[str]:
        """The live NVIDIADriver's field managers (`kubectl get` leaves managedFields out unless asked)."""
        live = self.kube.get("nvidiadriver", self.name(pool), "--show-managed-fields")
        return {entry["manager"] for entry in live["metadata"].get("managedFields") or []}


@pytest.fixture(scope="module")
def crd_mode(gpu_operator: GpuOperator) -> GpuOperator:
    """The module's operator switched to NVIDIADrivers (useNvidiaDriverCRD: true)."""
    set_policy(gpu_operator, crd_policy())
    return gpu_operator


@pytest.fixture
def pools(crd_mode: GpuOperator, operator_nodes: FakeNodes, tmp_path: Path, kube: Kube) -> Any:
    repo = PoolFleet(tmp_path, kube, operator_nodes, crd_mode)
    yield repo
    for pool in ("a", "b"):
        kube.run("delete", "nvidiadriver", repo.name(pool), "--ignore-not-found", "--wait=false", check=False)


def writes(requests: list[Any]) -> list[str]:
    return [str(r) for r in requests if r.verb in WRITES]


def test_one_pool_moves_the_other_keeps_its_driver_and_a_user_hold_is_named(pools: PoolFleet) -> None:
    for pool in ("a", "b"):
        pools.set_live(pool, OLD, "gpudrv")  # an earlier gpudrv apply
    moving = pools.add("a", 3)
    kept = pools.add("b", 2)
    pools.settle({"a": OLD, "b": OLD})
    mine = moving[2]
    pools.operator.label(mine, SKIP_LABEL, "true")  # a person holds it
    pools.write({"a": NEW, "b": OLD})
    began = time.monotonic()
    result = pools.apply("--canary", "1", "--batch", "1")
    took = time.monotonic() - began
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    skipped = f"{mine}: SKIPPED ({SKIP_LABEL}=true, not set by gpudrv)"
    assert out.count(skipped) == 1, out
    assert out.count(mine) == 1, out  # named once, nothing else said of it
    assert f"held 1 node(s) with {SKIP_LABEL}=true until the canary is done: {moving[1]}" in out
    assert f"applied NVIDIADriver/{pools.name('a')} (spec.version '550' -> '570';" in out
    assert f"NVIDIADriver/{pools.name('b')}: as declared, nothing to apply" in out
    assert "ClusterPolicy/gpu-cluster-policy: as declared, nothing to apply" in out
    for name in kept:
        assert name not in out, out  # the pool that keeps its driver is not part of the rollout
    assert out.rstrip().endswith("audit: OK"), out
    for name in moving[:2]:
        assert pools.on(name, NEW) and pools.operator.state(name) == "upgrade-done", name
    for name in kept:
        assert pools.on(name, OLD) and pools.operator.state(name) == "upgrade-done", name
    assert pools.on(mine, OLD), "the held node kept its driver"
    assert pools.operator.node(mine)["metadata"]["labels"][SKIP_LABEL] == "true"
    assert leftovers(pools.operator, [*moving[:2], *kept]) == []
    # --release frees gpudrv's holds only: the person's stays.
    released = pools.apply("--release")
    assert released.returncode == 0 and "released 0 node(s)" in released.stdout, released.stdout
    assert pools.operator.node(mine)["metadata"]["labels"][SKIP_LABEL] == "true"
    assert HELD not in (pools.operator.node(mine)["metadata"].get("annotations") or {})
    # A second apply: not one write at the API server; in JSON, one object naming the person's hold.
    second: list[subprocess.CompletedProcess[str]] = []
    requests = pools.kube.requests_of(lambda: second.append(pools.apply("-o", "json")))
    assert second[0].returncode == 0, second[0].stdout + second[0].stderr
    assert writes(requests) == [], writes(requests)
    report = json.loads(second[0].stdout)
    assert (report["kind"], report["mode"], report["ok"]) == ("apply", "NVIDIADriver", True), report
    assert (report["audited"], report["findings"]) == (True, [])
    by_node = {row["node"]: (row["outcome"], row["detail"]) for row in report["nodes"]}
    why = f"{SKIP_LABEL}=true, not set by gpudrv"
    assert by_node == {mine: ("skipped", why)}, report  # nothing else moves; the kept pool is not named
    assert second[0].stderr.count(skipped) == 1  # the progress lines went to stderr
    # In GitHub Actions: the same lines, and the step summary names the hold.
    summary = pools.root / "summary.md"
    third = pools.apply("-o", "github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert third.returncode == 0 and third.stdout.count(skipped) == 1, third.stdout + third.stderr
    assert f"| `{mine}` | skipped | {why} |" in summary.read_text()
    print(f"\n{took:.1f}s, pool a 2 nodes moving (+1 held by a person), pool b 2 nodes kept:\n{out}")
    print(f"second apply: {len(requests)} requests, 0 writes")


def test_a_resource_another_manager_owns_is_refused_then_staged_around_its_sync(pools: PoolFleet) -> None:
    pools.set_live("a", OLD, "helm")
    pools.set_live("b", OLD, "helm")
    moving = pools.add("a", 3)
    pools.settle({"a": OLD})
    pools.write({"a": NEW, "b": OLD})
    refused = pools.apply()
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stdout + refused.stderr
    (line,) = refused.stderr.splitlines()
    ref = f"NVIDIADriver/{pools.name('a')}"
    assert line.startswith(
        f"gpudrv: {ref}: spec.version is '550' in the cluster and '570' in fleet/driver.yaml:"
    )
    assert "field manager 'helm' owns it" in line and "--hold" in line and "--await-sync" in line, line
    assert pools.kube.get("nvidiadriver", pools.name("a"))["spec"]["version"] == OLD
    assert leftovers(pools.operator, moving) == []
    # Staged around the engine's sync: hold (a PreSync hook), the engine applies, then --await-sync.
    held = pools.apply("--hold")
    assert held.returncode == 0, held.stdout + held.stderr
    assert (
        f"held 2 node(s) with {SKIP_LABEL}=true until the canary is done: {moving[1]}, {moving[2]}"
        in held.stdout
    )
    assert pools.kube.get("nvidiadriver", pools.name("a"))["spec"]["version"] == OLD
    waiting = pools.start("--await-sync", "--batch", "1")
    assert waiting.stdout is not None
    lines = [waiting.stdout.readline()]
    while "waiting for the GitOps engine" not in lines[-1]:
        lines.append(waiting.stdout.readline())
        assert lines[-1], "".join(lines)
    assert "(owned by 'helm')" in lines[-1] and "spec.version '550' -> '570'" in lines[-1], lines[-1]
    pools.set_live("a", NEW, "helm")  # the engine syncs
    rest, _ = waiting.communicate(timeout=600)
    out = "".join(lines) + rest
    assert waiting.returncode == 0, out
    assert "the driver resources in the cluster are as declared" in out
    assert f"released 1 node(s) to the operator: {moving[1]}" in out
    assert f"{moving[0]}: cordon-required -> wait-for-jobs-required" in out  # the watch saw the canary
    assert out.rstrip().endswith("audit: OK"), out
    for name in moving:
        assert pools.on(name, NEW) and pools.operator.state(name) == "upgrade-done", name
    assert leftovers(pools.operator, moving) == []
    managers = pools.managers("a")
    assert "helm" in managers and "gpudrv" not in managers, (
        f"gpudrv never wrote the engine's resource: {managers}"
    )
    print("\n" + held.stdout + out)
