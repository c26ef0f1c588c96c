"""`gpudrv reconcile` running: the threads, the HTTP server, and the loop wired to its ports.

The loop (core/incluster/reconcile_loop.py, pure) reads one inbox in the main thread and acts through
the ports of core/incluster/reconcile_ports.py, implemented on git, the cluster, Prometheus and logging
in adapters/incluster/reconcile_ports.py; this module builds them and starts the threads around it:

    git-sync       fetch the branch every --interval, or on POST /sync      -> CommitFetched
    node-watch     list + watch GPU nodes (leader only)                     -> Watched(news)
    leader-elect   campaign for the Lease                                   -> LeaseNews
    node-events    write Node events, deduplicated and rate limited         <- Exporter.event
    http           /metrics, /healthz, /readyz, POST /sync

SIGTERM sets a flag the loop reads between steps: it interrupts a running apply, stops the watch,
releases the lease and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
from types import FrameType

from reconciler.adapters import kube
from reconciler.adapters.cluster.events import EventSink
from reconciler.adapters.cluster.lease import Elector, LeaseLock
from reconciler.adapters.git.sync import GitSync
from reconciler.adapters.incluster.reconcile_ports import (
    AlwaysLeading,
    Checkout,
    Exporter,
    LiveCluster,
    QueueInbox,
    SystemClock,
    Worktrees,
    connected,
)
from reconciler.adapters.serving.metrics import Metrics, Server
from reconciler.adapters.serving.sync_endpoint import SyncEndpoint, secret_files
from reconciler.commands import OK
from reconciler.commands.reconcile import apply_arguments, check, load_snapshot
from reconciler.commands.settings import ReconcileSettings
from reconciler.core.incluster.reconcile_loop import Loop
from reconciler.core.incluster.reconcile_ports import (
    CommitFetched,
    LeaseNews,
    LoopSettings,
    Ports,
    StopRequested,
)
from reconciler.errors import GpudrvError
from reconciler.render.reconcile import change_line, event_message

log = logging.getLogger("gpudrv.reconcile")


class Service:
    """The threads and the HTTP server around the loop (core/incluster/reconcile_loop.py), started and
    stopped."""

    def __init__(self, settings: ReconcileSettings) -> None:
        self.settings, self.options = settings, settings.connection
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
            settings.home / "repo",
            settings.interval,
            lambda fetched: inbox.put(CommitFetched(fetched.commit)),
            self._synced,
        )
        counted = lambda reason, result: metrics.events.labels(reason, result).inc()  # noqa: E731
        self.events = EventSink(connected(options, metrics), settings.event_refresh, counted)
        self.elector = self._elector()
        applier = (
            Worktrees(
                settings.home,
                lambda snapshot: apply_arguments(snapshot, settings, os.environ.get("KUBECONFIG")),
            )
            if settings.apply
            else None
        )
        checkout = Checkout(
            settings.home / "repo", lambda path, commit: load_snapshot(path, commit, settings)
        )
        exporter = Exporter(metrics, self.events, settings.source, change_line, event_message)
        ports = Ports(SystemClock(), inbox, checkout, self.cluster, self.elector or AlwaysLeading(), exporter,
                      applier)  # fmt: skip
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
                settings.candidate,
                settings.lease_in,
                settings.lease_name,
            )
        try:
            loop.run()  # its last step is to stop acting: no apply, no watch
        finally:
            self._shutdown()
        return OK

    def _elector(self) -> Elector | None:
        settings = self.settings
        if not settings.elected:
            return None
        lock = LeaseLock(connected(self.options, self.metrics), settings.lease_in, settings.lease_name)
        return Elector(lock, settings.candidate, settings.timing, lambda on: self.inbox.put(LeaseNews(on)))

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
