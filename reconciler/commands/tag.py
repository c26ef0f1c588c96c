"""`gpudrv tag NODE`: the precompiled driver image tag one node needs."""

from __future__ import annotations

from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK
from reconciler.core import operator
from reconciler.errors import GpudrvError


def run(node_name: str, source: NodeSource) -> int:
    contract = source.contract()
    node = source.node(node_name)
    try:
        want = operator.want_of(contract, node)
    except operator.ContractError as exc:
        raise GpudrvError(exc.reason) from None
    if want.tag is None:
        raise GpudrvError(f"node {node.name}: {want.reason}")
    print(want.tag)
    return OK
