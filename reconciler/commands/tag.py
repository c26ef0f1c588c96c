"""`gpudrv tag NODE`: the precompiled driver image tag one node needs."""

from __future__ import annotations

from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK, Output
from reconciler.core.contract import driver_images, operator
from reconciler.errors import GpudrvError
from reconciler.render import document


def run(node_name: str, source: NodeSource, output: Output = Output.TEXT) -> int:
    contract = source.contract()
    node = source.node(node_name)
    try:
        want = driver_images.want_of(contract, node)
    except operator.ContractError as exc:
        raise GpudrvError(exc.reason) from None
    if want.tag is None:
        raise GpudrvError(f"node {node.name}: {want.reason}")
    if output.structured:
        data = document.document(
            "tag", True, node=node.name, tag=want.tag, image=want.image, desired=source.desired.as_json()
        )
        print(document.text(data, output))
    else:
        print(want.tag)
    return OK
