"""GPU nodes as they change: a list, then a watch from the list's resourceVersion, in a thread.

Metadata only (PartialObjectMetadata), as the bulk reads of cluster.Cluster: labels are all an audit needs.
The watch's label selector makes a node that gains `nvidia.com/gpu.present=true` arrive as ADDED and one
that loses it leave as DELETED. A watch the server ends (its timeout) resumes from the last
resourceVersion seen, bookmarks included; 410 Gone lists again; any other error waits a bounded,
doubling backoff (0.5 s to 30 s, with jitter) and tries again, forever: the thread never dies of an
error, it is stopped.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.adapters import kube
from reconciler.adapters.cluster import METADATA_LIST, METADATA_ONE
from reconciler.core.base import throttle
from reconciler.core.images.tags import GPU_PRESENT, Node
from reconciler.core.incluster.fleetwatch import backoff
from reconciler.errors import GpudrvError

log = logging.getLogger("gpudrv.watch")

SELECTOR = f"{GPU_PRESENT}=true"
WATCH_SECONDS = (240, 300)  # the server ends each watch after a random time in this range
BACKOFF_CAP = 30.0
WATCH_SLACK = 30  # seconds past its timeoutSeconds that a silent watch is given before it counts as broken
# What a watch of nodes carries: PartialObjectMetadata (metadata only, as asked), or a whole Node.
KINDS = ("PartialObjectMetadata", "Node")


@dataclass(frozen=True)
class Listed:
    """The whole set of GPU nodes, from a (re-)list."""

    nodes: list[Node]
    version: str


@dataclass(frozen=True)
class Changed:
    node: Node
    received: float  # time.time() when the event arrived


@dataclass(frozen=True)
class Deleted:
    name: str


class NodeWatch:
    def __init__(
        self,
        gateway: kube.Gateway,
        post: Callable[[Listed | Changed | Deleted], None],
        on_restart: Callable[[str], None] = lambda reason: None,
        selector: str = SELECTOR,
        streams: kube.Gateway | None = None,
    ) -> None:
        """`gateway` lists; `streams` (default: kube.streaming(gateway)) watches."""
        self.gateway, self.post, self.on_restart, self.selector = gateway, post, on_restart, selector
        self.streams = streams or kube.streaming(gateway)
        self.stopping = threading.Event()
        self.stream: kube.Stream | None = None
        self.thread = threading.Thread(target=self._run, name="node-watch", daemon=True)

    def start(self) -> NodeWatch:
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive() or self.stopping.is_set()

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        if self.stream is not None:
            self.stream.close()
        self.thread.join(timeout)

    def _run(self) -> None:
        version: str | None = None
        failures = 0
        while not self.stopping.is_set():
            try:
                if version is None:
                    version = self._list()
                started = time.monotonic()
                version, seen = self._watch(version)
                if seen or time.monotonic() - started > 1:
                    failures = 0  # a watch that ended normally
                    continue
                failures += 1  # ended at once with nothing: do not spin on it
                self._pause(failures, "the watch ended at once")
            except kube.Gone:
                failures += 1
                version = None
                self.on_restart("gone")
                log.info("watch: resourceVersion too old (410 Gone), listing the GPU nodes again")
                if failures > 1:
                    self._pause(failures, "410 Gone again")
            except (kube.ApiError, kube.Unreachable, GpudrvError) as exc:
                failures += 1
                if isinstance(exc, kube.ApiError) and exc.status == 410:
                    version = None  # an expired continue token in the list
                self.on_restart("error")
                asked = throttle.retry_after(exc.retry_after) if isinstance(exc, kube.ApiError) else None
                self._pause(failures, str(exc), asked)
            except Exception as exc:  # never die of a surprise: list again after a pause
                log.exception("watch on GPU nodes: unexpected error")
                failures, version = failures + 1, None
                self.on_restart("error")
                self._pause(failures, repr(exc))

    def _pause(self, failures: int, why: str, asked: float | None = None) -> None:
        """The backoff, or the wait the server asked for (Retry-After) when that is longer."""
        delay = backoff(failures, cap=BACKOFF_CAP, jitter=random.random())
        delay = max(delay, min(asked, throttle.MAX_WAIT)) if asked is not None else delay
        log.warning("watch on GPU nodes: %s; retrying in %.1fs", why, delay)
        self.stopping.wait(delay)

    def _list(self) -> str:
        listing = self.gateway.pages(kube.NODES, query={"labelSelector": self.selector}, accept=METADATA_LIST)
        nodes = [kube.node(item) for item in listing]
        self.post(Listed(nodes, listing.version))
        return listing.version

    def _watch(self, version: str) -> tuple[str, bool]:
        """Events until the server ends the watch; the last resourceVersion, and whether any came."""
        seconds = random.randint(*WATCH_SECONDS)
        query: dict[str, str | bool | None] = {
            "allowWatchBookmarks": True,
            "labelSelector": self.selector,
            "resourceVersion": version,
            "timeoutSeconds": str(seconds),
        }
        self.stream = self.streams.watch(
            kube.NODES, query, accept=METADATA_ONE, timeout=(5, seconds + WATCH_SLACK), kinds=KINDS
        )
        seen = False
        for event in self.stream:
            if self.stopping.is_set():
                break
            seen = True
            kind, document = event["type"], event["object"]
            version = _version(document) or version
            if kind == "BOOKMARK":
                continue
            node = kube.node(document)
            if kind == "DELETED":
                self.post(Deleted(node.name))
            else:  # ADDED or MODIFIED: the stream lets no other through
                self.post(Changed(node, time.time()))
        return version, seen


def _version(document: dict[str, Any]) -> str:
    return str((document.get("metadata") or {}).get("resourceVersion", ""))
