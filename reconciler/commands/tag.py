"""`gpudrv tag NODE`: the precompiled driver image tag one node needs."""

from __future__ import annotations

from reconciler.adapters import desired
from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK, Output
from reconciler.errors import GpudrvError
from reconciler.render import document


def run(node_name: str, source: NodeSource, output: Output = Output.TEXT) -> int:
    state = source.desired  # the resources first: a broken one is said before the node is read
    want = desired.want(state, source.node(node_name))
    node = want.node
    if want.tag is None:
        raise GpudrvError(f"node {node.name}: {want.reason}")
    if output.structured:
        data = document.document(
            "tag", True, node=node.name, tag=want.tag, image=want.image, desired=state.as_json()
        )
        print(document.text(data, output))
    else:
        print(want.tag)
    return OK
