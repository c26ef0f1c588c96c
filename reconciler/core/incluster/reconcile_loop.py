"""`gpudrv reconcile`'s loop, pure: every decision of a turn, behind the ports of
core/incluster/reconcile_ports.py.

A turn: take the inbox's messages (waiting up to half a second for the first, so an idle loop turns
twice a second and never spins), put a fetched commit in force (a commit whose matrix is invalid is
refused and the last good one stays), apply node news to the view of the fleet, follow the lease
(asked every turn), audit the nodes that changed or (when the commit, the contract or the resync
interval says so) the whole fleet, and, with --apply on the leader, start or reap one `gpudrv apply`
run at a time.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.contract.operator import Contract
from reconciler.core.incluster.fleetwatch import Change, FleetAudit, Kind
from reconciler.core.incluster.reconcile_ports import (
    AVAILABLE,
    CONFIG_NAME,
    INVALID,
    MISSING,
    CommitFetched,
    Event,
    Figures,
    Level,
    LoopSettings,
    NodeChanged,
    NodeNews,
    NodesListed,
    Ports,
    Run,
    Snapshot,
    StopRequested,
    Tally,
    Unreadable,
    Watched,
)
from reconciler.core.upgrades.upgrade import ALL_STATES

WAIT = 0.5  # seconds a turn waits for its first message
STALLED = 60.0  # unhealthy when the loop has not turned for this long
APPLY_GRACE = 20.0  # seconds a running apply gets to finish its step when the loop stops acting
CONTRACT_RETRY = 10.0  # seconds before a failed contract read is tried again (at most the resync)
LOGGED_CHANGES = 20  # per audit; past this many, a count
UPGRADE_STATES = [str(state) for state in ALL_STATES]
# `gpudrv apply`'s exit statuses (commands.OK, FINDINGS; apply_process.INTERRUPTED) as the metric names them.
RESULTS = {0: "ok", 1: "findings", 130: "interrupted"}


class Loop:
    def __init__(self, settings: LoopSettings, ports: Ports) -> None:
        self.settings, self.ports = settings, ports
        self.clock, self.output = ports.clock, ports.output
        self.stopping = False
        self.turned = self.clock.monotonic()
        self.snapshot: Snapshot | None = None
        self.contract: Contract | None = None
        self.fleet = FleetAudit()
        self.problems = 0  # the fleet's own problems, at the last full audit
        self.leading = False
        self.listed = False
        self.initial = True  # the first audit as leader: events already reported are not counted again
        self.generation = 0
        self.watching = False
        self.full_due = True
        self.next_resync = 0.0
        self.reported: dict[str, float] = {}  # node -> when its finding's event was last posted
        self.running: Run | None = None
        self.applied: str | None = None  # the commit the last apply ran at
        self.next_apply = 0.0

    # --- start and stop ------------------------------------------------------------------------------

    def run(self) -> None:
        """Turn until stopped, then stop acting."""
        try:
            while not self.stopping:
                self.turn()
        finally:
            self.stop_acting()

    def stop(self) -> None:
        """From the signal handler: no further step starts (the inbox's StopRequested wakes the loop)."""
        self.stopping = True

    # --- one turn ------------------------------------------------------------------------------------

    def turn(self) -> None:
        self.turned = self.clock.monotonic()
        changed: set[str] = set()
        for message in self.ports.inbox.take(WAIT):
            if isinstance(message, StopRequested):
                self.stopping = True
            if self.stopping:
                return
            if isinstance(message, CommitFetched):
                self._put_in_force(message.commit)
            elif isinstance(message, Watched) and message.generation == self.generation:
                changed |= self._view(message.news)
        # Asked every turn, not only on the lease's news: a lease not renewed within the renew
        # deadline stops the acting at once, even if the elector's thread were stuck.
        self._follow(self.ports.lease.is_leading())
        if not self.stopping:
            self._audit(changed)
            self._apply_step()

    def _follow(self, leading: bool) -> None:
        if leading and not self.leading:
            self.leading, self.listed, self.initial, self.full_due = True, False, True, True
            self.generation += 1
            self.fleet, self.problems = FleetAudit(), 0
            self.output.export(Figures(leader=True))
            self.ports.cluster.watch(self.generation)
            self.watching = True
            self.output.log(Level.INFO, "leading: watching GPU nodes")
        elif not leading and self.leading:
            self.output.log(Level.INFO, "not leading any more: stopped watching and auditing")
            self.stop_acting()

    def stop_acting(self) -> None:
        """Step down: no watch, no apply, and no per-node series (the new leader has them); a
        standby's figures are zero so that they do not outweigh the leader's in a max()."""
        self.generation += 1
        if self.running is not None:
            self._reap(self.running.interrupt(APPLY_GRACE))
        if self.watching:
            self.ports.cluster.unwatch()
            self.watching = False
        self.leading, self.listed = False, False
        self.output.export(Figures())
        self.fleet, self.problems = FleetAudit(), 0
        self.reported.clear()

    def _view(self, news: NodeNews) -> set[str]:
        """The watch's news applied to the view of the fleet: the nodes to audit again."""
        if isinstance(news, NodesListed):
            self.listed = True
            self.output.log(
                Level.INFO, f"listed {len(news.nodes)} GPU nodes (resourceVersion {news.version})"
            )
            return self.fleet.replace(news.nodes)
        if isinstance(news, NodeChanged):
            return {news.node.name} if self.fleet.upsert(news.node) else set()
        return {news.name} if self.fleet.remove(news.name) else set()

    # --- the commit in force -------------------------------------------------------------------------

    def _put_in_force(self, commit: str) -> None:
        if self.snapshot is not None and commit == self.snapshot.commit:
            return
        try:
            snapshot = self.ports.repository.load(commit)
        except Unreadable as exc:
            self.output.count(Tally.REJECTED)
            kept = self.snapshot.commit[:12] if self.snapshot else "no commit"
            self.output.log(
                Level.ERROR, f"commit {commit[:12]} not put in force: {exc}; {kept} stays in force"
            )
            if self.snapshot is not None:
                self.ports.repository.restore(self.snapshot.commit)
            return
        self.snapshot = snapshot
        self.output.in_force(snapshot)
        self.full_due = True
        self.output.log(
            Level.INFO,
            f"commit {commit[:12]} of {self.settings.branch} in force: "
            f"{snapshot.matrix} lists {len(snapshot.tags)} images",
        )

    # --- the audit -----------------------------------------------------------------------------------

    def _audit(self, changed: set[str]) -> None:
        if not (self.leading and self.listed and self.snapshot):
            return
        snapshot = self.snapshot
        full = self.full_due or self.clock.monotonic() >= self.next_resync
        if full:
            contract = self._read_contract(snapshot)
            if contract is None:
                return
            started = self.clock.monotonic()
            changes = self.fleet.audit_all(contract, snapshot.tags)
            self.problems = len(self.fleet.notes(contract))
            self.output.observe("fleet", self.clock.monotonic() - started)
            self.full_due, self.next_resync = False, self.clock.monotonic() + self.settings.resync
        elif changed and self.contract is not None:
            started = self.clock.monotonic()
            changes = self.fleet.audit(changed, self.contract, snapshot.tags)
            self.output.observe("nodes", self.clock.monotonic() - started)
        else:
            return
        self._report(changes, snapshot)
        if full:
            self._refresh_events(snapshot)
        self.output.export(self.figures())
        self.output.audited()
        self.initial = False

    def _read_contract(self, snapshot: Snapshot) -> Contract | None:
        """The driver contract in force, read again at every full audit; on failure the last one."""
        try:
            self.contract = self.ports.cluster.contract(snapshot.operator_version)
        except Unreadable as exc:
            self.output.count(Tally.AUDIT_ERRORS)
            retry = min(self.settings.resync, CONTRACT_RETRY)
            self.next_resync, self.full_due = self.clock.monotonic() + retry, False
            then = (
                "auditing with the last one read"
                if self.contract
                else f"no audit until then (retry in {retry:.0f}s)"
            )
            self.output.log(Level.ERROR, f"cannot read the GPU Operator's driver contract: {exc}; {then}")
        return self.contract

    def figures(self) -> Figures:
        """What the gauges show now."""
        if not self.leading:
            return Figures()
        return Figures(
            leader=True,
            gpu_nodes=len(self.fleet.nodes),
            missing=self.fleet.missing(),
            invalid=frozenset(self.fleet.invalid()),
            fleet_problems=self.problems,
            upgrade_states=self.fleet.upgrade_states(UPGRADE_STATES),
            next_missing=self.fleet.next_missing(),
        )

    # --- the Node events -----------------------------------------------------------------------------

    def _report(self, changes: list[Change], snapshot: Snapshot) -> None:
        for change in changes:
            event = self.event(change, snapshot)
            if event is not None:
                self.output.event(event)
                self.reported[change.node] = self.clock.monotonic()
            elif change.kind in (Kind.CLEARED, Kind.GONE):
                self.reported.pop(change.node, None)
        for change in changes[:LOGGED_CHANGES]:
            self.output.change(change)
        if len(changes) > LOGGED_CHANGES:
            self.output.log(Level.INFO, f"... and {len(changes) - LOGGED_CHANGES} more node changes")

    def event(self, change: Change, snapshot: Snapshot) -> Event | None:
        """The Node event a change calls for: problems are warnings, a cleared one is news."""
        recount = not self.initial
        where = f"{snapshot.matrix} at {snapshot.commit[:12]}"
        finding = change.finding
        if change.kind is Kind.MISSING and finding is not None:
            return Event(change.node, MISSING, finding.detail, where, finding, recount=recount)
        if change.kind is Kind.INVALID and finding is not None:
            return Event(change.node, INVALID, finding.detail, where, finding, recount=recount)
        if change.kind is Kind.CLEARED:
            return Event(change.node, AVAILABLE, change.tag or "", where, warning=False)
        return None

    def _refresh_events(self, snapshot: Snapshot) -> None:
        """Problems that last: their events are counted again once per event refresh, so they stay
        visible (an event expires an hour after its last write) without one per loop."""
        due = self.clock.monotonic() - self.settings.event_refresh
        for name, finding in sorted(self.fleet.findings.items()):
            if self.reported.get(name, 0.0) <= due:
                event = self.event(Change(name, Kind(finding.status.lower()), finding, finding), snapshot)
                if event is not None:
                    self.output.event(replace(event, recount=False))
                    self.reported[name] = self.clock.monotonic()

    # --- apply (opt-in) ------------------------------------------------------------------------------

    def _apply_step(self) -> None:
        applier = self.ports.applier
        if applier is None:
            return
        if self.running is not None:
            status = self.running.poll()
            if status is not None:
                self._reap(status)
            return
        snapshot = self.snapshot
        if not (self.leading and self.listed and snapshot):
            return
        if snapshot.commit == self.applied and self.clock.monotonic() < self.next_apply:
            return
        self.applied, self.next_apply = snapshot.commit, self.clock.monotonic() + self.settings.resync
        if snapshot.fleet is None:
            self.output.log(
                Level.ERROR, f"--apply: no desired fleet: pass --from DIR or set fleet: in {CONFIG_NAME}"
            )
            return
        try:
            self.running = applier.start(snapshot)
        except Unreadable as exc:
            self.output.log(Level.ERROR, f"--apply: {exc}")

    def _reap(self, status: int) -> None:
        result = RESULTS.get(status, "error")
        self.output.count(Tally.APPLY_RUNS, result)
        commit = self.running.commit[:12] if self.running else "?"
        self.output.log(Level.INFO, f"apply at {commit} ended: exit {status} ({result})")
        self.running = None

    # --- probes --------------------------------------------------------------------------------------

    def health(self, threads: dict[str, bool]) -> tuple[bool, str]:
        """/healthz: the loop turns, and the threads it was given (name -> alive) run."""
        stalled = self.clock.monotonic() - self.turned
        if stalled > STALLED:
            return False, f"the loop has not turned for {stalled:.0f}s"
        if dead := sorted(name for name, alive in threads.items() if not alive):
            return False, f"thread {', '.join(dead)} died"
        return True, "the loop turns"

    def readiness(self) -> tuple[bool, str]:
        """/readyz: a commit in force, and (when leading) the nodes listed."""
        if self.snapshot is None:
            return False, "no commit of the fleet repository in force yet"
        if self.leading and not self.listed:
            return False, "leading, listing the GPU nodes"
        role = "leading" if self.leading else "standby"
        return True, f"{role}, commit {self.snapshot.commit[:12]} in force"
