"""The upgrade executor: each node through its remaining GPU Operator states, the fleet in rounds.

The node's state label is the only memory: killed at any moment and run again, a node resumes at
the step its label names. A step's own change to the node (the cordon, the driver labels, the
uncordon) is written in the same patch as the next state's label, so it is on the node exactly when
the node has moved on: a run killed at any moment never writes a step twice. Evictions are their own
record (an evicted pod is gone).

Decisions are plain functions (which nodes next, whether a lease is free, what a failure leaves
behind); every read and write goes through `UpgradeFleet` (adapters/cluster/fleet.py's Fleet on a cluster, an
in-memory fleet in tests/unit/test_executor.py) and every clock and wait through `Host`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Protocol

from reconciler.core import budget, tags, upgrade
from reconciler.core.budget import Pod, Role
from reconciler.core.duration import show
from reconciler.core.flags import Kind, flag
from reconciler.core.upgrade import (
    FAILURE,
    INITIAL_UNSCHEDULABLE,
    LEGACY_INITIAL_UNSCHEDULABLE,
    OWNER,
    GateName,
    Images,
    LiveNode,
    NodePlan,
    RunResult,
    State,
)

LEASE_SECONDS = 60.0
CONFLICT_RETRIES = 10  # a compare-and-swap lost this many times in a row gives up
DRIVER_APP = "nvidia-driver-daemonset"  # the GPU Operator's label on a ClusterPolicy's driver pods
# ... and on the driver pods of every DaemonSet an NVIDIADriver makes (and, in its newer releases, a
# ClusterPolicy's too): manifests/state-driver/0500_daemonset.yaml, assets/state-driver/0500_daemonset.yaml
DRIVER_COMPONENT = ("app.kubernetes.io/component", "nvidia-driver")


def is_driver_pod(labels: Mapping[str, str]) -> bool:
    return labels.get("app") == DRIVER_APP or labels.get(DRIVER_COMPONENT[0]) == DRIVER_COMPONENT[1]


WAIT_SECONDS = 2.0  # between looks at a driver that is being installed


class Installer(StrEnum):
    LABELS = "labels"  # gpudrv sets the driver labels itself (the lab's stand-in for the operator)
    WAIT = "wait"  # the GPU Operator installs; gpudrv waits for its driver pod and GFD's labels


@dataclass(frozen=True)
class Options:
    """The lab upgrade's settings: flags of `gpudrv apply` (and of `reconcile --apply`, which passes them
    on), part of apply's settings type (commands/settings.py)."""

    max_parallel: int = flag(
        "--max-parallel",
        Kind.COUNT,
        1,
        metavar="N",
        help="nodes at a time (default 1)",
        relay="apply's (default 1)",
    )
    drain_timeout: float = flag(
        "--drain-timeout", Kind.SECONDS, 300.0, metavar="D", help="per drain step (default 5m)",
        relay="apply's (default 5m)",
    )  # fmt: skip
    installer: Installer = flag(
        "--installer", Kind.CHOICE, Installer.LABELS, choices=tuple(each.value for each in Installer),
        help="how the driver gets installed", relay="apply's",
    )  # fmt: skip
    install_timeout: float = flag(
        "--timeout", Kind.SECONDS, 600.0, metavar="D",
        help="installer=wait: how long (default 10m); with the GPU Operator: per batch",
        relay="apply's installer=wait timeout",
    )  # fmt: skip
    force: bool = flag("--force", Kind.SWITCH, False, help="also delete pods that have no controller")


class StepFailed(Exception):
    """A step could not finish; the node goes to upgrade-failed with this reason."""


class LeaseLost(Exception):
    """Another run holds the node now (this run's lease expired under it): stop touching it."""


class Busy(Exception):
    """Another gpudrv run holds the node."""


# --- the ports: what the executor needs of the world ------------------------------------------------


class Host(Protocol):
    """Clocks, waits, and whether a lease holder's process still runs."""

    def now(self) -> float:
        """Wall-clock seconds (leases are compared across hosts)."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def alive(self, holder: str) -> bool | None:
        """Whether the holder's process runs, when this host can tell (same host); None otherwise."""
        ...


class Reporter(Protocol):
    def say(self, text: str) -> None: ...

    def wait(self, text: str) -> None: ...


class UpgradeFleet(Protocol):
    """The reads and writes of one node's upgrade."""

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        """The node and its resourceVersion, or None if there is no such node."""
        ...

    def pods_on(self, node: str) -> list[Pod]: ...

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
        """A merge patch on the node as read fresh (`expect` sees it first and may raise); retried
        on a conflict with another writer."""
        ...

    def swap_node(self, name: str, resource_version: str, annotations: Mapping[str, str | None]) -> bool:
        """The annotations written only onto that version of the node; False when it changed."""
        ...

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
        """Evict the node's pods in `roles` (budgets respected); StepFailed naming what held them."""
        ...

    def restart_driver(self, node: str) -> list[str]:
        """Delete the node's driver pods that are out of date with their DaemonSet; the pods deleted."""
        ...

    def event(
        self, node: str, reason: str, message: str, warning: bool = False, name: str | None = None
    ) -> None: ...


# --- leases ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lease:
    holder: str  # host/pid/random
    expires: float  # wall-clock seconds


_LEASE = re.compile(r'\s*\{\s*"holder"\s*:\s*"([^"\\]*)"\s*,\s*"expires"\s*:\s*([-+0-9.eE]+)\s*\}\s*')


def lease_text(lease: Lease) -> str:
    """The annotation's JSON, {"holder": ..., "expires": ...}; holders are host/pid/hex, no quotes."""
    holder = lease.holder.replace("\\", "").replace('"', "")
    return f'{{"holder": "{holder}", "expires": {lease.expires!r}}}'


def parse_lease(text: str | None) -> Lease | None:
    found = _LEASE.fullmatch(text or "")
    if found is None:
        return None
    try:
        return Lease(found.group(1), float(found.group(2)))
    except ValueError:
        return None


def lease_free(lease: Lease | None, me: str, now: float, alive: bool | None) -> bool:
    """May `me` take a node with this lease? Unheld, its own, or the holder is gone: its process is
    known dead (same host), or it is on another host and its lease expired."""
    if lease is None or lease.holder == me:
        return True
    if alive is not None:
        return not alive
    return lease.expires <= now


# --- what a step writes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Writes:
    """What a step changes on the node, written with the next state's label; `said` once written."""

    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None
    said: str | None = None


# Written with upgrade-done: an upgrade that ends leaves none of its annotations behind.
DONE_ANNOTATIONS: dict[str, str | None] = {
    INITIAL_UNSCHEDULABLE: None,
    LEGACY_INITIAL_UNSCHEDULABLE: None,
    FAILURE: None,
    OWNER: None,
}


def initial_annotations(cordoned_before: bool) -> dict[str, str | None]:
    """Written with upgrade-required: the operator's annotation only when the node was cordoned
    before (its presence is what counts), gpudrv's older one gone."""
    return {INITIAL_UNSCHEDULABLE: "true" if cordoned_before else None, LEGACY_INITIAL_UNSCHEDULABLE: None}


@dataclass(frozen=True)
class Failure:
    """What a failed step leaves on the node: upgrade-failed and the reason; the cordon as it is."""

    annotations: dict[str, str | None]
    said: str


def failure(state: State, reason: str, cordoned_before: bool) -> Failure:
    """The operator's rule: a failed node is not uncordoned; it stays cordoned until its driver is in
    sync, then goes to uncordon-required (upgrade-done if it was cordoned before). A failure before
    the cordon step leaves the node as schedulable as it was."""
    cordoned = state not in upgrade.BEFORE_CORDON or cordoned_before
    held = "; left cordoned until its driver is in sync" if cordoned else "; not cordoned"
    return Failure({FAILURE: f"{state}: {reason}"}, f"upgrade-failed at {state}: {reason}{held}")


# --- one node ------------------------------------------------------------------------------------------


class NodeRun:
    """One node through the remaining states of its plan."""

    def __init__(
        self,
        fleet: UpgradeFleet,
        host: Host,
        plan: NodePlan,
        images: Images,
        options: Options,
        *,
        owner: str,
        report: Reporter,
    ) -> None:
        self.fleet, self.host, self.plan, self.images, self.options = fleet, host, plan, images, options
        self.name = plan.node
        self.owner = owner
        self.progress = report
        self.renewed = float("-inf")
        self.released = False

    def run(self) -> tuple[RunResult, str]:
        try:
            self._acquire()
        except Busy as exc:
            self.progress.say(str(exc))
            return RunResult.BLOCKED, str(exc)
        steps = self.plan.steps
        state = steps[0]
        try:
            self._enter(state, self._first(state))
            for index, state in enumerate(steps):
                writes = self.actions[state](self)
                if index + 1 < len(steps):
                    self._enter(steps[index + 1], self._before(steps[index + 1], state, writes))
            return RunResult.DONE, ""
        except StepFailed as exc:
            self._fail(state, str(exc))
            return RunResult.FAILED, str(exc)
        except LeaseLost as exc:
            self.released = True  # not ours to release
            self.progress.say(str(exc))
            return RunResult.BLOCKED, str(exc)
        finally:
            self._release()

    # --- the steps: each returns its changes, written with the next state's label -----------------

    def _first(self, state: State) -> Writes:
        """What entering the first state writes: upgrade-required carries whether the node was
        cordoned before; a failed node in sync may go straight to upgrade-done."""
        if state is State.REQUIRED:
            return Writes(annotations=initial_annotations(self.plan.cordoned_before))
        if state is State.DONE:
            return self._before(State.DONE, State.FAILED, Writes())
        return Writes()

    def _before(self, state: State, previous: State, writes: Writes) -> Writes:
        """upgrade-done is written with the removal of the upgrade's annotations and this run's lease;
        reached straight from validation, the node was cordoned before and stays so."""
        if state is not State.DONE:
            return writes
        said = writes.said
        if previous is not State.UNCORDON:
            said = "left cordoned, as it was before the upgrade"
        return Writes(writes.labels, {**writes.annotations, **DONE_ANNOTATIONS}, writes.unschedulable, said)

    def _start(self) -> Writes:
        """Nothing to do: whether the node was cordoned before went with the upgrade-required label."""
        return Writes()

    def _cordon(self) -> Writes:
        return Writes(unschedulable=True, said="cordoned")

    def _wait_for_jobs(self) -> Writes:
        """The operator waits here for the pods of its waitForCompletion selector; the lab sets none,
        and with none the operator moves straight on (upgrade_state.go ProcessWaitForJobsRequiredNodes)."""
        return Writes()

    def _evict_gpu_pods(self) -> Writes:
        self._drain({Role.GPU})
        return Writes()

    def _drain_rest(self) -> Writes:
        self._drain({Role.GPU, Role.OTHER, Role.FINISHED})
        return Writes()

    def _drain(self, roles: set[Role]) -> None:
        self.fleet.drain(
            self.name, roles, timeout=self.options.drain_timeout, force=self.options.force,
            say=self.progress.say, wait=self._waiting,
        )  # fmt: skip

    def _install(self) -> Writes:
        if self.options.installer is Installer.LABELS:
            labels: dict[str, str | None] = dict(self.plan.target.labels())
            return Writes(labels=labels, said=f"driver labels set to {self.plan.target.version}")
        # As the operator at pod-restart-required: the driver DaemonSet is OnDelete, so its pod that
        # is out of date is deleted for the new one to start.
        for ref in self.fleet.restart_driver(self.name):
            self.progress.say(f"driver pod {ref} deleted: out of date with its DaemonSet")
        self._wait_for_driver()
        return Writes()

    def _wait_for_driver(self) -> None:
        """installer=wait: the driver DaemonSet's pod on the node is ready again, and GPU Feature
        Discovery reports the desired version in the node's labels."""
        deadline = self.host.monotonic() + self.options.install_timeout
        while (pending := self._install_pending()) is not None:
            if self.host.monotonic() > deadline:
                raise StepFailed(f"{pending} within {show(self.options.install_timeout)}")
            self._waiting(f"waiting: {pending}")
            self.host.sleep(WAIT_SECONDS)
        self.progress.say(f"driver {self.plan.target.version} reported")

    def _install_pending(self) -> str | None:
        unready = [p.ref for p in self.fleet.pods_on(self.name) if is_driver_pod(p.labels) and not p.ready]
        if unready:
            return f"driver pod {', '.join(unready)} not ready"
        return self._driver_mismatch(self._live())

    def _driver_mismatch(self, live: LiveNode) -> str | None:
        running = upgrade.driver(live.node.labels)
        if running == self.plan.target:
            return None
        return f"node reports driver {running.version if running else 'none'}, not {self.plan.target.version}"

    def _validate(self) -> Writes:
        live = self._live()
        if (mismatch := self._driver_mismatch(live)) is not None:
            raise StepFailed(mismatch)
        try:
            tag = tags.tag(live.node)
        except tags.TagError as exc:
            raise StepFailed(exc.reason) from None
        if tag not in self.images.merged:
            raise StepFailed(f"{tag} is not in {self.images.path} on {self.images.ref}")
        self.progress.say(f"validated: {tag} is in the matrix")
        return Writes()

    def _uncordon(self) -> Writes:
        """Uncordoned as the node becomes upgrade-done. Only a node an older gpudrv left at
        uncordon-required can get here cordoned before: it stays cordoned."""
        if self.plan.cordoned_before:
            return Writes(said="left cordoned, as it was before the upgrade")
        return Writes(unschedulable=False, said="uncordoned")

    def _finish(self) -> Writes:
        self.released = True  # the lease went with the uncordon write
        self.fleet.event(
            self.name,
            "DriverUpgradeDone",
            f"driver {self.plan.target.version}, image {self.plan.target_tag}",
            name=self._event_name("done"),
        )
        return Writes()

    actions: ClassVar[dict[State, Callable[[NodeRun], Writes]]] = {
        State.REQUIRED: _start,
        State.CORDON: _cordon,
        State.WAIT_FOR_JOBS: _wait_for_jobs,
        State.POD_DELETION: _evict_gpu_pods,
        State.DRAIN: _drain_rest,
        State.POD_RESTART: _install,
        State.VALIDATION: _validate,
        State.UNCORDON: _uncordon,
        State.DONE: _finish,
    }

    # --- bookkeeping -------------------------------------------------------------------------------

    def _enter(self, state: State, writes: Writes) -> None:
        """The state's label and the previous step's changes, in one write to the node this run holds."""
        self.fleet.patch_node(
            self.name,
            labels={**writes.labels, tags.UPGRADE_STATE: str(state)},
            annotations={**self._lease(), **writes.annotations},
            unschedulable=writes.unschedulable,
            expect=self._still_ours,
        )
        if writes.said:
            self.progress.say(writes.said)
        self.progress.say(str(state))

    def _still_ours(self, live: LiveNode) -> None:
        holder = parse_lease(live.annotations.get(OWNER))
        if holder is not None and holder.holder != self.owner:
            raise LeaseLost(f"{self.name}: taken over by another gpudrv run ({holder.holder}); left to it")

    def _event_name(self, what: str) -> str:
        """One event per run and outcome: sent again after a lost answer, it is the same event."""
        return f"{self.name}.gpudrv-{what}-{self.owner.rsplit('/', 1)[-1]}"

    def _fail(self, state: State, reason: str) -> None:
        left = failure(state, reason, self.plan.cordoned_before)
        self.fleet.patch_node(
            self.name, labels={tags.UPGRADE_STATE: str(State.FAILED)}, annotations=left.annotations
        )
        self.fleet.event(
            self.name,
            "DriverUpgradeFailed",
            f"at {state}: {reason}",
            warning=True,
            name=self._event_name("failed"),
        )
        self.progress.say(left.said)

    def _live(self) -> LiveNode:
        found = self.fleet.node(self.name)
        if found is None:
            raise StepFailed("the node disappeared from the cluster")
        return found[0]

    def _waiting(self, text: str) -> None:
        """Long waits renew the lease, so no other run takes the node from under a slow drain."""
        if self.host.monotonic() - self.renewed > LEASE_SECONDS / 3:
            self.fleet.patch_node(self.name, annotations=self._lease(), expect=self._still_ours)
        self.progress.wait(text)

    def _lease(self) -> dict[str, str | None]:
        self.renewed = self.host.monotonic()
        return {OWNER: lease_text(Lease(self.owner, self.host.now() + LEASE_SECONDS))}

    def _acquire(self) -> None:
        """Take the node with a compare-and-swap on its resourceVersion: two runs never drive one node.
        A swap lost to a writer that is not another run (a label, the kubelet) is tried again on the
        node as it is now."""
        for _ in range(CONFLICT_RETRIES):
            found = self.fleet.node(self.name)
            if found is None:
                raise Busy(f"{self.name}: not found in the cluster")
            live, version = found
            held = parse_lease(live.annotations.get(OWNER))
            alive = self.host.alive(held.holder) if held is not None else None
            if not lease_free(held, self.owner, self.host.now(), alive):
                assert held is not None
                raise Busy(f"{self.name}: being upgraded by another gpudrv run ({held.holder}), skipped")
            if self.fleet.swap_node(self.name, version, self._lease()):
                return
            self.host.sleep(0.1)
        raise Busy(f"{self.name}: changed under every attempt to take it ({CONFLICT_RETRIES}), skipped")

    def _release(self) -> None:
        if not self.released:
            with contextlib.suppress(LeaseLost):  # another run holds it now: its lease is not ours to drop
                self.fleet.patch_node(self.name, annotations={OWNER: None}, expect=self._still_ours)
            self.released = True


# --- the fleet in rounds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """One consistent read: the plans of the declared nodes, their pods and the budgets."""

    plans: list[NodePlan]
    pods: Mapping[str, Sequence[Pod]]
    budgets: Sequence[budget.Budget]


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # nvidia.com/gpu-driver-upgrade.skip=true

    @property
    def ok(self) -> bool:
        """Skipped nodes are left alone on purpose: not a finding."""
        return not self.blocked and not self.failed

    @property
    def settled(self) -> set[str]:
        return self.failed.keys() | self.blocked.keys() | set(self.done) | set(self.skipped)


def waits_on_budget(plan: NodePlan) -> bool:
    """Blocked only by budgets with no room now: worth waiting for while other nodes recover."""
    return all(gate.name is GateName.BUDGET for gate in plan.gates if not gate.ok)


@dataclass
class Rollout:
    """Rounds until every declared node is done, blocked or failed: each round reads the fleet,
    settles the nodes no wait can help, and drives the next batch (upgrade.batch) in parallel."""

    fleet: UpgradeFleet
    host: Host
    images: Images
    options: Options
    read: Callable[[], Round]
    owner: Callable[[], str]  # a new lease holder name for each node run
    reporter: Callable[[str], Reporter]
    say: Callable[[str], None] = print
    outcome: Outcome = field(default_factory=Outcome)

    def run(self) -> Outcome:
        outcome = self.outcome
        recovering_until = float("-inf")  # after a node finishes, its pods need time to be healthy again
        while True:
            current = self.read()
            settled = outcome.settled
            plans = [p for p in current.plans if p.node not in settled]
            if not plans and not settled:
                self.say("nothing to upgrade: every declared node runs its desired driver")
            self._record_blocked([p for p in plans if p.blocked and not waits_on_budget(p)])
            plans = [p for p in plans if p.node not in outcome.settled]
            ready = upgrade.batch(plans, self.options.max_parallel, current.pods, current.budgets)
            if ready:
                self._run_batch(ready)
                if outcome.done:
                    recovering_until = self.host.monotonic() + self.options.drain_timeout
                continue
            waiting = [p for p in plans if p.blocked]
            if waiting and self.host.monotonic() < recovering_until:
                self.host.sleep(WAIT_SECONDS)  # a budget this run used up may have room again soon
                continue
            self._record_blocked(waiting)
            return outcome

    def _record_blocked(self, plans: list[NodePlan]) -> None:
        for plan in plans:
            why = "; ".join(g.detail for g in plan.gates if not g.ok)
            if plan.skipped:
                self.outcome.skipped.append(plan.node)
                self.say(f"{plan.node}: {why}")
                continue
            self.outcome.blocked[plan.node] = why
            held = "left cordoned" if plan.cordoned else "not cordoned"
            self.say(f"{plan.node}: blocked, {held}: {why}")

    def node_run(self, plan: NodePlan) -> NodeRun:
        return NodeRun(
            self.fleet, self.host, plan, self.images, self.options,
            owner=self.owner(), report=self.reporter(plan.node),
        )  # fmt: skip

    def _run_batch(self, ready: list[NodePlan]) -> None:
        runs = [self.node_run(plan) for plan in ready]
        if len(runs) == 1:
            results = [runs[0].run()]
        else:
            with ThreadPoolExecutor(max_workers=len(runs)) as pool:
                results = list(pool.map(NodeRun.run, runs))
        for plan, (status, reason) in zip(ready, results, strict=True):
            if status is RunResult.DONE:
                self.outcome.done.append(plan.node)
            elif status is RunResult.FAILED:
                self.outcome.failed[plan.node] = reason
            else:
                self.outcome.blocked[plan.node] = reason
