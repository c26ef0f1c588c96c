"""`gpudrv reconcile`: the in-cluster half of gpudrv, a loop that pulls git and watches the nodes.

Threads feed one inbox and the loop, in the main thread, does one step at a time:

    git-sync       fetch the branch every --interval, or on POST /sync      -> Fetched(commit)
    node-watch     list + watch GPU nodes (leader only)                     -> Listed / Changed / Deleted
    leader-elect   campaign for the Lease                                   -> Leadership
    node-events    write Node events, deduplicated and rate limited         <- NodeEvent
    http           /metrics, /healthz, /readyz, POST /sync

A step is: put a fetched commit in force (check it out, load its matrix and gpudrv.yaml; a commit
whose matrix is invalid is refused and the last good one stays), apply node changes to the view of
the fleet and audit the nodes that changed, audit the whole fleet when the matrix, the contract or
the resync interval says so, and (with --apply, on the leader) start or reap a `gpudrv apply` run.
SIGTERM sets a flag the loop reads between steps: it interrupts a running apply, stops the watch,
releases the lease and exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from reconciler.adapters import git, kube
from reconciler.adapters.cluster import Cluster, gpu_operator, reviews
from reconciler.adapters.cluster.events import EventSink, NodeEvent
from reconciler.adapters.cluster.lease import Elector, LeaseLock
from reconciler.adapters.cluster.node_watch import Changed, Deleted, Listed, NodeWatch
from reconciler.adapters.files import config, operator_contract
from reconciler.adapters.git.sync import Fetched, GitSync, Source
from reconciler.adapters.serving.apply_process import INTERRUPTED, ApplyProcess
from reconciler.adapters.serving.metrics import Metrics, Server
from reconciler.adapters.sources import valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core import access
from reconciler.core.audit import Status, audit_wants
from reconciler.core.election import Timing
from reconciler.core.fleetwatch import Change, FleetAudit, Kind
from reconciler.core.operator import Contract
from reconciler.core.upgrade import ALL_STATES
from reconciler.errors import GpudrvError
from reconciler.render import audit as audit_text
from reconciler.render import document
from reconciler.render import reconcile as show

log = logging.getLogger("gpudrv.reconcile")

DEFAULT_MATRIX = "matrix/support-matrix.csv"
CONFIG_NAME = "gpudrv.yaml"
STALLED = 60.0  # /healthz fails when the loop has not turned for this long
APPLY_GRACE = 20.0  # on SIGTERM, seconds a running apply gets to finish its step
LOGGED_CHANGES = 20  # per audit; past this many, a count
MISSING = "DriverImageMissing"
AVAILABLE = "DriverImageAvailable"
INVALID = "DriverTagInvalid"
UPGRADE_STATES = [str(state) for state in ALL_STATES]


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ApplyOptions:
    max_parallel: int = 1
    drain_timeout: float = 300.0
    installer: str = "labels"
    install_timeout: float = 600.0


@dataclass(frozen=True)
class Settings:
    source: Source
    workdir: Path
    interval: float = 60.0
    resync: float = 300.0
    matrix: str | None = None  # in the repository; None: gpudrv.yaml's, else DEFAULT_MATRIX
    fleet: str | None = None  # in the repository, for --apply; None: gpudrv.yaml's
    operator_version: str | None = None  # None: gpudrv.yaml's, else the running operator's
    listen: str = ":8080"
    lease_namespace: str | None = "default"  # None: no leader election, this replica always acts
    lease_name: str = "gpudrv-reconcile"
    identity: str = field(default_factory=default_identity)
    timing: Timing = field(default_factory=Timing)
    event_refresh: float = 1800.0
    apply: ApplyOptions | None = None  # None: audit only


def default_lease_namespace() -> str:
    """$POD_NAMESPACE, else the service account's namespace in a pod, else default."""
    if namespace := os.environ.get("POD_NAMESPACE"):
        return namespace
    mounted = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    with contextlib.suppress(OSError):
        return mounted.read_text().strip() or "default"
    return "default"


# --- what is in force ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A commit put in force: its valid matrix, and what its gpudrv.yaml says."""

    commit: str
    matrix: str  # in the repository
    tags: frozenset[str]
    fleet: str | None
    operator_version: str | None
    committed: int


def load_snapshot(checkout: Path, commit: str, settings: Settings) -> Snapshot:
    """The checked-out commit's matrix (refused when invalid) and gpudrv.yaml (when present)."""
    found = checkout / CONFIG_NAME
    settings_file = config.load(str(found)) if found.is_file() else config.Config()
    matrix = settings.matrix or _inside(checkout, settings_file.matrix) or DEFAULT_MATRIX
    tags = valid_matrix(_within(checkout, matrix)).tags()
    fleet = settings.fleet or _inside(checkout, settings_file.fleet)
    version = settings.operator_version or settings_file.operator_version
    return Snapshot(commit, matrix, tags, fleet, version, git.commit_time(checkout, commit))


def _inside(checkout: Path, path: Path | None) -> str | None:
    return None if path is None else Path(os.path.relpath(path, checkout)).as_posix()


def _within(checkout: Path, relative: str) -> Path:
    path = (checkout / relative).resolve()
    if not path.is_relative_to(checkout.resolve()):
        raise GpudrvError(f"{relative}: outside the repository")
    return path


# --- the loop ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    generation: int  # messages of an older watch (before a step-down) are dropped
    message: Listed | Changed | Deleted


@dataclass(frozen=True)
class Leadership:
    """The elector's news: wakes the loop, which asks the elector itself."""

    leading: bool


class Stop:
    pass


Message = Fetched | Watched | Leadership | Stop


class Reconciler:
    def __init__(self, settings: Settings, options: kube.Options) -> None:
        self.settings, self.options = settings, options
        self.inbox: queue.Queue[Message] = queue.Queue()
        self.metrics = Metrics()
        self.stopping = threading.Event()
        self.turned = time.monotonic()
        self.checkout = settings.workdir / "repo"
        self.snapshot: Snapshot | None = None
        self.contract: Contract | None = None
        self.fleet = FleetAudit()
        self.leading = False
        self.listed = False
        self.initial = True  # the first audit as leader: events already reported are not counted again
        self.generation = 0
        self.full_due = True
        self.next_resync = 0.0
        self.reported: dict[str, float] = {}  # node -> when its finding's event was last posted
        self.watch: NodeWatch | None = None
        self.applying: ApplyProcess | None = None
        self.applied: str | None = None  # the commit the last apply ran at
        self.next_apply = 0.0
        self.elector: Elector | None = None

    # --- start and stop ------------------------------------------------------------------------------

    def run(self) -> int:
        self._signals()
        self.gateway = kube.connect(self.options)
        self._check_access()
        self.server = Server(self.settings.listen, self.metrics, self._healthy, self._ready, self._sync_now)
        self.server.start()
        log.info("serving /metrics, /healthz, /readyz and POST /sync on %s", self.server.address)
        self.sync = GitSync(
            self.settings.source, self.checkout, self.settings.interval, self.inbox.put, self._synced
        ).start()
        self.events = EventSink(
            kube.connect(self.options), self.settings.event_refresh, self._event_counted
        ).start()
        if self.settings.lease_namespace is not None:
            lock = LeaseLock(
                kube.connect(self.options), self.settings.lease_namespace, self.settings.lease_name
            )
            self.elector = Elector(
                lock, self.settings.identity, self.settings.timing, lambda on: self.inbox.put(Leadership(on))
            ).start()
            log.info(
                "candidate %s for the lease %s/%s",
                self.settings.identity,
                self.settings.lease_namespace,
                self.settings.lease_name,
            )
        try:
            while not self.stopping.is_set():
                self._turn()
        finally:
            self._shutdown()
        return OK

    def _signals(self) -> None:
        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("%s: stopping after this step", signal.Signals(signum).name)
            self.stopping.set()
            self.inbox.put(Stop())

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def _shutdown(self) -> None:
        self._stop_acting()
        self.events.stop(timeout=5)
        if self.elector is not None:
            self.elector.stop(release=True)
        self.sync.stop()
        self.server.stop()
        log.info("stopped")

    # --- one step ------------------------------------------------------------------------------------

    def _turn(self) -> None:
        self.turned = time.monotonic()
        try:
            batch = [self.inbox.get(timeout=0.5)]
        except queue.Empty:
            batch = []
        while True:
            try:
                batch.append(self.inbox.get_nowait())
            except queue.Empty:
                break
        changed: set[str] = set()
        for message in batch:
            if self.stopping.is_set():
                return
            if isinstance(message, Fetched):
                self._put_in_force(message.commit)
            elif isinstance(message, Watched) and message.generation == self.generation:
                changed |= self._view(message.message)
        # Asked every turn, not only on the elector's news: a lease not renewed within the renew
        # deadline stops the acting at once, even if the elector's thread were stuck.
        self._follow(self.elector.is_leading() if self.elector is not None else True)
        if not self.stopping.is_set():
            self._audit(changed)
            self._apply_step()

    def _follow(self, leading: bool) -> None:
        if leading and not self.leading:
            self.leading, self.listed, self.initial, self.full_due = True, False, True, True
            self.metrics.leader.set(1)
            self.generation += 1
            generation = self.generation
            self.fleet = FleetAudit()
            self.watch = NodeWatch(
                kube.connect(self.options),
                lambda message: self.inbox.put(Watched(generation, message)),
                lambda reason: self.metrics.watch_restarts.labels(reason).inc(),
            ).start()
            log.info("leading: watching GPU nodes")
        elif not leading and self.leading:
            log.info("not leading any more: stopped watching and auditing")
            self._stop_acting()

    def _stop_acting(self) -> None:
        """Step down: no watch, no apply, and no per-node series (the new leader has them)."""
        self.generation += 1
        if self.applying is not None:
            self._reap(self.applying.interrupt(APPLY_GRACE))
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        self.leading, self.listed = False, False
        self.metrics.leader.set(0)
        self.metrics.missing.clear()
        self.metrics.invalid.clear()
        self.metrics.upgrade_states.clear()
        for gauge in (self.metrics.gpu_nodes, self.metrics.missing_nodes, self.metrics.fleet_problems):
            gauge.set(0)  # a standby's figures must not outweigh the leader's in a max()
        self.fleet = FleetAudit()
        self.reported.clear()

    def _view(self, message: Listed | Changed | Deleted) -> set[str]:
        """The watch's news applied to the view of the fleet: the nodes to audit again."""
        if isinstance(message, Listed):
            self.listed = True
            log.info("listed %d GPU nodes (resourceVersion %s)", len(message.nodes), message.version)
            return self.fleet.replace(message.nodes)
        if isinstance(message, Changed):
            return {message.node.name} if self.fleet.upsert(message.node) else set()
        return {message.name} if self.fleet.remove(message.name) else set()

    # --- git -----------------------------------------------------------------------------------------

    def _synced(self, ok: bool, error: str | None) -> None:
        """From the git thread, after every fetch."""
        self.metrics.sync_up.set(1 if ok else 0)
        if ok:
            self.metrics.last_sync.set_to_current_time()
        else:
            self.metrics.sync_failures.inc()

    def _sync_now(self) -> None:
        self.sync.trigger()

    def _put_in_force(self, commit: str) -> None:
        if self.snapshot is not None and commit == self.snapshot.commit:
            return
        try:
            git.check_out(self.checkout, commit)
            snapshot = load_snapshot(self.checkout, commit, self.settings)
        except GpudrvError as exc:
            self.metrics.rejected.inc()
            kept = self.snapshot.commit[:12] if self.snapshot else "no commit"
            log.error("commit %s not put in force: %s; %s stays in force", commit[:12], exc, kept)
            if self.snapshot is not None:
                with contextlib.suppress(GpudrvError):
                    git.check_out(self.checkout, self.snapshot.commit)
            return
        self.snapshot = snapshot
        source = self.settings.source
        self.metrics.commit.info(
            {"commit": commit, "branch": source.branch, "repository": git.redact(source.url)}
        )
        self.metrics.commit_time.set(snapshot.committed)
        self.full_due = True
        log.info(
            "commit %s of %s in force: %s lists %d images",
            commit[:12],
            source.branch,
            snapshot.matrix,
            len(snapshot.tags),
        )

    # --- the audit -----------------------------------------------------------------------------------

    def _audit(self, changed: set[str]) -> None:
        if not (self.leading and self.listed and self.snapshot):
            return
        snapshot = self.snapshot
        full = self.full_due or time.monotonic() >= self.next_resync
        if full:
            contract = self._read_contract(snapshot)
            if contract is None:
                return
            started = time.perf_counter()
            changes = self.fleet.audit_all(contract, snapshot.tags)
            self.metrics.fleet_problems.set(len(self.fleet.notes(contract)))
            self.metrics.audit_seconds.labels("fleet").observe(time.perf_counter() - started)
            self.full_due, self.next_resync = False, time.monotonic() + self.settings.resync
        elif changed and self.contract is not None:
            started = time.perf_counter()
            changes = self.fleet.audit(changed, self.contract, snapshot.tags)
            self.metrics.audit_seconds.labels("nodes").observe(time.perf_counter() - started)
        else:
            return
        self._report(changes, snapshot)
        if full:
            self._refresh_events(snapshot)
        self._figures()
        self.metrics.last_audit.set_to_current_time()
        self.initial = False

    def _read_contract(self, snapshot: Snapshot) -> Contract | None:
        """The driver contract in force, read again at every full audit; on failure the last one."""
        try:
            self.contract = gpu_operator.live_contract(self.gateway, snapshot.operator_version)
        except (GpudrvError, kube.ApiError, kube.Unreachable) as exc:
            self.metrics.audit_errors.inc()
            retry = min(self.settings.resync, 10.0)
            self.next_resync, self.full_due = time.monotonic() + retry, False
            then = (
                "auditing with the last one read"
                if self.contract
                else f"no audit until then (retry in {retry:.0f}s)"
            )
            log.error("cannot read the GPU Operator's driver contract: %s; %s", exc, then)
        return self.contract

    def _report(self, changes: list[Change], snapshot: Snapshot) -> None:
        for change in changes:
            self._series(change)
            event = self._event(change, snapshot)
            if event is not None:
                self.events.post(event)
                self.reported[change.node] = time.monotonic()
            elif change.kind in (Kind.CLEARED, Kind.GONE):
                self.reported.pop(change.node, None)
        for change in changes[:LOGGED_CHANGES]:
            log.info("%s", show.change_line(change))
        if len(changes) > LOGGED_CHANGES:
            log.info("... and %d more node changes", len(changes) - LOGGED_CHANGES)

    def _series(self, change: Change) -> None:
        before = change.before
        if before is not None:
            with contextlib.suppress(KeyError):
                if before.status is Status.MISSING:
                    self.metrics.missing.remove(change.node, before.detail)
                else:
                    self.metrics.invalid.remove(change.node)
        if change.kind is Kind.MISSING and change.finding is not None:
            self.metrics.missing.labels(change.node, change.finding.detail).set(1)
        elif change.kind is Kind.INVALID:
            self.metrics.invalid.labels(change.node).set(1)

    def _event(self, change: Change, snapshot: Snapshot) -> NodeEvent | None:
        recount = not self.initial
        where = f"{snapshot.matrix} at {snapshot.commit[:12]}"
        if change.kind is Kind.MISSING and change.finding is not None:
            return NodeEvent(change.node, MISSING, show.missing_message(change.finding, where),
                             change.finding.detail, recount=recount)  # fmt: skip
        if change.kind is Kind.INVALID and change.finding is not None:
            return NodeEvent(change.node, INVALID, show.invalid_message(change.finding),
                             change.finding.detail, recount=recount)  # fmt: skip
        if change.kind is Kind.CLEARED:
            tag = change.tag or ""
            return NodeEvent(change.node, AVAILABLE, show.available_message(tag, where), tag, warning=False)
        return None

    def _refresh_events(self, snapshot: Snapshot) -> None:
        """Problems that last: their events are counted again once per --event-refresh, so they
        stay visible (an event expires an hour after its last write) without one per loop."""
        due = time.monotonic() - self.settings.event_refresh
        for name, finding in sorted(self.fleet.findings.items()):
            if self.reported.get(name, 0.0) <= due:
                change = Change(name, Kind(finding.status.lower()), finding, finding)
                event = self._event(change, snapshot)
                if event is not None:
                    self.events.post(
                        NodeEvent(event.node, event.reason, event.message, event.key, recount=False)
                    )
                    self.reported[name] = time.monotonic()

    def _figures(self) -> None:
        missing = self.fleet.missing()
        self.metrics.gpu_nodes.set(len(self.fleet.nodes))
        self.metrics.missing_nodes.set(len(missing))
        for state, count in self.fleet.upgrade_states(UPGRADE_STATES).items():
            self.metrics.upgrade_states.labels(state).set(count)

    def _event_counted(self, reason: str, result: str) -> None:
        self.metrics.events.labels(reason, result).inc()

    # --- apply (opt-in) ------------------------------------------------------------------------------

    def _apply_step(self) -> None:
        options = self.settings.apply
        if options is None:
            return
        if self.applying is not None:
            status = self.applying.poll()
            if status is not None:
                self._reap(status)
            return
        snapshot = self.snapshot
        if not (self.leading and self.listed and snapshot):
            return
        if snapshot.commit == self.applied and time.monotonic() < self.next_apply:
            return
        self.applied, self.next_apply = snapshot.commit, time.monotonic() + self.settings.resync
        if snapshot.fleet is None:
            log.error("--apply: no desired fleet: pass --from DIR or set fleet: in %s", CONFIG_NAME)
            return
        tree = self.settings.workdir / "apply"
        try:
            with contextlib.suppress(GpudrvError):
                git.remove_worktree(self.checkout, tree)
            shutil.rmtree(tree, ignore_errors=True)
            git.add_worktree(self.checkout, tree, snapshot.commit)
        except GpudrvError as exc:
            log.error("--apply: %s", exc)
            return
        arguments = [
            "--from", snapshot.fleet, "--matrix", snapshot.matrix, "--merged-ref", snapshot.commit,
            "--max-parallel", str(options.max_parallel), "--drain-timeout", f"{options.drain_timeout:g}",
            "--installer", options.installer, "--timeout", f"{options.install_timeout:g}",
            *(["--kubeconfig", self.options.kubeconfig] if self.options.kubeconfig else []),
            *(["--context", self.options.context] if self.options.context else []),
        ]  # fmt: skip
        self.applying = ApplyProcess(arguments, tree, snapshot.commit)

    def _reap(self, status: int) -> None:
        result = {OK: "ok", FINDINGS: "findings", INTERRUPTED: "interrupted"}.get(status, "error")
        self.metrics.apply_runs.labels(result).inc()
        log.info(
            "apply at %s ended: exit %d (%s)",
            self.applying.commit[:12] if self.applying else "?",
            status,
            result,
        )
        self.applying = None

    # --- probes and access ---------------------------------------------------------------------------

    def _healthy(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self.turned
        if stalled > STALLED:
            return False, f"the loop has not turned for {stalled:.0f}s"
        threads = {"git-sync": self.sync.alive(), "node-events": self.events.alive()}
        if self.elector is not None:
            threads["leader-election"] = self.elector.alive()
        if self.watch is not None:
            threads["node-watch"] = self.watch.alive()
        if dead := sorted(name for name, alive in threads.items() if not alive):
            return False, f"thread {', '.join(dead)} died"
        return True, "the loop turns"

    def _ready(self) -> tuple[bool, str]:
        if self.snapshot is None:
            return False, "no commit of the fleet repository in force yet"
        if self.leading and not self.listed:
            return False, "leading, listing the GPU nodes"
        role = "leading" if self.leading else "standby"
        return True, f"{role}, commit {self.snapshot.commit[:12]} in force"

    def _check_access(self) -> None:
        """Say at start what the roles lack (and what they grant that is not needed)."""
        try:
            report = check(self.gateway, self.settings)
        except (GpudrvError, kube.ApiError, kube.Unreachable) as exc:
            log.warning("could not check this identity's access: %s", exc)
            return
        for answer in report.missing:
            log.error(
                "not allowed to %s (%s): grant it (deploy/ has the roles)",
                answer.access.text(),
                answer.access.why,
            )
        for answer in report.excess:
            log.warning("allowed to %s, which this mode never needs: narrow the roles", answer.access.text())


# --- check access ------------------------------------------------------------------------------------


def check(gateway: kube.Gateway, settings: Settings) -> reviews.Report:
    needs = access.needs(settings.lease_namespace, settings.lease_name, settings.apply is not None)
    return reviews.report(gateway, needs, access.excess(settings.apply is not None))


def check_access(settings: Settings, options: kube.Options, output: Output) -> int:
    report = check(kube.connect(options), settings)
    print(document.text(show.access_json(report), output) if output.structured else show.access_text(report))
    return OK if not report.missing and not report.excess else FINDINGS


# --- once (the CronJob) ------------------------------------------------------------------------------


def once(settings: Settings, options: kube.Options) -> int:
    """Fetch, audit every GPU node, write the events, print the audit; exit 0 OK, 1 findings."""
    sync = GitSync(settings.source, settings.workdir / "repo", settings.interval, lambda fetched: None)
    commit = sync.fetch_once()
    checkout = settings.workdir / "repo"
    git.check_out(checkout, commit)
    snapshot = load_snapshot(checkout, commit, settings)
    gateway = kube.connect(options)
    contract = gpu_operator.live_contract(gateway, snapshot.operator_version)
    result = audit_wants(operator_contract.wants(contract, Cluster(gateway).gpu_nodes()), snapshot.tags)
    sink = EventSink(gateway, settings.event_refresh).start()
    where = f"{snapshot.matrix} at {commit[:12]}"
    for finding in result.findings:
        missing = finding.status is Status.MISSING
        sink.post(NodeEvent(
            finding.node,
            MISSING if missing else INVALID,
            show.missing_message(finding, where) if missing else show.invalid_message(finding),
            finding.detail,
            recount=False,
        ))  # fmt: skip
    sink.stop(timeout=60)
    print(f"commit {commit[:12]} of {settings.source.branch}: {len(result.audited)} GPU nodes")
    print(audit_text.as_text(result))
    return OK if result.ok else FINDINGS


def log_to_stderr(level: int, fmt: str) -> None:
    """gpudrv's own loggers (gpudrv.*) to stderr, one line per record; the root logger and the
    libraries' loggers are left as the CLI set them (quiet)."""
    own = logging.getLogger("gpudrv")
    for handler in own.handlers[:]:
        own.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    own.addHandler(handler)
    own.setLevel(level)
    own.propagate = False


def run(settings: Settings, options: kube.Options) -> int:
    log_to_stderr(logging.INFO, "%(asctime)s %(levelname)s %(name)s: %(message)s")
    if (problem := settings.timing.problem()) is not None:
        raise GpudrvError(problem)
    if (problem := settings.source.credentials.problem(settings.source.url)) is not None:
        raise GpudrvError(problem)
    return Reconciler(settings, options).run()


def run_once(settings: Settings, options: kube.Options) -> int:
    if (problem := settings.source.credentials.problem(settings.source.url)) is not None:
        raise GpudrvError(problem)
    log_to_stderr(logging.WARNING, "%(levelname)s %(name)s: %(message)s")
    return once(settings, options)
