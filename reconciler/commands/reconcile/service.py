"""`gpudrv reconcile` running: the threads, the HTTP server, and the loop's ports on them.

The loop (core/incluster/reconcile_loop.py, pure) reads one inbox in the main thread and acts through
the ports
of core/incluster/reconcile_ports.py, implemented here on git, the cluster, Prometheus and logging:

    git-sync       fetch the branch every --interval, or on POST /sync      -> CommitFetched
    node-watch     list + watch GPU nodes (leader only)                     -> Watched(news)
    leader-elect   campaign for the Lease                                   -> LeaseNews
    node-events    write Node events, deduplicated and rate limited         <- Exporter.event
    http           /metrics, /healthz, /readyz, POST /sync

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
import time
from types import FrameType

from reconciler.adapters import desired, git, kube
from reconciler.adapters.cluster.events import EventSink, NodeEvent
from reconciler.adapters.cluster.lease import Elector, LeaseLock
from reconciler.adapters.cluster.node_watch import Changed, Deleted, Listed, NodeWatch
from reconciler.adapters.git.sync import GitSync, Source
from reconciler.adapters.serving.apply_process import ApplyProcess
from reconciler.adapters.serving.metrics import Metrics, Server
from reconciler.adapters.serving.sync_endpoint import SyncEndpoint, secret_files
from reconciler.commands import OK
from reconciler.commands.reconcile import Settings, apply_arguments, check, load_snapshot
from reconciler.core.base.throttle import Throttled
from reconciler.core.contract.operator import Contract
from reconciler.core.incluster.fleetwatch import Change
from reconciler.core.incluster.reconcile_loop import Loop
from reconciler.core.incluster.reconcile_ports import (
    CommitFetched,
    Event,
    Figures,
    LeaseNews,
    Level,
    LoopSettings,
    Message,
    NodeChanged,
    NodeDeleted,
    NodeNews,
    NodesListed,
    Ports,
    Snapshot,
    StopRequested,
    Tally,
    Unreadable,
    Watched,
)
from reconciler.errors import GpudrvError
from reconciler.render.reconcile import change_line, event_message

log = logging.getLogger("gpudrv.reconcile")


# --- the loop's ports on git, the cluster, Prometheus and logging --------------------------------------


class QueueInbox:
    def __init__(self) -> None:
        self.queue: queue.Queue[Message] = queue.Queue()

    def put(self, message: Message) -> None:
        self.queue.put(message)

    def take(self, wait: float) -> list[Message]:
        try:
            batch = [self.queue.get(timeout=wait)]
        except queue.Empty:
            return []
        while True:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                return batch


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()


class Checkout:
    """The fleet repository's clone: a commit checked out and read."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.path = settings, settings.workdir / "repo"

    def load(self, commit: str) -> Snapshot:
        try:
            git.check_out(self.path, commit)
            return load_snapshot(self.path, commit, self.settings)
        except GpudrvError as exc:
            raise Unreadable(str(exc)) from exc

    def restore(self, commit: str) -> None:
        with contextlib.suppress(GpudrvError):
            git.check_out(self.path, commit)


def connected(options: kube.Options, metrics: Metrics) -> kube.Gateway:
    """A client whose waits the API server asked for are logged, one line each, and counted."""
    gateway = kube.connect(options)

    def waited(asked: Throttled) -> None:
        metrics.api_waits.labels(str(asked.status)).inc()
        log.warning("waiting for the cluster: %s", asked.shown())

    gateway.on_throttle = waited
    return gateway


def node_news(message: Listed | Changed | Deleted) -> NodeNews:
    if isinstance(message, Listed):
        return NodesListed(message.nodes, message.version)
    if isinstance(message, Changed):
        return NodeChanged(message.node)
    return NodeDeleted(message.name)


class LiveCluster:
    """The contract read through the gateway; the GPU nodes through a NodeWatch posting to the inbox."""

    def __init__(
        self, gateway: kube.Gateway, options: kube.Options, inbox: QueueInbox, metrics: Metrics
    ) -> None:
        self.gateway, self.options, self.inbox, self.metrics = gateway, options, inbox, metrics
        self.watcher: NodeWatch | None = None

    def contract(self, operator_version: str | None) -> Contract:
        try:
            return desired.from_cluster(self.gateway, desired.Pins(flag=operator_version)).contract
        except (GpudrvError, kube.ApiError, kube.Unreachable) as exc:
            raise Unreadable(str(exc)) from exc

    def watch(self, generation: int) -> None:
        self.watcher = NodeWatch(
            connected(self.options, self.metrics),
            lambda message: self.inbox.put(Watched(generation, node_news(message))),
            lambda reason: self.metrics.watch_restarts.labels(reason).inc(),
        ).start()

    def unwatch(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None


class AlwaysLeading:
    """No leader election (--no-leader-election): this replica always acts."""

    def is_leading(self) -> bool:
        return True


class Worktrees:
    """`gpudrv apply` as a child process, in a fresh worktree of the commit in force."""

    def __init__(self, settings: Settings, options: kube.Options) -> None:
        self.settings, self.options = settings, options

    def start(self, snapshot: Snapshot) -> ApplyProcess:
        checkout, tree = self.settings.workdir / "repo", self.settings.workdir / "apply"
        try:
            with contextlib.suppress(GpudrvError):
                git.remove_worktree(checkout, tree)
            shutil.rmtree(tree, ignore_errors=True)
            git.add_worktree(checkout, tree, snapshot.commit)
        except GpudrvError as exc:
            raise Unreadable(str(exc)) from exc
        return ApplyProcess(
            apply_arguments(snapshot, self.settings, self.options, os.environ.get("KUBECONFIG")),
            tree,
            snapshot.commit,
        )


class Exporter:
    """The loop's output: log lines, the Prometheus series, and Node events through the sink."""

    def __init__(self, metrics: Metrics, events: EventSink, source: Source) -> None:
        self.metrics, self.events, self.source = metrics, events, source
        self.shown = Figures()

    def log(self, level: Level, text: str) -> None:
        log.log(level, "%s", text)

    def change(self, change: Change) -> None:
        log.info("%s", change_line(change))

    def event(self, event: Event) -> None:
        message = event_message(event)
        self.events.post(NodeEvent(event.node, event.reason, message, event.key,
                                   warning=event.warning, recount=event.recount))  # fmt: skip

    def count(self, tally: Tally, label: str | None = None) -> None:
        metrics = self.metrics
        if tally is Tally.APPLY_RUNS:
            metrics.apply_runs.labels(label).inc()
        else:
            (metrics.audit_errors if tally is Tally.AUDIT_ERRORS else metrics.rejected).inc()

    def observe(self, scope: str, seconds: float) -> None:
        self.metrics.audit_seconds.labels(scope).observe(seconds)

    def export(self, figures: Figures) -> None:
        """The gauges to these figures; a series is removed only when it is no longer true."""
        metrics, shown = self.metrics, self.shown
        metrics.leader.set(1 if figures.leader else 0)
        for node, tag in shown.missing.items():
            if figures.missing.get(node) != tag:
                metrics.missing.remove(node, tag)
        for node, (kernel, tag) in shown.next_missing.items():
            if figures.next_missing.get(node) != (kernel, tag):
                metrics.next_missing.remove(node, kernel, tag)
        for node in shown.invalid - figures.invalid:
            metrics.invalid.remove(node)
        for node, tag in figures.missing.items():
            metrics.missing.labels(node, tag).set(1)
        for node in figures.invalid:
            metrics.invalid.labels(node).set(1)
        for node, (kernel, tag) in figures.next_missing.items():
            metrics.next_missing.labels(node, kernel, tag).set(1)
        if not figures.upgrade_states:
            metrics.upgrade_states.clear()
        for state, count in figures.upgrade_states.items():
            metrics.upgrade_states.labels(state).set(count)
        metrics.gpu_nodes.set(figures.gpu_nodes)
        metrics.missing_nodes.set(len(figures.missing))
        metrics.fleet_problems.set(figures.fleet_problems)
        self.shown = figures

    def in_force(self, snapshot: Snapshot) -> None:
        repository = git.redact(self.source.url)
        self.metrics.commit.info(
            {"commit": snapshot.commit, "branch": self.source.branch, "repository": repository}
        )
        self.metrics.commit_time.set(snapshot.committed)

    def audited(self) -> None:
        self.metrics.last_audit.set_to_current_time()


# --- the wiring ----------------------------------------------------------------------------------------


class Service:
    """The threads and the HTTP server around the loop (core/incluster/reconcile_loop.py), started and
    stopped."""

    def __init__(self, settings: Settings, options: kube.Options) -> None:
        self.settings, self.options = settings, options
        self.inbox = QueueInbox()
        self.metrics = Metrics()
        self.loop: Loop | None = None
        self.stopping = False

    def run(self) -> int:
        settings, options, inbox, metrics = self.settings, self.options, self.inbox, self.metrics
        self._signals()
        gateway = connected(options, metrics)
        self._check_access(gateway)
        self.cluster = LiveCluster(gateway, options, inbox, metrics)
        self.sync = GitSync(
            settings.source,
            settings.workdir / "repo",
            settings.interval,
            lambda fetched: inbox.put(CommitFetched(fetched.commit)),
            self._synced,
        )
        counted = lambda reason, result: metrics.events.labels(reason, result).inc()  # noqa: E731
        self.events = EventSink(connected(options, metrics), settings.event_refresh, counted)
        self.elector = self._elector()
        applier = Worktrees(settings, options) if settings.apply is not None else None
        ports = Ports(SystemClock(), inbox, Checkout(settings), self.cluster, self.elector or AlwaysLeading(),
                      Exporter(metrics, self.events, settings.source), applier)  # fmt: skip
        self.loop = loop = Loop(
            LoopSettings(settings.source.branch, settings.resync, settings.event_refresh), ports
        )
        if self.stopping:
            loop.stop()
        endpoint = SyncEndpoint(
            self.sync.trigger,
            secret_files(settings.sync_secret_file, settings.sync_token_file),
            lambda result: metrics.sync_requests.labels(str(result)).inc(),
        )
        self.server = Server(settings.listen, metrics, self._healthy, loop.readiness, endpoint).start()
        log.info("serving /metrics, /healthz, /readyz and POST /sync on %s", self.server.address)
        self.sync.start()
        self.events.start()
        if self.elector is not None:
            self.elector.start()
            log.info(
                "candidate %s for the lease %s/%s",
                settings.identity,
                settings.lease_namespace,
                settings.lease_name,
            )
        try:
            loop.run()  # its last step is to stop acting: no apply, no watch
        finally:
            self._shutdown()
        return OK

    def _elector(self) -> Elector | None:
        settings = self.settings
        if settings.lease_namespace is None:
            return None
        lock = LeaseLock(connected(self.options, self.metrics), settings.lease_namespace, settings.lease_name)
        return Elector(lock, settings.identity, settings.timing, lambda on: self.inbox.put(LeaseNews(on)))

    def _signals(self) -> None:
        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("%s: stopping after this step", signal.Signals(signum).name)
            self.stopping = True
            if self.loop is not None:
                self.loop.stop()
            self.inbox.put(StopRequested())

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def _shutdown(self) -> None:
        self.events.stop(timeout=5)
        if self.elector is not None:
            self.elector.stop(release=True)
        self.sync.stop()
        self.server.stop()
        log.info("stopped")

    def _synced(self, ok: bool, error: str | None) -> None:
        """From the git thread, after every fetch."""
        self.metrics.sync_up.set(1 if ok else 0)
        if ok:
            self.metrics.last_sync.set_to_current_time()
        else:
            self.metrics.sync_failures.inc()

    def _healthy(self) -> tuple[bool, str]:
        threads = {"git-sync": self.sync.alive(), "node-events": self.events.alive()}
        if self.elector is not None:
            threads["leader-election"] = self.elector.alive()
        if self.cluster.watcher is not None:
            threads["node-watch"] = self.cluster.watcher.alive()
        assert self.loop is not None  # the server starts after the loop is made
        return self.loop.health(threads)

    def _check_access(self, gateway: kube.Gateway) -> None:
        """Say at start what the roles lack (and what they grant that is not needed)."""
        try:
            report = check(gateway, self.settings)
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
