"""What `gpudrv reconcile` reports to Prometheus, and its small HTTP server.

    GET  /metrics   the Prometheus text format (prometheus_client)
    GET  /healthz   200 while the loop turns (liveness)
    GET  /readyz    200 once a commit of the fleet repository is in force (readiness)
    POST /sync      fetch the repository now: a signed push webhook or a bearer token (sync_endpoint.py)

A client gets READ_TIMEOUT seconds to send its request: a slow or stuck one is cut off, and it holds
only its own thread, so the probes and the scraper are answered meanwhile.

Per-node series exist only for nodes with a problem: `gpudrv_node_image_missing{node,tag} 1`,
`gpudrv_node_next_kernel_image_missing{node,kernel,tag} 1` (the image for the kernel the node boots
next, the reboot gate's alert: deploy/monitoring) and `gpudrv_node_tag_invalid{node} 1`; they go away
when the problem does. Only the leader audits, so
only the leader has them; `gpudrv_leader` says which replica that is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reconciler.adapters.serving.sync_endpoint import SyncEndpoint

log = logging.getLogger("gpudrv.http")

Check = Callable[[], tuple[bool, str]]
READ_TIMEOUT = 10.0  # seconds a client has to send each part of its request


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
            Info,
            disable_created_metrics,
        )
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.process_collector import ProcessCollector

        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)

        # The audit.
        self.missing = Gauge(
            "gpudrv_node_image_missing",
            "1 for each GPU node whose precompiled driver image is not in the support matrix",
            ["node", "tag"],
            registry=registry,
        )
        self.next_missing = Gauge(
            "gpudrv_node_next_kernel_image_missing",
            "1 for each GPU node whose precompiled driver image for the kernel it boots next is not in "
            "the support matrix",
            ["node", "kernel", "tag"],
            registry=registry,
        )
        self.invalid = Gauge(
            "gpudrv_node_tag_invalid",
            "1 for each GPU node whose labels give no driver image tag",
            ["node"],
            registry=registry,
        )
        self.gpu_nodes = Gauge("gpudrv_gpu_nodes", "GPU nodes watched and audited", registry=registry)
        self.missing_nodes = Gauge(
            "gpudrv_gpu_nodes_missing_image", "GPU nodes whose driver image is missing", registry=registry
        )
        self.upgrade_states = Gauge(
            "gpudrv_gpu_nodes_upgrade_state",
            "GPU nodes per nvidia.com/gpu-driver-upgrade-state value ('none': no label)",
            ["state"],
            registry=registry,
        )
        self.fleet_problems = Gauge(
            "gpudrv_fleet_problems",
            "problems of the fleet as a whole (a mixed-OS ClusterPolicy)",
            registry=registry,
        )
        self.audit_seconds = Histogram(
            "gpudrv_audit_duration_seconds",
            "time to audit: 'nodes' after node changes, 'fleet' after a matrix, contract or resync",
            ["scope"],
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )
        self.last_audit = Gauge(
            "gpudrv_last_audit_success_timestamp_seconds",
            "when the last audit finished (Unix time)",
            registry=registry,
        )
        self.audit_errors = Counter(
            "gpudrv_audit_errors",
            "audits that could not run (the contract could not be read)",
            registry=registry,
        )
        # The fleet repository.
        self.last_sync = Gauge(
            "gpudrv_git_last_sync_success_timestamp_seconds",
            "when the fleet repository was last fetched successfully (Unix time)",
            registry=registry,
        )
        self.sync_up = Gauge("gpudrv_git_sync_up", "1 when the last fetch worked, else 0", registry=registry)
        self.sync_failures = Counter("gpudrv_git_sync_failures", "fetches that failed", registry=registry)
        self.commit = Info("gpudrv_commit", "the commit of the fleet repository in force", registry=registry)
        self.commit_time = Gauge(
            "gpudrv_commit_timestamp_seconds", "committer time of the commit in force", registry=registry
        )
        self.rejected = Counter(
            "gpudrv_commit_rejected",
            "newest commits not put in force (their matrix or gpudrv.yaml is invalid)",
            registry=registry,
        )
        # The loop's machinery.
        self.leader = Gauge("gpudrv_leader", "1 on the replica holding the lease, else 0", registry=registry)
        self.watch_restarts = Counter(
            "gpudrv_watch_restarts", "node watch restarts: 'gone' (410, re-list) or 'error'", ["reason"],
            registry=registry,
        )  # fmt: skip
        self.events = Counter(
            "gpudrv_node_events",
            "Node events: created, counted (an existing one), unchanged, failed or dropped",
            ["reason", "result"],
            registry=registry,
        )
        self.api_waits = Counter(
            "gpudrv_api_server_waits",
            "waits the API server asked for (429, or 5xx with Retry-After) before a request was sent again",
            ["status"],
            registry=registry,
        )
        self.sync_requests = Counter(
            "gpudrv_sync_requests",
            "POST /sync requests: accepted, limited (coalesced), replayed, unauthorized, too_large, off",
            ["result"],
            registry=registry,
        )
        self.apply_runs = Counter(
            "gpudrv_apply_runs", "gpudrv apply runs (--apply), by exit: ok, findings, error, interrupted",
            ["result"], registry=registry,
        )  # fmt: skip

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _Listener(ThreadingHTTPServer):
    # The accept backlog: http.server's 5 (and 128) overflow when a few hundred clients connect at once; a
    # probe's connection waits for a SYN retransmit (1 s and more), longer than a kubelet probe waits.
    request_queue_size = 1024


class Server:
    """The HTTP endpoints, in a daemon thread."""

    def __init__(self, address: str, metrics: Metrics, healthy: Check, ready: Check, sync: SyncEndpoint):
        host, _, port = address.rpartition(":")
        self.sync = sync
        handler = _handler(metrics, healthy, ready, sync)
        self.httpd = _Listener((host.strip("[]") or "0.0.0.0", int(port)), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{host.decode() if isinstance(host, bytes) else host}:{port}"

    def start(self) -> Server:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.sync.stop()
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(metrics: Metrics, healthy: Check, ready: Check, sync: SyncEndpoint) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gpudrv"
        timeout = READ_TIMEOUT  # StreamRequestHandler sets it on the socket: no read waits longer

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, content_type = metrics.exposition()
                self._send(200, body, content_type)
            elif path in ("/healthz", "/livez"):
                self._check(healthy)
            elif path == "/readyz":
                self._check(ready)
            else:
                self._send(404, b"not found: /metrics, /healthz, /readyz, POST /sync\n")

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/sync":
                self._send(404, b"not found\n")
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            length = self.headers.get("Content-Length")
            if length is not None and not length.isdigit():
                self._send(400, b"bad Content-Length\n")
                return
            size = None if length is None else int(length)
            status, body, extra = sync.handle(headers, size, self.rfile.read)
            self._send(status, body, extra=extra)
            self.close_connection = True  # an unread body must not be taken for the next request

        def _check(self, check: Check) -> None:
            ok, why = check()
            self._send(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {why}\n".encode())

        def _send(
            self,
            status: int,
            body: bytes,
            content_type: str = "text/plain; charset=utf-8",
            extra: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler
