"""Driver changes on a GPU Operator fleet, as data: which nodes a change of the driver resources in git
moves to another driver, the image each will pull, and the gates in the way.

The operator's own upgrade controller carries the change out, node by node, once the resource is
applied; gpudrv's part is to say before that which node would be stranded (its image is not in the
matrix on the merged branch) and which disruption budget would stall the drain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.contract.driver_images import Want
from reconciler.core.contract.operator import DriverResource
from reconciler.core.images.tags import Node
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.upgrade import Gate, Images

# GPU Feature Discovery's driver labels: the newer key first, then the older one the lab also uses.
RUNNING_BRANCH = ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver.major")


@dataclass(frozen=True)
class Move:
    """One GPU node whose driver the desired resources change."""

    node: str
    resource: DriverResource | None
    running: str | None  # the branch the node runs now (GFD's label), None when unknown
    target: str  # the desired resource's version
    image: str | None
    tag: str | None
    gates: tuple[Gate, ...]

    @property
    def blocked(self) -> bool:
        return any(not gate.ok for gate in self.gates)


def running_branch(labels: Mapping[str, str]) -> str | None:
    return next((labels[key] for key in RUNNING_BRANCH if labels.get(key)), None)


def moving(wants: Sequence[Want]) -> dict[str, str]:
    """Per GPU node the desired resources move to another driver: the version they move it to."""
    return {
        want.node.name: want.resource.version
        for want in wants
        if want.resource is not None
        and want.resource.version
        and running_branch(want.node.labels) != want.resource.version
    }


def moves(
    desired: Sequence[Want],
    live: Mapping[str, Node],
    images: Images,
    pods: Mapping[str, Sequence[budget.Pod]],
    budgets: Sequence[budget.Budget],
    *,
    force: bool = False,
) -> list[Move]:
    """Per GPU node (name order) whose desired version differs from the branch it runs: the image
    gate on the merged ref and, for its pods, the budgets the operator's drain would meet."""
    found = []
    for want in sorted(desired, key=lambda item: item.node.name):
        node = live.get(want.node.name, want.node)
        target = want.resource.version if want.resource else ""
        running = running_branch(node.labels)
        if not target or running == target:
            continue
        gates = [
            _image_gate(want, images),
            *upgrade.drain_gates(pods.get(want.node.name, ()), budgets, force),
        ]
        found.append(Move(want.node.name, want.resource, running, target, want.image, want.tag, tuple(gates)))
    return found


def _image_gate(want: Want, images: Images) -> Gate:
    if want.tag is None:
        return Gate(upgrade.GateName.IMAGE, False, f"no image tag: {want.reason}")
    return upgrade.image_gate(want.tag, images)
