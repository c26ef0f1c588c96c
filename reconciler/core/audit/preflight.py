"""`gpudrv preflight --kernel K`: the image each GPU node would need on kernel K, with its own OS and
driver, under the driver contract in force, grouped by pool (OS, driver, the image they need).

KMM's PreflightValidation checks one kernel per module; this checks one kernel against the nodes in
view. The image is the contract's own (driver_images.want_of on the node moved to K by tags.rebooted),
so the os-tag rule of the operator release and an NVIDIADriver's nodeSelector apply as for the running
kernel. Pure: the command reads the nodes and the matrix (or the registry) and hands them here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.audit.audit import Finding, Status, check_want
from reconciler.core.contract import driver_images
from reconciler.core.contract.driver_images import FleetNote, Want, Wants
from reconciler.core.contract.operator import Contract, DriverResource, Mode
from reconciler.core.images import tags
from reconciler.core.images.tags import Node, TagError


def on_kernel(nodes: Iterable[Node], kernel: str) -> list[Node]:
    """Every node as NFD will label it once it runs `kernel` (its next-kernel label gone)."""
    return [tags.rebooted(node, kernel) for node in nodes]


@dataclass(frozen=True)
class Pool:
    """GPU nodes with one OS and one driver, and the one image they all need on the kernel."""

    os_tag: str
    driver: str  # the driver resource's version, else the node's driver-major label ("?": none)
    resource: DriverResource | None
    tag: str
    image: str | None  # the full reference (the operator's, or the registry's); None in the lab
    nodes: tuple[Node, ...]
    ready: bool  # the image is in the matrix (or the registry)

    @property
    def wanted(self) -> str:
        return self.image or self.tag

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)


@dataclass(frozen=True)
class Preflight:
    kernel: str
    mode: Mode
    checked: tuple[str, ...]  # every GPU node looked at, by name
    pools: tuple[Pool, ...]  # ordered by OS, driver, resource, image
    invalid: tuple[Finding, ...]  # nodes whose image on the kernel cannot be computed, as audit says
    notes: tuple[FleetNote, ...] = ()  # the fleet's problems on the kernel (ClusterPolicy's mixed OS)

    @property
    def missing(self) -> tuple[Pool, ...]:
        return tuple(pool for pool in self.pools if not pool.ready)

    @property
    def missing_nodes(self) -> int:
        return sum(len(pool.nodes) for pool in self.missing)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.invalid and not self.notes


def check(contract: Contract, nodes: Iterable[Node], kernel: str, present: frozenset[str]) -> Preflight:
    """The preflight of the GPU nodes among `nodes` for `kernel` against the `present` tags; raises
    ContractError when two NVIDIADrivers would claim a node on that kernel."""
    return decide(driver_images.wants(contract, on_kernel(nodes, kernel)), kernel, present)


def decide(found: Wants, kernel: str, present: frozenset[str], repository: str | None = None) -> Preflight:
    """Pools from the wants of the nodes already moved to `kernel` (see on_kernel); `repository`: the
    tags were looked up there, and each pool names the reference it looked up."""
    groups: dict[tuple[str, str, str, str, str], list[Want]] = {}
    invalid: list[Finding] = []
    for want in found.wants:
        finding = check_want(want, present)
        if want.tag is None:
            invalid.append(finding or Finding(want.node.name, Status.INVALID, want.reason or "no tag"))
            continue
        image = f"{repository}:{want.tag}" if repository else want.image
        key = (
            _os_tag(found.contract, want.node),
            _driver(want),
            want.resource.ref if want.resource else "",
            want.tag,
            image or "",
        )
        groups.setdefault(key, []).append(want)
    pools = tuple(_pool(key, members, present) for key, members in sorted(groups.items()))
    checked = tuple(want.node.name for want in found.wants)
    return Preflight(kernel, found.contract.mode, checked, pools, tuple(invalid), found.notes)


def _pool(key: tuple[str, str, str, str, str], members: Sequence[Want], present: frozenset[str]) -> Pool:
    os_tag, driver, _, tag, image = key
    nodes = tuple(sorted((want.node for want in members), key=lambda node: node.name))
    return Pool(os_tag, driver, members[0].resource, tag, image or None, nodes, tag in present)


def _os_tag(contract: Contract, node: Node) -> str:
    try:
        return driver_images.own_os_tag(node, contract.rule)
    except TagError:  # a ClusterPolicy pinned by digest needs no os tag: its image has none
        return "?"


def _driver(want: Want) -> str:
    if want.resource is not None and want.resource.version:
        return want.resource.version
    branch = want.node.labels.get(tags.DRIVER_MAJOR, "")
    return branch if branch.isdigit() and branch.isascii() else "?"
