"""The gateway's verbs: every request names a resource of the table (_resources), and every answer
read is parsed here and checked against that resource's shape before anyone reads it.

The JSON is parsed here, never by the client's model layer: a big list is streamed item by item
(`items`, jsonstream) so only the fields a command keeps stay in memory (docs/scale.md).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator
from functools import partial
from typing import Any

from reconciler.adapters.kube import _paging, jsonstream, shapes
from reconciler.adapters.kube._errors import NotFound
from reconciler.adapters.kube._paging import PAGE_SIZE, Listing
from reconciler.adapters.kube._resources import Resource
from reconciler.adapters.kube._transport import JSON, STREAMED, Query, Transport
from reconciler.adapters.kube._watch import Stream
from reconciler.adapters.kube.shapes import Shape
from reconciler.errors import GpudrvError


class Gateway(Transport):
    """A connected API client: requests in, parsed and shape-checked JSON or typed errors out."""

    # --- reads: each answer of the resource's shape ---------------------------------------------------

    def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        missing_ok: bool = False,
        accept: str = JSON,
    ) -> dict[str, Any] | None:
        """One object; None for a 404 when `missing_ok`."""
        path = resource.path(namespace, name)
        try:
            document = self.document(lambda: self.request("GET", path, accept=accept))
        except NotFound:
            if missing_ok:
                return None
            raise
        self.check(resource.shape, document, resource.kind)
        return document

    def items(
        self,
        resource: Resource,
        namespace: str | None = None,
        query: Query | None = None,
        *,
        accept: str = JSON,
    ) -> Iterator[dict[str, Any]]:
        """Every item of one list answer (not paginated), each as soon as it has arrived: the body is
        never held whole (jsonstream). One request without `limit`, so there is no continue token to
        follow, whatever the size of the list (docs/scale.md says why). The answer is bounded as every
        other (MAX_BODY, the total timeout)."""
        path = resource.path(namespace)
        return self._streamed(resource, lambda: self.request("GET", path, query, accept=accept))

    def pages(
        self,
        resource: Resource,
        namespace: str | None = None,
        query: Query | None = None,
        *,
        accept: str = JSON,
        limit: int = PAGE_SIZE,
    ) -> Listing:
        """Every item of a paginated list, `limit` a page (the paging loop: _paging.Listing)."""
        return Listing(self, resource, partial(self._page, resource.path(namespace), query, accept, limit))

    def _page(self, path: str, query: Query | None, accept: str, limit: int, token: str | None) -> Any:
        # The query's order is the generated client's: continue first, then the caller's, then limit.
        return self.request(
            "GET", path, {"continue": token, **(query or {}), "limit": str(limit)}, accept=accept
        )

    def create(
        self, resource: Resource, body: Any, namespace: str | None = None, *, content_type: str | None = None
    ) -> dict[str, Any]:
        """POST a new object; the object the server made of it, of the resource's shape."""
        path = resource.path(namespace)
        document = self.document(lambda: self.request("POST", path, body=body, content_type=content_type))
        self.check(resource.shape, document, resource.kind)
        return document

    def replace(
        self, resource: Resource, name: str, body: Any, namespace: str | None = None
    ) -> dict[str, Any]:
        """PUT the object whole (a compare-and-swap when `body` names its resourceVersion)."""
        path = resource.path(namespace, name)
        document = self.document(lambda: self.request("PUT", path, body=body))
        self.check(resource.shape, document, resource.kind)
        return document

    def write(
        self,
        method: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
        query: Query | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> None:
        """A request whose answer nobody reads (a patch, a delete, an eviction, an event)."""
        path = resource.path(namespace, name, subresource)
        self.send(lambda: self.request(method, path, query, body=body, content_type=content_type))

    def watch(
        self,
        resource: Resource,
        query: Query,
        *,
        accept: str,
        timeout: tuple[float, float],
        kinds: Collection[str],
    ) -> Stream:
        """A watch of the collection: its events as they come, each of `kinds` (see Stream)."""
        path = resource.path()
        request = partial(self.request, "GET", path, {**query, "watch": True}, accept=accept, timeout=timeout)
        return Stream(self, request, resource, kinds, timeout[1])

    # --- answers ---------------------------------------------------------------------------------------

    def document(self, request: Callable[[], Any]) -> dict[str, Any]:
        """The answer's JSON, an object."""
        data = self.send(request)
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as exc:
            reason = (
                "nested too deeply" if isinstance(exc, RecursionError) else jsonstream.number_problem(exc)
            )
            raise GpudrvError(
                f"the cluster at {self.host} sent a response that is not JSON: {reason}"
            ) from None
        if not isinstance(document, dict):
            raise self.lied("an answer", (), f"is {shapes.describe(document)}, not an object")
        return document

    def _streamed(self, resource: Resource, request: Callable[[], Any]) -> Iterator[dict[str, Any]]:
        token = STREAMED.set(True)
        try:
            response = self.send(request, whole=False)
        finally:
            STREAMED.reset(token)
        what = f"{resource.shape.one} list"
        finished = False
        try:
            with self.answers():
                stream = jsonstream.ListStream(_chunks(response))
                for index, item in enumerate(stream):
                    if not isinstance(item, dict):
                        raise self.lied(what, ("items", index), f"is {shapes.describe(item)}, not an object")
                    self.check(resource.shape, item, what, ("items", index))
                    yield item
            rest = stream.members.get("items")
            if rest is not None:  # not an array, so not streamed
                raise self.lied(what, ("items",), f"is {shapes.describe(rest)}, not a list")
            _paging.whole(self, stream.members.get("metadata"), what)
            finished = True
        except (jsonstream.StreamError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise GpudrvError(f"the cluster at {self.host} sent a list that is not JSON: {reason}") from None
        finally:
            # A connection with unread bytes must not go back to the pool.
            with contextlib.suppress(AttributeError):  # an answer read whole has no connection
                response.release_conn() if finished else response.close()

    def check(self, shape: Shape, document: Any, what: str, at: tuple[str | int, ...] = ()) -> None:
        """The document has the shape, or one error naming the server, the field and what it holds."""
        found = shapes.problem(shape, document)
        if found is not None:
            path, reason = found
            raise self.lied(what if at else shape.one, (*at, *path), reason)

    def lied(self, what: str, path: tuple[str | int, ...], reason: str) -> GpudrvError:
        field_name = shapes.dotted(path) if path else "it"
        return GpudrvError(
            f"the cluster at {self.host} sent {what} the API never sends: {field_name} {reason}"
        )


def _chunks(response: Any) -> Iterator[bytes]:
    """The answer's bytes as they arrive (one piece when it was read whole)."""
    if hasattr(response, "stream"):
        yield from response.stream(jsonstream.CHUNK)
    else:
        yield response.data
