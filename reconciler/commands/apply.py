"""`gpudrv apply --from DIR`: drive each node to its desired driver, one GPU Operator state at a time.

The node's state label is the only memory: killed at any moment and run again, a node resumes at
the step its label names. A step's own change to the node (the cordon, the driver labels, the
uncordon) is written in the same patch as the next state's label, so it is on the node exactly when
the node has moved on: a run killed at any moment never writes a step twice. Evictions are their own
record (an evicted pod is gone). Every write applies to the node as read just before it, still held
by this run (fleet.patch_node retries a write that lost a race to another writer); an API server
that goes away for a while (restarted, etcd stalled) is waited for (kube.Gateway.patience).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from reconciler.adapters import kube
from reconciler.adapters import operator as operator_files
from reconciler.adapters.drainer import Drain, DrainTimeout
from reconciler.adapters.fleet import CONFLICT_RETRIES, Fleet
from reconciler.commands import FINDINGS, OK, Installer
from reconciler.commands import upgrades as up
from reconciler.core import audit, diff, tags, upgrade
from reconciler.core.budget import Role
from reconciler.core.duration import show
from reconciler.core.label_selector import LabelSelector
from reconciler.core.upgrade import (
    FAILURE,
    INITIAL_UNSCHEDULABLE,
    OWNER,
    GateName,
    Images,
    NodePlan,
    RunResult,
    State,
)
from reconciler.errors import GpudrvError
from reconciler.render.progress import Progress
from reconciler.render.upgrades import plan_text

LEASE_SECONDS = 60.0
RECONNECT_SECONDS = 180.0  # how long an upgrade waits out an API server that stopped answering
DRIVER_APP = "nvidia-driver-daemonset"  # the GPU Operator's label on its driver pods
BUDGET_SETTLE_SECONDS = 30.0


@dataclass(frozen=True)
class Settings:
    from_dir: Path
    matrix: Path
    merged_ref: str | None = None
    dry_run: bool = False
    max_parallel: int = 1
    drain_timeout: float = 300.0
    installer: Installer = Installer.LABELS
    install_timeout: float = 600.0
    force: bool = False
    selector: LabelSelector | None = None  # -l: only the declared nodes whose declared labels match


class StepFailed(Exception):
    """A step could not finish; the node goes to upgrade-failed with this reason."""


class LeaseLost(Exception):
    """Another run holds the node now (this run's lease expired under it): stop touching it."""


@dataclass(frozen=True)
class Writes:
    """What a step changes on the node, written with the next state's label; `said` once written."""

    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None
    said: str | None = None


class Busy(Exception):
    """Another gpudrv run holds the node."""


def run(settings: Settings, options: kube.Options) -> int:
    _refuse_operator_resources(settings.from_dir)
    desired = up.load_desired(settings.from_dir, settings.selector)  # 1. manifests and matrix valid first
    images = up.load_images(settings.matrix, settings.merged_ref)  # 2. the image gate: the merged ref
    fleet = up.connect(options)
    if settings.dry_run:
        return _dry_run(fleet, desired, images, settings)
    fleet.gateway.patience = RECONNECT_SECONDS  # from here on the cluster changes: outages are waited out
    fleet.gateway.notice = lambda text: print(f"waiting for the cluster: {text}", flush=True)
    _sync_budgets(fleet, desired)  # 3. budgets are part of the reviewed change
    outcome = _upgrade_all(fleet, desired, images, settings)
    return _final_audit(fleet, images.working, outcome, settings.selector)


def _refuse_operator_resources(from_dir: Path) -> None:
    """The lab's apply drives the state label itself; where the GPU Operator's driver resources are
    declared, its own upgrade controller owns that label, and two controllers must never share it."""
    resources = operator_files.load_resources(from_dir)
    if resources:
        first = resources[0]
        raise GpudrvError(
            f"{from_dir} declares the GPU Operator's {first.ref}: the operator's upgrade controller "
            "rolls driver changes out, and gpudrv apply (the lab's label-driven upgrade) would fight it "
            "for nvidia.com/gpu-driver-upgrade-state; run gpudrv plan for the image and budget gates",
            file=first.origin.rpartition(":")[0] if first.origin else None,
        )


def _dry_run(fleet: Fleet, desired: up.Desired, images: Images, settings: Settings) -> int:
    live = up.read_live(fleet, desired)
    plans, images = up.plans_with_history(desired, live, images, settings.force, settings.matrix)
    print(plan_text(plans, images))
    for (namespace, name), change in sorted(_budget_drift(fleet, desired).items()):
        print(f"would apply PDB {namespace}/{name}: {change}; budgets above are as they are live now")
    print("dry run: nothing was changed")
    return FINDINGS if any(plan.blocked for plan in plans) else OK


def _budget_drift(fleet: Fleet, desired: up.Desired) -> dict[tuple[str, str], str]:
    """The declared budgets that differ live, each with what changes; unchanged ones are left alone."""
    live = [
        found
        for namespace in sorted({b.namespace for b in desired.budgets})
        for found in fleet.cluster.budget_specs(namespace)
    ]
    return {
        (d.namespace, d.name): ", ".join(f"{c.name} {c.live} -> {c.desired}" for c in d.fields)
        or "absent live"
        for d in diff.budget_drift(desired.budgets, live)
    }


def _sync_budgets(fleet: Fleet, desired: up.Desired) -> None:
    drifted = _budget_drift(fleet, desired)
    for declared in desired.budgets:
        if (change := drifted.get((declared.namespace, declared.name))) is not None:
            fleet.apply_budget(declared.namespace, declared.name, declared.spec)
            print(f"applied PDB {declared.ref}: {change} (server-side, field manager gpudrv)")
    deadline = time.monotonic() + BUDGET_SETTLE_SECONDS
    while not all(b.fresh for b in fleet.budgets()) and time.monotonic() < deadline:
        time.sleep(0.5)  # the disruption controller recomputes status after a spec change


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.blocked and not self.failed


def _upgrade_all(fleet: Fleet, desired: up.Desired, images: Images, settings: Settings) -> Outcome:
    outcome = Outcome()
    recovering_until = 0.0  # after a node finishes, its pods need time to be healthy elsewhere again
    while True:
        live = up.read_live(fleet, desired)
        settled = outcome.failed.keys() | outcome.blocked.keys() | set(outcome.done)
        plans = [p for p in up.make_plans(desired, live, images, settings.force) if p.node not in settled]
        if not plans and not settled:
            print("nothing to upgrade: every declared node runs its desired driver")
        _record_blocked(outcome, [p for p in plans if p.blocked and not _waits_on_budget(p)])
        plans = [p for p in plans if p.node not in outcome.blocked]
        ready = upgrade.batch(plans, settings.max_parallel, live.pods, live.budgets)
        if ready:
            _run_batch(fleet, ready, images, settings, outcome)
            if outcome.done:
                recovering_until = time.monotonic() + settings.drain_timeout
            continue
        waiting = [p for p in plans if p.blocked]
        if waiting and time.monotonic() < recovering_until:
            time.sleep(2)  # a budget that an upgrade in this run used up may have room again soon
            continue
        _record_blocked(outcome, waiting)
        return outcome


def _waits_on_budget(plan: NodePlan) -> bool:
    return all(gate.name is GateName.BUDGET for gate in plan.gates if not gate.ok)


def _record_blocked(outcome: Outcome, plans: list[NodePlan]) -> None:
    for plan in plans:
        outcome.blocked[plan.node] = "; ".join(g.detail for g in plan.gates if not g.ok)
        print(f"{plan.node}: blocked, not cordoned: {outcome.blocked[plan.node]}")


def _run_batch(
    fleet: Fleet, ready: list[NodePlan], images: Images, settings: Settings, outcome: Outcome
) -> None:
    with ThreadPoolExecutor(max_workers=len(ready)) as pool:
        results = list(pool.map(lambda plan: NodeRun(fleet, plan, images, settings).run(), ready))
    for plan, (status, reason) in zip(ready, results, strict=True):
        if status is RunResult.DONE:
            outcome.done.append(plan.node)
        elif status is RunResult.FAILED:
            outcome.failed[plan.node] = reason
        else:
            outcome.blocked[plan.node] = reason


def _final_audit(
    fleet: Fleet, working_tags: frozenset[str], outcome: Outcome, selector: LabelSelector | None = None
) -> int:
    result = audit.audit([live.node for live in fleet.gpu_nodes(selector)], working_tags)
    print("audit: " + ("OK" if result.ok else "; ".join(f.line() for f in result.findings)))
    summary = f"{len(outcome.done)} upgraded, {len(outcome.blocked)} blocked, {len(outcome.failed)} failed"
    print(summary)
    return OK if outcome.ok and result.ok else FINDINGS


class NodeRun:
    """One node through the remaining states of its plan."""

    def __init__(self, fleet: Fleet, plan: NodePlan, images: Images, settings: Settings) -> None:
        self.fleet, self.plan, self.images, self.settings = fleet, plan, images, settings
        self.name = plan.node
        self.owner = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.progress = Progress(self.name)
        self.renewed = 0.0
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
            self._enter(state, Writes())
            for index, state in enumerate(steps):
                writes = self.actions[state](self)
                if index + 1 < len(steps):
                    self._enter(steps[index + 1], writes)
            return RunResult.DONE, ""
        except (StepFailed, DrainTimeout) as exc:
            self._fail(state, str(exc))
            return RunResult.FAILED, str(exc)
        except LeaseLost as exc:
            self.released = True  # not ours to release
            self.progress.say(str(exc))
            return RunResult.BLOCKED, str(exc)
        finally:
            self._release()

    # --- the steps: each returns its changes, written with the next state's label -----------------

    def _start(self) -> Writes:
        """Remember whether someone else had cordoned the node, before gpudrv cordons it."""
        return Writes(annotations={INITIAL_UNSCHEDULABLE: _flag(self.plan.cordoned_before)})

    def _cordon(self) -> Writes:
        return Writes(unschedulable=True, said="cordoned")

    def _evict_gpu_pods(self) -> Writes:
        self._drain({Role.GPU})
        return Writes()

    def _drain_rest(self) -> Writes:
        self._drain({Role.GPU, Role.OTHER, Role.FINISHED})
        return Writes()

    def _drain(self, roles: set[Role]) -> None:
        Drain(
            self.fleet, self.name, roles, self.settings.drain_timeout, self.settings.force,
            say=self.progress.say, wait=self._waiting,
        ).run()  # fmt: skip

    def _install(self) -> Writes:
        if self.settings.installer is Installer.LABELS:
            labels: dict[str, str | None] = dict(self.plan.target.labels())
            return Writes(labels=labels, said=f"driver labels set to {self.plan.target.version}")
        self._wait_for_driver()
        return Writes()

    def _wait_for_driver(self) -> None:
        """installer=wait: the driver DaemonSet's pod on the node is ready again, and GPU Feature
        Discovery reports the desired version in the node's labels."""
        deadline = time.monotonic() + self.settings.install_timeout
        while (pending := self._install_pending()) is not None:
            if time.monotonic() > deadline:
                raise StepFailed(f"{pending} within {show(self.settings.install_timeout)}")
            self._waiting(f"waiting: {pending}")
            time.sleep(2)
        self.progress.say(f"driver {self.plan.target.version} reported")

    def _install_pending(self) -> str | None:
        unready = [
            p.ref for p in self.fleet.pods_on(self.name) if p.labels.get("app") == DRIVER_APP and not p.ready
        ]
        if unready:
            return f"driver pod {', '.join(unready)} not ready"
        return self._driver_mismatch(self._live())

    def _driver_mismatch(self, live: upgrade.LiveNode) -> str | None:
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
        """Uncordoned (unless it was cordoned before) as the node becomes upgrade-done, its upgrade
        annotations and this run's lease removed in the same write: done leaves nothing behind."""
        done: dict[str, str | None] = {INITIAL_UNSCHEDULABLE: None, FAILURE: None, OWNER: None}
        if self.plan.cordoned_before:
            return Writes(annotations=done, said="left cordoned, as it was before the upgrade")
        return Writes(annotations=done, unschedulable=False, said="uncordoned")

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

    def _still_ours(self, live: upgrade.LiveNode) -> None:
        holder = _holder(live.annotations.get(OWNER))
        if holder is not None and holder[0] != self.owner:
            raise LeaseLost(f"{self.name}: taken over by another gpudrv run ({holder[0]}); left to it")

    def _event_name(self, what: str) -> str:
        """One event per run and outcome: sent again after a lost answer, it is the same event."""
        return f"{self.name}.gpudrv-{what}-{self.owner.rsplit('/', 1)[-1]}"

    def _fail(self, state: State, reason: str) -> None:
        """upgrade-failed, the reason on the node and in an Event; a node we cordoned before touching
        its driver is made schedulable again, since its old driver still works."""
        restore = (
            state in upgrade.ORDER[: upgrade.ORDER.index(State.POD_RESTART)] and not self.plan.cordoned_before
        )
        self.fleet.patch_node(
            self.name,
            labels={tags.UPGRADE_STATE: str(State.FAILED)},
            annotations={FAILURE: f"{state}: {reason}"},
            unschedulable=False if restore else None,
        )
        self.fleet.event(
            self.name,
            "DriverUpgradeFailed",
            f"at {state}: {reason}",
            warning=True,
            name=self._event_name("failed"),
        )
        self.progress.say(f"upgrade-failed at {state}: {reason}" + ("; uncordoned again" if restore else ""))

    def _live(self) -> upgrade.LiveNode:
        found = self.fleet.node(self.name)
        if found is None:
            raise StepFailed("the node disappeared from the cluster")
        return found[0]

    def _waiting(self, text: str) -> None:
        """Long waits renew the lease, so no other run takes the node from under a slow drain."""
        if time.monotonic() - self.renewed > LEASE_SECONDS / 3:
            self.fleet.patch_node(self.name, annotations=self._lease(), expect=self._still_ours)
        self.progress.wait(text)

    def _lease(self) -> dict[str, str | None]:
        self.renewed = time.monotonic()
        return {OWNER: json.dumps({"holder": self.owner, "expires": time.time() + LEASE_SECONDS})}

    def _acquire(self) -> None:
        """Take the node with a compare-and-swap on its resourceVersion: two runs never drive one node.
        A swap lost to a writer that is not another run (a label, the kubelet) is tried again on the
        node as it is now."""
        for _ in range(CONFLICT_RETRIES):
            found = self.fleet.node(self.name)
            if found is None:
                raise Busy(f"{self.name}: not found in the cluster")
            live, version = found
            holder = _holder(live.annotations.get(OWNER))
            if holder and holder[0] != self.owner and _alive(holder):
                raise Busy(f"{self.name}: being upgraded by another gpudrv run ({holder[0]}), skipped")
            try:
                self.fleet.patch_node(self.name, annotations=self._lease(), resource_version=version)
                return
            except kube.Conflict:
                self.fleet.conflicts += 1
                time.sleep(0.1)
        raise Busy(f"{self.name}: changed under every attempt to take it ({CONFLICT_RETRIES}), skipped")

    def _release(self) -> None:
        if not self.released:
            with contextlib.suppress(LeaseLost):  # another run holds it now: its lease is not ours to drop
                self.fleet.patch_node(self.name, annotations={OWNER: None}, expect=self._still_ours)
            self.released = True


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _holder(annotation: str | None) -> tuple[str, float] | None:
    try:
        data = json.loads(annotation or "")
        return str(data["holder"]), float(data["expires"])
    except (ValueError, KeyError, TypeError):
        return None


def _alive(holder: tuple[str, float]) -> bool:
    """A holder is alive until its lease expires; on this host a dead process frees it at once."""
    name, expires = holder
    host, _, rest = name.partition("/")
    if host == socket.gethostname():
        pid = rest.partition("/")[0]
        try:
            os.kill(int(pid), 0)
        except (ValueError, ProcessLookupError):
            return False
        except PermissionError:
            return True
    return expires > time.time()
