"""The one paging loop: every paginated list, whatever it lists, follows its continue tokens here.

A token the server sent before, or more than MAX_PAGES pages, is a list that would never end: an error.
Each page is an object, its metadata of the list's shape, its items each an object of the resource's
shape. A list asked for whole (Gateway.items, no limit) must end on its first answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from reconciler.adapters.kube import shapes
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from reconciler.adapters.kube._gateway import Gateway
    from reconciler.adapters.kube._resources import Resource

PAGE_SIZE = 500
MAX_PAGES = 10_000  # 5,000,000 objects: a list longer than that is a server that never stops


class Listing:
    """Every item of a paginated list, page by page as they are read; `version` is the list's
    resourceVersion (that of its first page) once the first page has arrived, for a watch to resume
    from. `request` sends one page's request given the continue token (None first)."""

    def __init__(self, gateway: Gateway, resource: Resource, request: Callable[[str | None], Any]) -> None:
        self.gateway, self.resource, self.request = gateway, resource, request
        self.version = ""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        token: str | None = None
        seen: set[str] = set()
        while True:
            page = self.gateway.document(partial(self.request, token))
            yield from items_of(self.gateway, page, self.resource)
            metadata = list_metadata(self.gateway, page.get("metadata"), "a list")
            self.version = self.version or str(metadata.get("resourceVersion") or "")
            token = metadata.get("continue")
            if not token:
                return
            if token in seen:
                raise GpudrvError(
                    f"the cluster at {self.gateway.host} sent the same continue token twice "
                    f"({token[:40]!r}): a list that would never end"
                )
            seen.add(token)
            if len(seen) >= MAX_PAGES:
                raise GpudrvError(
                    f"the cluster at {self.gateway.host} sent more than {MAX_PAGES:,} pages of one list"
                )


def items_of(gateway: Gateway, page: dict[str, Any], resource: Resource) -> list[dict[str, Any]]:
    """The page's items, each an object of the resource's shape."""
    items = page.get("items")
    if items is None:
        return []
    what = f"{resource.shape.one} list"
    if not isinstance(items, list):
        raise gateway.lied(what, ("items",), f"is {shapes.describe(items)}, not a list")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise gateway.lied(what, ("items", index), f"is {shapes.describe(item)}, not an object")
        gateway.check(resource.shape, item, what, ("items", index))
    return items


def list_metadata(gateway: Gateway, metadata: Any, what: str) -> dict[str, Any]:
    """A list's metadata, of the list's shape ({} when it has none)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise gateway.lied(what, ("metadata",), f"is {shapes.describe(metadata)}, not an object")
    gateway.check(shapes.LIST_METADATA, metadata, what, ("metadata",))
    return metadata


def whole(gateway: Gateway, metadata: Any, what: str) -> None:
    """A list asked for whole (no limit) ends there: a continue token would mean items left out."""
    token = list_metadata(gateway, metadata, what).get("continue")
    if token:
        raise GpudrvError(
            f"the cluster at {gateway.host} sent part of a list asked for whole (a continue token, "
            f"{token[:40]!r}, to a request without limit): gpudrv will not act on a partial list"
        )
