"""The CUDA gate for plan and apply: read the GPU pods' images from their registries (once per image and
platform, for the whole run), then judge each node's pods against the driver it would move to
(core/cuda/cuda_gate.py). `--registry-images off` reads nothing: only the NGC images of data/cuda-compat.json
are judged. The gate fails closed: an image whose config could not be read, or that was not read and the
table does not know, refuses the driver change unless --allow-unverified-images, which the plan names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from reconciler.adapters import desired, files
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.registry import image_config
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.core.cuda import cuda, cuda_gate, cuda_require, cuda_workloads
from reconciler.core.cuda.cuda_gate import BranchTable, ImageRead
from reconciler.core.images.tags import Node
from reconciler.core.rollout import rollout
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.upgrade import BEFORE_CORDON, Gate, GateName, NodePlan
from reconciler.core.views import reads

TABLE_FILE = files.DATA / "driver-cuda.json"
# Inside the package, so they ship in the wheel with no packaging rule of their own.
COMPAT_FILE = files.DATA / "cuda-compat.json"


def load_table() -> BranchTable:
    return files.read_json(TABLE_FILE, cuda_gate.parse_table)


def load_compat(path: Path = COMPAT_FILE) -> cuda.Table:
    return files.read_json(path, cuda.parse_table)


def read_images(
    requests: Iterable[tuple[str, str]], enabled: bool = True
) -> dict[tuple[str, str], ImageRead]:
    """Each (image, platform)'s requirements from its registry, or why they could not be read."""
    wanted = sorted(set(requests))
    if not enabled or not wanted:
        return {}
    found = image_config.read_configs(wanted)
    return {
        key: ImageRead(None, f"config not read: {config.note}")
        if config.env is None
        else ImageRead(cuda_require.image_requirements(config.env))
        for key, config in found.items()
    }


@dataclass
class Gates:
    """One run's gate: the tables, the fleet's observed CUDA versions, and the image reads so far."""

    reading: cuda_gate.Reading
    nodes: Sequence[Node]  # the live nodes: their platform, and the CUDA version GFD shows per branch
    table: BranchTable = field(default_factory=load_table)
    fallback: cuda.Table = field(default_factory=load_compat)
    reads: dict[tuple[str, str], ImageRead] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.know(self.nodes)

    def know(self, nodes: Sequence[Node]) -> None:
        """The nodes' platforms, and per branch the CUDA version GFD shows on one of them."""
        self._platforms = {node.name: cuda_gate.platform(node.labels) for node in nodes}
        self._seen = cuda_gate.observed([(node.name, node.labels) for node in nodes])

    def on_moves(
        self, moves: Sequence[rollout.Move], pods: Mapping[str, Sequence[budget.Pod]], nodes: Sequence[Node]
    ) -> list[rollout.Move]:
        """The GPU Operator's moves, each with the CUDA gate of its node's pods at its target."""
        self.know(nodes)
        self.read(pods, [move.node for move in moves])
        gated = []
        for move in moves:
            gate = self.gate(move.node, move.target, pods.get(move.node, ()))
            gated.append(replace(move, gates=(*move.gates, gate)) if gate is not None else move)
        return gated

    def read(self, pods: Mapping[str, Sequence[budget.Pod]], moving: Collection[str]) -> None:
        """Read every image of the GPU pods on the `moving` nodes not read yet (one batch)."""
        wanted = {
            (item.image, self._platforms.get(node, "linux/amd64"))
            for node in moving
            for item in cuda_gate.pod_images(pods.get(node, ()))
        }
        self.reads.update(read_images(wanted - set(self.reads), self.reading.registry))

    def gate(self, node: str, version: str, pods: Sequence[budget.Pod]) -> Gate | None:
        """The node's gate for moving to driver `version`; None when the version names no branch."""
        target = cuda_gate.driver(version, self.table, self._seen)
        if target is None:
            return None
        where = self._platforms.get(node, "linux/amd64")
        reads = {image: read for (image, on), read in self.reads.items() if on == where}
        if not self.reading.registry:
            reads = {}
        checks = cuda_gate.checks(cuda_gate.pod_images(pods), target, reads, self.fallback)
        return cuda_gate.gate(checks, target, self.reading.allow_unverified)


def fleet_rows(
    nodes: Sequence[Node],
    pods: Mapping[str, Sequence[budget.Pod]],
    moving: Mapping[str, str],
    enabled: bool,
) -> tuple[cuda_workloads.Judged, ...]:
    """The fleet page's CUDA workloads: every GPU pod image on the nodes, read once per platform, on
    the driver its node runs and on the one the driver resources move it to (`moving`)."""
    gates = Gates(cuda_gate.Reading(enabled), nodes)
    gates.read(pods, [node.name for node in nodes])
    return cuda_workloads.rows(nodes, pods, gates.reads, moving, (gates.table, gates.fallback))


def with_gate(plan: NodePlan, gate: Gate | None) -> NodePlan:
    """A lab plan with the CUDA gate before its cordon gate, where the plan reached its gates at all and
    its upgrade has not begun (a node already cordoned for it goes on)."""
    if gate is None or plan.target_tag is None or plan.skipped or plan.steps[0] not in BEFORE_CORDON:
        return plan
    if plan.gates and plan.gates[-1].name is GateName.CORDON:
        return replace(plan, gates=(*plan.gates[:-1], gate, plan.gates[-1]))
    return replace(plan, gates=(*plan.gates, gate))


def operator_refusals(
    fleet: Fleet, state: Desired, selector: LabelSelector | None, reading: cuda_gate.Reading
) -> list[tuple[str, str]]:
    """Before a GPU Operator rollout writes anything: each node the driver resources move whose GPU
    pods' images refuse its new driver, and the gate's detail."""
    live = fleet.cluster.gpu_nodes(selector, reads.for_contract(state.contract))
    moving = rollout.moving(desired.wants(state, live).wants)
    if not moving:
        return []
    gates = Gates(reading, live)
    pods = fleet.pods_on_nodes(list(moving))
    gates.read(pods, list(moving))
    refused = []
    for name, version in sorted(moving.items()):
        gate = gates.gate(name, version, pods.get(name, ()))
        if gate is not None and not gate.ok:
            refused.append((name, gate.detail))
    return refused
