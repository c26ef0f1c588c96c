"""Node events from the reconcile loop, written by their own thread and deduplicated.

One problem of one node is one Event object, whatever the number of loops, replicas or restarts: its
name is derived from the node, the reason and the problem's key (the missing tag), so a second report
finds the first (409 on create) and counts it again instead (count + 1 and lastTimestamp, as the
kubelet's event recorder does), and only when asked to (a change) or when the last count is older than
the refresh interval. Counting again keeps the event alive: the API server forgets an event an hour
(its --event-ttl) after its last write.

The loop never waits for the API here: events queue (bounded; past it they are dropped and counted)
and go out at a limited rate.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters import kube
from reconciler.core.incluster.access import EVENT_NAMESPACE
from reconciler.errors import GpudrvError

log = logging.getLogger("gpudrv.events")

COMPONENT = "gpudrv-reconcile"
MERGE_PATCH = "application/merge-patch+json"
QUEUE_SIZE = 10_000
CREATE_TRIES = 3  # an event that is there (409) and not there (404) this often is a server that lies


@dataclass(frozen=True)
class NodeEvent:
    node: str
    reason: str
    message: str
    key: str  # what makes it the same problem again: the tag, or the reason text
    warning: bool = True
    recount: bool = True  # False: a problem already reported; count it only if the event is stale


def event_name(node: str, reason: str, key: str) -> str:
    """A stable name: `<node>.<hash>`, within the API server's 253 characters."""
    digest = hashlib.sha256(f"{reason}\0{key}".encode()).hexdigest()[:12]
    return f"{node[:200]}.gpudrv-{digest}"


class EventSink:
    def __init__(
        self,
        gateway: kube.Gateway,
        refresh: float,
        counted: Callable[[str, str], None] = lambda reason, result: None,
        rate: float = 20.0,
        burst: int = 100,
    ) -> None:
        self.gateway, self.refresh, self.counted = gateway, refresh, counted
        self.rate, self.burst = rate, burst
        self.pending: queue.Queue[NodeEvent | None] = queue.Queue(QUEUE_SIZE)
        self.thread = threading.Thread(target=self._run, name="node-events", daemon=True)
        self.host = socket.gethostname()

    def start(self) -> EventSink:
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive()

    def post(self, event: NodeEvent) -> None:
        try:
            self.pending.put_nowait(event)
        except queue.Full:
            self.counted(event.reason, "dropped")

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (for up to `timeout`), then stop."""
        self.pending.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        tokens, last = float(self.burst), time.monotonic()
        while (event := self.pending.get()) is not None:
            now = time.monotonic()
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            last = now
            if tokens < 1:
                time.sleep((1 - tokens) / self.rate)
                tokens, last = 1.0, time.monotonic()
            tokens -= 1
            try:
                self.counted(event.reason, self.write(event))
            except (kube.ApiError, kube.Unreachable, GpudrvError) as exc:
                self.counted(event.reason, "failed")
                log.warning("event %s on node %s: %s", event.reason, event.node, exc)
            except Exception:  # never die: one odd event must not silence the others
                self.counted(event.reason, "failed")
                log.exception("event %s on node %s", event.reason, event.node)

    # --- one event -----------------------------------------------------------------------------------

    def write(self, event: NodeEvent) -> str:
        """Create the event, or count the existing one again: 'created', 'counted' or 'unchanged'."""
        name = event_name(event.node, event.reason, event.key)
        for _ in range(CREATE_TRIES):
            moment = now()
            try:
                create(self.gateway, node_event(event, COMPONENT, self.host, moment, name))
                return "created"
            except kube.Conflict:
                pass
            existing = self.gateway.get(kube.EVENTS, name, EVENT_NAMESPACE, missing_ok=True)
            if existing is not None:
                return self._count(event, name, existing, moment)
            # else it expired between the two requests: create it again
        raise GpudrvError(
            f"the cluster at {self.gateway.host} answered {CREATE_TRIES} times that event {name} exists "
            "(409) and that it does not (404)"
        )

    def _count(self, event: NodeEvent, name: str, existing: dict[str, Any], now: str) -> str:
        if not event.recount and not self._stale(existing):
            return "unchanged"
        patch = {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": now, "message": event.message}
        self.gateway.write(
            "PATCH", kube.EVENTS, namespace=EVENT_NAMESPACE, name=name, body=patch, content_type=MERGE_PATCH
        )
        return "counted"

    def _stale(self, existing: dict[str, Any]) -> bool:
        last = existing.get("lastTimestamp") or existing.get("eventTime") or ""
        try:
            written = datetime.fromisoformat(str(last))
        except ValueError:
            return True
        if written.tzinfo is None:  # no offset: not what the API server writes; read it as UTC
            written = written.replace(tzinfo=UTC)
        return (datetime.now(UTC) - written).total_seconds() >= self.refresh


def node_event(event: NodeEvent, component: str, host: str, now: str, name: str | None) -> dict[str, Any]:
    """A Node Event as every writer of gpudrv's makes one (the reconcile loop's sink, the upgrade's
    Fleet.event): named `name`, else named by the server after the node. `now` is now()'s."""
    node = event.node
    metadata = {"name": name} if name else {"generateName": f"{node}.gpudrv-"}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**metadata, "namespace": EVENT_NAMESPACE},
        # uid: the node's name, as the kubelet writes it: `kubectl describe node` shows events whose
        # uid is the node's uid or its name, and the name needs no read of the node.
        "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
        "reason": event.reason,
        "message": event.message[:1024],
        "type": "Warning" if event.warning else "Normal",
        "source": {"component": component, "host": host},
        "reportingComponent": component,
        "reportingInstance": host,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def create(gateway: kube.Gateway, document: dict[str, Any]) -> None:
    """POST the event (kube.Conflict when one of its name exists)."""
    gateway.write("POST", kube.EVENTS, namespace=EVENT_NAMESPACE, body=document, content_type=kube.JSON)


def now() -> str:
    """The API's Time, to the second, as the events' timestamps are written."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
