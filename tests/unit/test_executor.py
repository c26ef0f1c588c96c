"""The upgrade executor (core/lab/executor.py) on an in-memory fleet: every transition and every failure.

The fleet is plain Python implementing core.executor.UpgradeFleet: nodes as dicts with a
resourceVersion, pods per node, a log of every write. No kubernetes client, no mocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import pytest

from reconciler.core.images import tags
from reconciler.core.images.tags import Node
from reconciler.core.lab import executor
from reconciler.core.lab.executor import (
    DRIVER_APP,
    Installer,
    Lease,
    Options,
    StepFailed,
)
from reconciler.core.lab.fleet_upgrade import FleetUpgrade, Outcome, Round
from reconciler.core.lab.node_run import NodeRun
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.budget import Budget, Pod, Role, Selector
from reconciler.core.upgrades.upgrade import (
    FAILURE,
    INITIAL_UNSCHEDULABLE,
    LEGACY_INITIAL_UNSCHEDULABLE,
    OWNER,
    SKIP_LABEL,
    Driver,
    Images,
    LiveNode,
    RunResult,
    State,
)

BASE = {
    tags.GPU_PRESENT: "true",
    tags.KERNEL: "5.15.0-107-generic",
    tags.OS_ID: "ubuntu",
    tags.OS_VERSION_ID: "22.04",
}
OLD = Driver("535", "183", "06")
NEW = Driver("550", "90", "07")
TARGET = "550-5.15.0-107-generic-ubuntu22.04"
IMAGES = Images(ref="origin/main", path="matrix/support-matrix.csv", merged=frozenset({TARGET}))
ME = "here/100/aaaa"
STATES = [str(s) for s in upgrade.ORDER]


class Killed(Exception):
    """The process died: nothing after this write happens."""


@dataclass
class MemNode:
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    version: int = 1


@dataclass
class MemoryFleet:
    """A cluster in memory: what the executor reads and writes, and a log of every write."""

    nodes: dict[str, MemNode] = field(default_factory=dict)
    pods: dict[str, list[Pod]] = field(default_factory=dict)
    writes: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    events: list[tuple[str, str, bool]] = field(default_factory=list)
    drain_refusal: str | None = None  # the drain's StepFailed reason, when it cannot finish
    evicted: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    kill_at: int | None = None  # the write (1-based) during which the process dies
    racing_writers: int = 0  # writes by someone else slipped in before the next compare-and-swaps

    def add(self, name: str, driver: Driver = OLD, **extra: str) -> MemNode:
        node = MemNode({**BASE, **driver.labels(), **extra})
        self.nodes[name] = node
        return node

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        found = self.nodes.get(name)
        if found is None:
            return None
        live = LiveNode(Node(name, dict(found.labels)), found.unschedulable, dict(found.annotations))
        return live, str(found.version)

    def pods_on(self, node: str) -> list[Pod]:
        return list(self.pods.get(node, []))

    def patch_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        resource_version: str | None = None,
        expect: Callable[[LiveNode], None] | None = None,
    ) -> None:
        found = self.node(name)
        assert found is not None
        if expect is not None:
            expect(found[0])
        self._write(name, labels or {}, annotations or {}, unschedulable)

    def swap_node(self, name: str, resource_version: str, annotations: Mapping[str, str | None]) -> bool:
        if self.racing_writers:
            self.racing_writers -= 1
            self.nodes[name].version += 1  # a label written by someone else, just before
            return False
        if str(self.nodes[name].version) != resource_version:
            return False
        self._write(name, {}, annotations, None)
        return True

    def _write(
        self,
        name: str,
        labels: Mapping[str, str | None],
        annotations: Mapping[str, str | None],
        unschedulable: bool | None,
    ) -> None:
        if self.kill_at is not None and len(self.writes) + 1 == self.kill_at:
            raise Killed  # the process died before this write reached the server
        node = self.nodes[name]
        for target, changes in ((node.labels, labels), (node.annotations, annotations)):
            for key, value in changes.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        if unschedulable is not None:
            node.unschedulable = unschedulable
        node.version += 1
        self.writes.append(
            (name, {"labels": dict(labels), "annotations": dict(annotations), "unschedulable": unschedulable})
        )

    def drain(
        self,
        node: str,
        roles: Collection[Role],
        *,
        timeout: float,
        force: bool,
        say: Callable[[str], None],
        wait: Callable[[str], None],
    ) -> None:
        wait("evicting")
        if self.drain_refusal is not None:
            raise StepFailed(self.drain_refusal)
        leaving = [p for p in self.pods.get(node, []) if budget.role(p) in roles]
        self.evicted.extend(p.ref for p in leaving)
        self.pods[node] = [p for p in self.pods.get(node, []) if p not in leaving]

    def restart_driver(self, node: str) -> list[str]:
        old = [p for p in self.pods.get(node, []) if p.labels.get("app") == DRIVER_APP]
        self.restarted.extend(p.ref for p in old)
        self.pods[node] = [p for p in self.pods.get(node, []) if p not in old]
        return [p.ref for p in old]

    def event(
        self, node: str, reason: str, message: str, warning: bool = False, name: str | None = None
    ) -> None:
        self.events.append((node, reason, warning))

    # --- what the tests look at -----------------------------------------------------------------

    def states_written(self, name: str | None = None) -> list[str]:
        return [
            str(w["labels"][tags.UPGRADE_STATE])  # type: ignore[index]
            for node, w in self.writes
            if (name is None or node == name) and tags.UPGRADE_STATE in w["labels"]  # type: ignore[operator]
        ]


@dataclass
class FakeHost:
    """Time that moves only when the executor waits; `on_sleep` lets the world change meanwhile."""

    wall: float = 1_000_000.0
    clock: float = 0.0
    alive_holders: dict[str, bool] = field(default_factory=dict)  # same-host holders and whether they run
    on_sleep: Callable[[], None] | None = None

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.wall += seconds
        self.clock += seconds
        if self.on_sleep is not None:
            self.on_sleep()

    def alive(self, holder: str) -> bool | None:
        return self.alive_holders.get(holder)


@dataclass
class Lines:
    node: str
    out: list[str]

    def say(self, text: str) -> None:
        self.out.append(f"{self.node}: {text}")

    def wait(self, text: str) -> None:
        self.out.append(f"{self.node}: ~{text}")


def desired(name: str, driver: Driver = NEW) -> Node:
    return Node(name, {**BASE, **driver.labels()})


@dataclass
class World:
    fleet: MemoryFleet = field(default_factory=MemoryFleet)
    host: FakeHost = field(default_factory=FakeHost)
    budgets: list[Budget] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    wanted: dict[str, Driver] = field(default_factory=dict)

    def read(self) -> Round:
        plans = []
        for name, driver in sorted(self.wanted.items()):
            found = self.fleet.node(name)
            plan = upgrade.plan_node(
                desired(name, driver), found[0] if found else None, IMAGES,
                self.fleet.pods_on(name), self.budgets,
            )  # fmt: skip
            if plan is not None:
                plans.append(plan)
        return Round(plans, {n: self.fleet.pods_on(n) for n in self.wanted}, self.budgets)

    def rollout(self, **options: object) -> Outcome:
        owners = iter(f"here/100/{i:04x}" for i in range(1000))
        return FleetUpgrade(
            self.fleet, self.host, IMAGES, Options(**options),  # type: ignore[arg-type]
            self.read, owner=lambda: next(owners),
            reporter=lambda node: Lines(node, self.out), say=self.out.append,
        ).run()  # fmt: skip

    def plan(self, name: str) -> upgrade.NodePlan:
        found = self.read().plans
        return next(p for p in found if p.node == name)

    def node_run(self, name: str, owner: str = ME, **options: object) -> NodeRun:
        return NodeRun(
            self.fleet, self.host, self.plan(name), IMAGES, Options(**options),  # type: ignore[arg-type]
            owner=owner, report=Lines(name, self.out),
        )  # fmt: skip


def world(*names: str, driver: Driver = OLD) -> World:
    made = World()
    for name in names:
        made.fleet.add(name, driver)
        made.wanted[name] = NEW
    return made


def trainer(name: str, node: str = "", gpu: bool = False, **labels: str) -> Pod:
    return Pod("ml", name, {"app": "trainer", **labels}, owner_kind="ReplicaSet", gpu=gpu)


def pdb(allowed: int) -> Budget:
    return Budget(
        "ml", "trainer-pdb", Selector({"app": "trainer"}), min_available=2, current_healthy=2,
        desired_healthy=2 - allowed, disruptions_allowed=allowed,
    )  # fmt: skip


# --- a whole upgrade -------------------------------------------------------------------------------


def test_a_fresh_node_goes_through_every_state_once_and_ends_with_nothing_left_behind() -> None:
    w = world("n1")
    w.fleet.pods["n1"] = [trainer("gpu-1", gpu=True), trainer("web-1")]
    outcome = w.rollout()
    assert outcome.done == ["n1"] and outcome.ok
    assert w.fleet.states_written("n1") == STATES
    node = w.fleet.nodes["n1"]
    assert node.labels[tags.UPGRADE_STATE] == "upgrade-done"
    assert upgrade.driver(node.labels) == NEW
    assert not node.unschedulable
    assert node.annotations == {}  # no lease, no initial-state, no failure
    assert w.fleet.evicted == ["ml/gpu-1", "ml/web-1"]  # GPU pods first, at pod-deletion-required
    assert ("n1", "DriverUpgradeDone", False) in w.fleet.events


def test_each_steps_change_is_written_with_the_next_states_label() -> None:
    w = world("n1")
    w.rollout()
    by_state = {str(wr["labels"].get(tags.UPGRADE_STATE)): wr for _, wr in w.fleet.writes}  # type: ignore[attr-defined]
    assert by_state["wait-for-jobs-required"]["unschedulable"] is True  # the cordon
    assert by_state["validation-required"]["labels"] == {  # the driver labels
        **NEW.labels(),
        tags.UPGRADE_STATE: "validation-required",
    }
    assert by_state["upgrade-done"]["unschedulable"] is False  # the uncordon
    assert by_state["upgrade-done"]["annotations"][OWNER] is None  # type: ignore[index]


def test_wait_for_jobs_required_moves_straight_on_without_a_selector() -> None:
    w = world("n1")
    w.rollout()
    states = w.fleet.states_written("n1")
    assert states.index("wait-for-jobs-required") == states.index("cordon-required") + 1
    assert states.index("pod-deletion-required") == states.index("wait-for-jobs-required") + 1


def test_a_node_cordoned_before_keeps_its_cordon_skips_uncordon_and_loses_the_annotation() -> None:
    w = world("n1")
    w.fleet.nodes["n1"].unschedulable = True
    outcome = w.rollout()
    assert outcome.done == ["n1"]
    assert "uncordon-required" not in w.fleet.states_written("n1")
    first = w.fleet.writes[1][1]  # after the lease: upgrade-required, with the initial-state annotation
    assert first["labels"] == {tags.UPGRADE_STATE: "upgrade-required"}
    assert first["annotations"][INITIAL_UNSCHEDULABLE] == "true"  # type: ignore[index]
    node = w.fleet.nodes["n1"]
    assert node.unschedulable and node.annotations == {}
    assert "n1: left cordoned, as it was before the upgrade" in w.out


def test_a_schedulable_node_never_gets_the_initial_state_annotation() -> None:
    w = world("n1")
    w.rollout()
    for _, write in w.fleet.writes:
        assert write["annotations"].get(INITIAL_UNSCHEDULABLE) is None  # type: ignore[attr-defined]


def test_an_older_gpudrvs_annotation_is_read_once_then_removed() -> None:
    w = world("n1")
    node = w.fleet.nodes["n1"]
    node.labels[tags.UPGRADE_STATE] = "drain-required"
    node.unschedulable = True
    node.annotations[LEGACY_INITIAL_UNSCHEDULABLE] = "false"
    assert w.rollout().done == ["n1"]
    assert w.fleet.states_written("n1") == STATES[STATES.index("drain-required") :]
    assert not node.unschedulable and node.annotations == {}


def test_an_older_gpudrvs_cordoned_before_node_at_uncordon_required_stays_cordoned() -> None:
    w = world("n1", driver=NEW)
    node = w.fleet.nodes["n1"]
    node.labels[tags.UPGRADE_STATE] = "uncordon-required"
    node.unschedulable = True
    node.annotations[LEGACY_INITIAL_UNSCHEDULABLE] = "true"
    assert w.rollout().done == ["n1"]
    assert node.unschedulable and node.annotations == {}


# --- killed at any moment ------------------------------------------------------------------------------


def run_killed_then_rerun(kill_at: int) -> World:
    w = world("n1")
    w.fleet.kill_at = kill_at
    with pytest.raises(Killed):
        w.rollout()
    w.fleet.kill_at = None
    w.host.alive_holders = {f"here/100/{i:04x}": False for i in range(10)}  # that process is gone
    outcome = w.rollout()
    assert outcome.done == ["n1"], w.out
    return w


@pytest.mark.parametrize("kill_at", range(1, 11))  # the take, then 9 states
def test_killed_at_any_write_a_rerun_resumes_from_the_label_and_writes_no_state_twice(kill_at: int) -> None:
    w = run_killed_then_rerun(kill_at)
    written = w.fleet.states_written("n1")
    # The rerun enters the state on the label again (its lease with it), then goes on: no state is
    # written out of order, and no step's own change twice.
    collapsed = [s for i, s in enumerate(written) if i == 0 or written[i - 1] != s]
    assert collapsed == STATES
    assert len(written) - len(collapsed) <= 1
    cordons = [wr for _, wr in w.fleet.writes if wr["unschedulable"] is True]
    assert len(cordons) == 1
    node = w.fleet.nodes["n1"]
    assert not node.unschedulable and node.annotations == {}
    assert node.labels[tags.UPGRADE_STATE] == "upgrade-done"


@pytest.mark.parametrize("state", STATES[1:-1])
def test_a_rerun_resumes_at_the_recorded_state(state: str) -> None:
    w = world("n1")
    node = w.fleet.nodes["n1"]
    node.labels[tags.UPGRADE_STATE] = state
    if STATES.index(state) > STATES.index("cordon-required"):
        node.unschedulable = True
    if STATES.index(state) > STATES.index("pod-restart-required"):
        node.labels.update(NEW.labels())
    assert w.rollout().done == ["n1"]
    assert w.fleet.states_written("n1") == STATES[STATES.index(state) :]
    assert not node.unschedulable


# --- budgets and gates ---------------------------------------------------------------------------------


def test_a_budget_refusal_before_the_cordon_leaves_the_node_schedulable_and_untouched() -> None:
    w = world("n1")
    w.fleet.pods["n1"] = [trainer("t-1")]
    w.budgets = [pdb(0)]
    outcome = w.rollout()
    assert "n1" in outcome.blocked and "PDB ml/trainer-pdb allows 0 disruptions" in outcome.blocked["n1"]
    assert w.fleet.writes == []
    assert not w.fleet.nodes["n1"].unschedulable
    assert any(line.startswith("n1: blocked, not cordoned: PDB ml/trainer-pdb") for line in w.out)


def test_max_parallel_never_needs_more_than_the_budget_allows() -> None:
    w = world("a", "b")
    w.fleet.pods = {"a": [trainer("t-a")], "b": [trainer("t-b")]}
    w.budgets = [pdb(1)]
    w.host.clock = -10_000  # past any recovery wait
    outcome = w.rollout(max_parallel=2, drain_timeout=0.0)
    # One at a time: the budget allowed one eviction, and the second run read it again afterwards.
    assert outcome.done == ["a", "b"]
    first_done = w.fleet.states_written().index("upgrade-done")
    assert w.fleet.states_written()[first_done + 1] == "upgrade-required"


def test_a_missing_image_blocks_before_anything_is_written() -> None:
    w = world("n1")
    w.fleet.nodes["n1"].labels[tags.KERNEL] = "6.1.0-unknown"
    outcome = w.rollout()
    assert "is not in matrix/support-matrix.csv on origin/main" in outcome.blocked["n1"]
    assert w.fleet.writes == []


# --- the operator's conventions ------------------------------------------------------------------------


def test_the_skip_label_leaves_a_node_alone_and_reports_it() -> None:
    w = world("n1", "n2")
    w.fleet.nodes["n1"].labels[SKIP_LABEL] = "true"
    outcome = w.rollout()
    assert outcome.skipped == ["n1"] and outcome.done == ["n2"] and outcome.ok
    assert w.fleet.states_written("n1") == [] and not [n for n, _ in w.fleet.writes if n == "n1"]
    assert "n1: nvidia.com/gpu-driver-upgrade.skip=true: skipped, left alone" in w.out
    alone = world("n1")
    alone.fleet.nodes["n1"].labels[SKIP_LABEL] = "true"
    assert alone.rollout().skipped == ["n1"]  # reported once
    assert alone.out == ["n1: nvidia.com/gpu-driver-upgrade.skip=true: skipped, left alone"]


@pytest.mark.parametrize(
    "state", ["node-maintenance-required", "post-maintenance-required", "reboot-required"]
)
def test_a_state_lab_mode_does_not_drive_is_reported_and_left_cordoned(state: str) -> None:
    w = world("n1", driver=NEW)  # its driver already matches: still not "nothing to do"
    node = w.fleet.nodes["n1"]
    node.labels[tags.UPGRADE_STATE] = state
    node.unschedulable = True
    outcome = w.rollout()
    assert "left alone (cordoned)" in outcome.blocked["n1"]
    assert w.fleet.writes == [] and node.unschedulable
    assert any(line.startswith("n1: blocked, left cordoned:") for line in w.out)


def test_drain_skip_pods_stay_and_gpu_pods_go_whatever_their_labels() -> None:
    w = world("n1")
    skip = {budget.DRAIN_SKIP_LABEL: "true"}
    w.fleet.pods["n1"] = [trainer("kept", **skip), trainer("gpu", gpu=True, **skip), trainer("web")]
    w.budgets = [pdb(0)]  # the kept pod needs no disruption, so it blocks nothing...
    w.fleet.pods["n1"] = [trainer("kept", **skip)]
    assert w.rollout().done == ["n1"]
    assert w.fleet.evicted == [] and [p.name for p in w.fleet.pods["n1"]] == ["kept"]
    w2 = world("n1")
    w2.fleet.pods["n1"] = [trainer("kept", **skip), trainer("gpu", gpu=True, **skip), trainer("web")]
    assert w2.rollout().done == ["n1"]
    assert w2.fleet.evicted == ["ml/gpu", "ml/web"]


# --- failures --------------------------------------------------------------------------------------------


def test_a_drain_that_fails_leaves_the_node_failed_and_cordoned() -> None:
    w = world("n1")
    w.fleet.drain_refusal = "drain of n1 timed out after 6s: PDB ml/p allows 0 disruptions"
    outcome = w.rollout()
    assert outcome.failed["n1"].startswith("drain of n1 timed out")
    node = w.fleet.nodes["n1"]
    assert node.labels[tags.UPGRADE_STATE] == "upgrade-failed"
    assert node.unschedulable  # the operator's rule: cordoned until the driver is in sync
    assert node.annotations[FAILURE].startswith("pod-deletion-required: drain of n1 timed out")
    assert OWNER not in node.annotations  # the lease is released
    assert ("n1", "DriverUpgradeFailed", True) in w.fleet.events
    assert any("left cordoned until its driver is in sync" in line for line in w.out)


def test_a_failed_node_out_of_sync_is_tried_again_and_ends_uncordoned() -> None:
    w = world("n1")
    w.fleet.drain_refusal = "refused"
    w.rollout()
    w.fleet.drain_refusal = None
    outcome = w.rollout()
    assert outcome.done == ["n1"]
    node = w.fleet.nodes["n1"]
    assert not node.unschedulable and node.annotations == {}  # gpudrv's cordon was not "cordoned before"


def test_a_failed_node_cordoned_before_stays_cordoned_through_the_retry() -> None:
    w = world("n1")
    w.fleet.nodes["n1"].unschedulable = True
    w.fleet.drain_refusal = "refused"
    w.rollout()
    assert w.fleet.nodes["n1"].annotations[INITIAL_UNSCHEDULABLE] == "true"
    w.fleet.drain_refusal = None
    assert w.rollout().done == ["n1"]
    assert w.fleet.nodes["n1"].unschedulable and w.fleet.nodes["n1"].annotations == {}


def test_a_failure_after_the_driver_was_touched_leaves_the_node_cordoned() -> None:
    w = world("n1")
    outcome = w.rollout(installer=Installer.WAIT, install_timeout=10.0)
    assert "node reports driver 535.183.06, not 550.90.07 within 10s" in outcome.failed["n1"]
    node = w.fleet.nodes["n1"]
    assert node.unschedulable and node.labels[tags.UPGRADE_STATE] == "upgrade-failed"
    assert node.annotations[FAILURE].startswith("pod-restart-required:")


def test_a_failed_node_whose_driver_came_in_sync_goes_to_uncordon_then_done() -> None:
    """ProcessUpgradeFailedNodes: in sync -> uncordon-required -> upgrade-done."""
    w = world("n1")
    w.rollout(installer=Installer.WAIT, install_timeout=4.0)
    w.fleet.nodes["n1"].labels.update(NEW.labels())  # the driver arrived later
    before = len(w.fleet.writes)
    assert w.rollout().done == ["n1"]
    assert w.fleet.states_written("n1")[-2:] == ["uncordon-required", "upgrade-done"]
    assert [s for _, w_ in w.fleet.writes[before:] if (s := w_["labels"].get(tags.UPGRADE_STATE))] == [  # type: ignore[attr-defined]
        "uncordon-required",
        "upgrade-done",
    ]
    node = w.fleet.nodes["n1"]
    assert not node.unschedulable and node.annotations == {}


def test_a_failed_node_in_sync_that_was_cordoned_before_goes_straight_to_done() -> None:
    w = world("n1")
    node = w.fleet.nodes["n1"]
    node.labels.update({**NEW.labels(), tags.UPGRADE_STATE: "upgrade-failed"})
    node.unschedulable = True
    node.annotations.update({INITIAL_UNSCHEDULABLE: "true", FAILURE: "validation-required: x"})
    assert w.rollout().done == ["n1"]
    assert w.fleet.states_written("n1") == ["upgrade-done"]
    assert node.unschedulable and node.annotations == {}


def test_a_validation_that_finds_no_matrix_row_fails_cordoned() -> None:
    w = world("n1")
    w.fleet.nodes["n1"].labels[tags.UPGRADE_STATE] = "validation-required"
    w.fleet.nodes["n1"].labels.update(NEW.labels())
    w.fleet.nodes["n1"].unschedulable = True
    images = Images("origin/main", "m.csv", frozenset())
    run = NodeRun(w.fleet, w.host, w.plan("n1"), images, Options(), owner=ME, report=Lines("n1", w.out))
    status, reason = run.run()
    assert status is RunResult.FAILED and f"{TARGET} is not in m.csv on origin/main" in reason
    assert w.fleet.nodes["n1"].unschedulable


# --- installer wait ---------------------------------------------------------------------------------------


def driver_pod(name: str, ready: bool = True) -> Pod:
    return Pod("gpu-operator", name, {"app": DRIVER_APP}, owner_kind="DaemonSet", ready=ready)


def test_installer_wait_deletes_the_old_driver_pod_then_waits_for_the_new_one() -> None:
    w = world("n1")
    w.fleet.pods["n1"] = [driver_pod("driver-old")]
    looks = []

    def world_moves() -> None:
        looks.append(1)
        if len(looks) == 2:  # the DaemonSet starts the new pod, not ready yet
            w.fleet.pods["n1"].append(driver_pod("driver-new", ready=False))
        if len(looks) == 4:  # ready, and GPU Feature Discovery reports the driver
            w.fleet.pods["n1"] = [driver_pod("driver-new")]
            w.fleet.nodes["n1"].labels.update(NEW.labels())

    w.host.on_sleep = world_moves
    outcome = w.rollout(installer=Installer.WAIT, install_timeout=60.0)
    assert outcome.done == ["n1"], w.out
    assert w.fleet.restarted == ["gpu-operator/driver-old"]
    assert "n1: driver pod gpu-operator/driver-old deleted: out of date with its DaemonSet" in w.out
    assert "n1: ~waiting: driver pod gpu-operator/driver-new not ready" in w.out
    assert "n1: driver 550.90.07 reported" in w.out


# --- leases ------------------------------------------------------------------------------------------------


def held_by(w: World, holder: str, expires_in: float) -> None:
    lease = executor.lease_text(Lease(holder, w.host.wall + expires_in))
    w.fleet.nodes["n1"].annotations[OWNER] = lease


def test_a_node_held_by_a_live_run_is_left_to_it() -> None:
    w = world("n1")
    held_by(w, "here/200/bbbb", 60)
    w.host.alive_holders["here/200/bbbb"] = True
    outcome = w.rollout()
    assert "being upgraded by another gpudrv run (here/200/bbbb)" in outcome.blocked["n1"]
    assert w.fleet.writes == []


def test_a_node_held_by_a_dead_run_on_this_host_is_taken_at_once() -> None:
    w = world("n1")
    held_by(w, "here/200/bbbb", 60)
    w.host.alive_holders["here/200/bbbb"] = False
    assert w.rollout().done == ["n1"]


@pytest.mark.parametrize(("expires_in", "taken"), [(60, False), (-1, True)])
def test_a_lease_from_another_host_holds_until_it_expires(expires_in: float, taken: bool) -> None:
    w = world("n1")
    held_by(w, "elsewhere/300/cccc", expires_in)
    outcome = w.rollout()
    assert (outcome.done == ["n1"]) is taken


def test_a_run_that_loses_its_lease_mid_upgrade_stops_and_leaves_the_lease_alone() -> None:
    w = world("n1")
    w.fleet.drain_refusal = None
    run = w.node_run("n1", owner=ME)
    original = w.fleet.drain

    def taken_over(node: str, roles: Collection[Role], **kwargs: object) -> None:
        held_by(w, "elsewhere/400/dddd", 60)  # our lease expired; another run took the node
        original(node, roles, **kwargs)  # type: ignore[arg-type]

    w.fleet.drain = taken_over  # type: ignore[method-assign]
    status, reason = run.run()
    assert status is RunResult.BLOCKED and "taken over by another gpudrv run (elsewhere/400/dddd)" in reason
    assert "elsewhere/400/dddd" in w.fleet.nodes["n1"].annotations[OWNER]
    assert w.fleet.nodes["n1"].labels[tags.UPGRADE_STATE] == "pod-deletion-required"  # not written past


def test_taking_a_node_retries_a_compare_and_swap_lost_to_another_writer() -> None:
    w = world("n1")
    w.fleet.racing_writers = 3
    assert w.rollout().done == ["n1"]


def test_taking_a_node_gives_up_after_losing_every_compare_and_swap() -> None:
    w = world("n1")
    w.fleet.racing_writers = executor.CONFLICT_RETRIES
    outcome = w.rollout()
    assert "changed under every attempt to take it" in outcome.blocked["n1"]


def test_long_waits_renew_the_lease() -> None:
    w = world("n1")
    w.fleet.pods["n1"] = [driver_pod("driver-old")]

    def later() -> None:
        if w.host.clock > 100:
            w.fleet.nodes["n1"].labels.update(NEW.labels())

    w.host.on_sleep = later
    assert w.rollout(installer=Installer.WAIT, install_timeout=600.0).done == ["n1"]
    renewals = [wr for _, wr in w.fleet.writes if wr["labels"] == {} and OWNER in wr["annotations"]]  # type: ignore[operator]
    assert len(renewals) >= 4  # the take, then every LEASE_SECONDS / 3 of waiting


@pytest.mark.parametrize(
    ("lease", "me", "now", "alive", "free"),
    [
        (None, ME, 0.0, None, True),
        (Lease(ME, 0.0), ME, 10.0, None, True),
        (Lease("x/1/a", 20.0), ME, 10.0, None, False),
        (Lease("x/1/a", 20.0), ME, 30.0, None, True),
        (Lease("here/1/a", 20.0), ME, 30.0, True, False),  # a live process on this host holds it
        (Lease("here/1/a", 20.0), ME, 10.0, False, True),  # its process is gone
    ],
)
def test_lease_free(lease: Lease | None, me: str, now: float, alive: bool | None, free: bool) -> None:
    assert executor.lease_free(lease, me, now, alive) is free


def test_the_lease_annotation_is_the_json_older_gpudrvs_wrote_and_read() -> None:
    text = executor.lease_text(Lease("host-1/42/ab12cd34", 1234.5))
    assert json.loads(text) == {"holder": "host-1/42/ab12cd34", "expires": 1234.5}
    older = json.dumps({"holder": "host-1/42/ab12cd34", "expires": 1700000000.123})
    assert executor.parse_lease(older) == Lease("host-1/42/ab12cd34", 1700000000.123)
    assert executor.parse_lease("not json") is None
    assert executor.parse_lease(None) is None
    assert executor.parse_lease('{"holder": "a"}') is None


# --- what a failure leaves behind, as a function --------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "held"),
    [
        (State.REQUIRED, "not cordoned"),
        (State.CORDON, "not cordoned"),
        (State.WAIT_FOR_JOBS, "left cordoned"),
        (State.DRAIN, "left cordoned"),
        (State.POD_RESTART, "left cordoned"),
        (State.VALIDATION, "left cordoned"),
    ],
)
def test_a_failure_never_uncordons(state: State, held: str) -> None:
    left = executor.failure(state, "why", cordoned_before=False)
    assert left.annotations == {FAILURE: f"{state}: why"}
    assert held in left.said
