"""One node through its remaining GPU Operator states (core/lab/executor.py gives the rules: the node's
state label is the only memory, a step's own change is written with the next state's label).

Every read and write goes through the executor's `UpgradeFleet` port, every clock and wait through
its `Host`; the fleet in rounds is core/lab/fleet_upgrade.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ClassVar

from reconciler.core.base.duration import show
from reconciler.core.images import tags
from reconciler.core.lab.executor import (
    CONFLICT_RETRIES,
    DONE_ANNOTATIONS,
    LEASE_SECONDS,
    WAIT_SECONDS,
    Busy,
    Host,
    Installer,
    Lease,
    LeaseLost,
    Options,
    Reporter,
    StepFailed,
    UpgradeFleet,
    Writes,
    failure,
    initial_annotations,
    is_driver_pod,
    lease_free,
    lease_text,
    parse_lease,
)
from reconciler.core.upgrades import upgrade
from reconciler.core.upgrades.budget import Role
from reconciler.core.upgrades.upgrade import (
    OWNER,
    Images,
    LiveNode,
    NodePlan,
    RunResult,
    State,
)


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
