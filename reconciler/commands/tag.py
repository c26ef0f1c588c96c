"""`gpudrv tag NODE`: the precompiled driver image tag one node needs."""

from __future__ import annotations

from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK
from reconciler.core import tags
from reconciler.errors import GpudrvError


def run(node_name: str, source: NodeSource) -> int:
    node = source.node(node_name)
    try:
        print(tags.tag(node))
    except tags.TagError as exc:
        raise GpudrvError(str(exc)) from None
    return OK
