"""Watches: one JSON event per line as the API server sends them, each checked before a caller sees it.

An event is an object with a `type` and an `object`: ADDED, MODIFIED and DELETED carry an object of
the watched resource's shape and of one of the kinds asked for (a Pod in a watch of nodes is a lie);
BOOKMARK carries the resourceVersion to resume from; ERROR a metav1.Status, raised as its typed error
(410 is Gone). Any other event is one error naming the server, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any

from reconciler.adapters.kube import shapes
from reconciler.adapters.kube._errors import status_error
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from reconciler.adapters.kube._gateway import Gateway
    from reconciler.adapters.kube._resources import Resource

TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")


class Stream:
    """A watch: its events until the server ends the stream, an error (typed; 410 is Gone), or
    `close()` from another thread (then it just ends)."""

    def __init__(
        self,
        gateway: Gateway,
        request: Callable[[], Any],
        resource: Resource,
        kinds: Collection[str],
        read_timeout: float | None = None,
    ) -> None:
        self.gateway, self.request, self.resource, self.kinds = gateway, request, resource, kinds
        self.read_timeout = read_timeout
        self.response: Any = None
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            with self.gateway.stream_errors(lambda: self.closed, self.read_timeout):
                self.response = self.request()
                if self.closed:
                    return
                for line in _lines(self.response):
                    yield self.event(line)
        finally:
            self._release()

    def event(self, line: bytes) -> dict[str, Any]:
        """One line of the stream as an event a caller may read, or the error it stands for."""
        try:
            event = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise GpudrvError(
                f"the cluster at {self.gateway.host} sent a watch event that is not JSON: {exc}"
            ) from None
        if not isinstance(event, dict):
            raise self.gateway.lied("a watch event", (), f"is {shapes.describe(event)}, not an object")
        self.gateway.check(shapes.WATCH_EVENT, event, "a watch event")
        kind, document = event["type"], event["object"]
        if kind not in TYPES:
            raise self.gateway.lied("a watch event", ("type",), f"is {shapes.describe(kind)}")
        if kind == "ERROR":
            self.gateway.check(shapes.STATUS, document, "a watch error", ("object",))
            raise status_error(self.gateway.host, document)
        if kind == "BOOKMARK":
            self.gateway.check(shapes.BOOKMARK, document, "a watch bookmark", ("object",))
            return event
        self.gateway.check(
            self.resource.shape, document, f"a watch event of {self.resource.plural}", ("object",)
        )
        found = document.get("kind")
        if found is not None and found not in self.kinds:
            raise self.gateway.lied(
                f"a watch event of {self.resource.plural}", ("object", "kind"), f"is {shapes.describe(found)}"
            )
        return event

    def close(self) -> None:
        """Ends the stream from another thread: the reading thread sees its end, not an error."""
        self.closed = True
        self._release()

    def _release(self) -> None:
        response, self.response = self.response, None
        for action in ("shutdown", "close"):  # shutdown (urllib3 2.3) wakes a read blocked in another thread
            with contextlib.suppress(Exception):
                getattr(response, action, lambda: None)()


def _lines(response: Any) -> Iterator[bytes]:
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        yield buffer
