"""The in-cluster loop's ports (core/incluster/reconcile_ports.py) on git, the cluster, Prometheus and
logging: QueueInbox (Inbox), SystemClock (Clock), Checkout (Repository), LiveCluster (Cluster),
AlwaysLeading (Lease without leader election; with it, adapters/cluster/lease.py's Elector), Worktrees
(Applier; its Run is adapters/serving/apply_process.py's ApplyProcess) and Exporter (Output).
commands/reconcile/service.py builds them, starts the threads and the HTTP server, and runs the loop.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from reconciler.adapters import desired, git, kube
from reconciler.adapters.cluster.events import EventSink, NodeEvent
from reconciler.adapters.cluster.node_watch import Changed, Deleted, Listed, NodeWatch
from reconciler.adapters.git.sync import Source
from reconciler.adapters.serving.apply_process import ApplyProcess
from reconciler.adapters.serving.metrics import Metrics
from reconciler.core.base.throttle import Throttled
from reconciler.core.contract.operator import Contract
from reconciler.core.incluster.fleetwatch import Change
from reconciler.core.incluster.reconcile_ports import (
    Event,
    Figures,
    Level,
    Message,
    NodeChanged,
    NodeDeleted,
    NodeNews,
    NodesListed,
    Snapshot,
    Tally,
    Unreadable,
    Watched,
)
from reconciler.errors import GpudrvError

log = logging.getLogger("gpudrv.reconcile")


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
    """The fleet repository's clone at `path`: a commit checked out and read (`read`: its matrix and
    gpudrv.yaml, as commands/reconcile's load_snapshot reads them)."""

    def __init__(self, path: Path, read: Callable[[Path, str], Snapshot]) -> None:
        self.path, self.read = path, read

    def load(self, commit: str) -> Snapshot:
        try:
            git.check_out(self.path, commit)
            return self.read(self.path, commit)
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
    """`gpudrv apply` as a child process, in a fresh worktree of the commit in force (under `workdir`,
    beside the clone); `arguments`: its command line for a snapshot (commands/reconcile's
    apply_arguments)."""

    def __init__(self, workdir: Path, arguments: Callable[[Snapshot], list[str]]) -> None:
        self.workdir, self.arguments = workdir, arguments

    def start(self, snapshot: Snapshot) -> ApplyProcess:
        checkout, tree = self.workdir / "repo", self.workdir / "apply"
        try:
            with contextlib.suppress(GpudrvError):
                git.remove_worktree(checkout, tree)
            shutil.rmtree(tree, ignore_errors=True)
            git.add_worktree(checkout, tree, snapshot.commit)
        except GpudrvError as exc:
            raise Unreadable(str(exc)) from exc
        return ApplyProcess(self.arguments(snapshot), tree, snapshot.commit)


class Exporter:
    """The loop's output: log lines, the Prometheus series, and Node events through the sink. A node's
    change and an event are worded by `change_line` and `event_message` (render/reconcile.py's)."""

    def __init__(
        self,
        metrics: Metrics,
        events: EventSink,
        source: Source,
        change_line: Callable[[Change], str],
        event_message: Callable[[Event], str],
    ) -> None:
        self.metrics, self.events, self.source = metrics, events, source
        self.change_line, self.event_message = change_line, event_message
        self.shown = Figures()

    def log(self, level: Level, text: str) -> None:
        log.log(level, "%s", text)

    def change(self, change: Change) -> None:
        log.info("%s", self.change_line(change))

    def event(self, event: Event) -> None:
        message = self.event_message(event)
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
