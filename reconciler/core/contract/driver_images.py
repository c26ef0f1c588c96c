"""The image each GPU node needs under the driver contract in force (core/contract/operator.py), as the GPU
Operator builds it, and the problems of the fleet as a whole that the contract causes (the mixed-OS
ClusterPolicy trap, one kernel on two OS versions). docs/operator-contract.md gives the operator's
file and line for each rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.core.contract.operator import (
    MAJOR_LABEL_POOLS,
    OS_VERSION_MAJOR,
    Contract,
    DriverResource,
    Kind,
    Mode,
    image_base,
)
from reconciler.core.images import tags
from reconciler.core.images.os_tags import Rule
from reconciler.core.images.tags import Node, TagError


@dataclass(frozen=True)
class Want:
    """The driver image a GPU node needs: its tag (what the matrix lists) and the full reference the
    operator pulls (None in lab mode), or `reason` when the labels give none."""

    node: Node
    resource: DriverResource | None = None
    tag: str | None = None
    image: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class FleetNote:
    """A problem of the fleet as a whole, not of one node's image: the mixed-OS ClusterPolicy trap."""

    message: str
    resource: DriverResource | None
    nodes: tuple[str, ...] = ()

    @property
    def origin(self) -> str | None:
        return self.resource.origin if self.resource else None


@dataclass(frozen=True)
class Wants:
    contract: Contract
    wants: tuple[Want, ...]
    notes: tuple[FleetNote, ...] = ()
    # The image each node needs on the kernel it boots next (tags.NEXT_KERNEL), for the nodes whose
    # next kernel differs from the running one and whose running want has a tag; in node-name order.
    next_wants: tuple[Want, ...] = ()


def wants(contract: Contract, nodes: Iterable[Node]) -> Wants:
    """The image of every GPU node under the contract, in node-name order, and the fleet's notes."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    found = tuple(want_of(contract, node) for node in gpu_nodes)
    notes = mixed_os_notes(contract, gpu_nodes) if contract.mode is Mode.CLUSTER_POLICY else ()
    upcoming = tuple(later for want in found if want.tag is not None and (later := next_want(contract, want)))
    return Wants(contract, found, notes, upcoming)


def next_want(contract: Contract, want: Want) -> Want | None:
    """The image the node needs once it reboots into its next kernel, under the same contract (an
    NVIDIADriver that selects by kernel is chosen again); None when the next kernel is the running one.
    A next-kernel label that cannot be part of a tag is a Want with its reason, on the node as it is."""
    try:
        kernel = tags.next_kernel(want.node)
    except TagError as exc:
        return Want(want.node, want.resource, reason=exc.reason)
    return want_of(contract, tags.rebooted(want.node, kernel)) if kernel else None


def kernel_next(want: Want) -> str | None:
    """The kernel a want of Wants.next_wants is for (the rebooted node runs it); None for a
    next-kernel label that gives no kernel (that want has its reason, on the node as it is)."""
    if tags.NEXT_KERNEL in want.node.labels:
        return None
    return want.node.labels.get(tags.KERNEL)


def want_of(contract: Contract, node: Node) -> Want:
    try:
        governing = contract.governing(node)
        if contract.mode is Mode.LAB:
            return Want(node, tag=lab_key(node, contract.rule).tag)
        if governing is None:
            return Want(node, reason="no NVIDIADriver selects it: the operator deploys no driver there")
        reference = image_for(governing, node, _pool_os_tag(contract, node))
    except TagError as exc:
        return Want(
            node, contract.governing(node) if contract.mode is not Mode.LAB else None, reason=exc.reason
        )
    return Want(node, governing, tag=tag_of(reference), image=reference)


def lab_key(node: Node, rule: Rule) -> tags.ImageKey:
    """The lab's image: the node's own driver-major label, kernel and os tag."""
    return tags.image_key(node, rule.os_tag)


def kernel_of(node: Node) -> str:
    return tags.kernel_label(node, tags.KERNEL)


def own_os_tag(node: Node, rule: Rule) -> str:
    return tags.node_os_tag(node, rule.os_tag)


def _pool_os_tag(contract: Contract, node: Node) -> str:
    """The node's os tag. From v26.7.0 an NVIDIADriver pool whose tag keeps only the major version
    selects its nodes by the VERSION_ID.major label, so a node without that label gets no driver."""
    os_tag = own_os_tag(node, contract.rule)
    version = node.labels.get(tags.OS_VERSION_ID, "")
    pooled_by_major = contract.mode is Mode.NVIDIA_DRIVER and (
        contract.release is None or contract.release >= MAJOR_LABEL_POOLS
    )
    if pooled_by_major and not os_tag.endswith(version) and not node.labels.get(OS_VERSION_MAJOR):
        raise TagError(
            node.name,
            f"label {OS_VERSION_MAJOR} is missing: the operator's NVIDIADriver pool for {os_tag} "
            "selects nodes by it (NFD sets it) and skips this node",
        )
    return os_tag


def image_for(item: DriverResource, node: Node, os_tag: str) -> str:
    """The reference the operator builds (ClusterPolicy: resolveDriverTag; NVIDIADriver:
    GetPrecompiledImagePath), for this node's kernel and the given os tag."""
    kernel = kernel_of(node)
    if item.kind is Kind.CLUSTER_POLICY:
        base = item.image if not item.repository and not item.version else image_base(item)
        reference = f"{base}-{kernel}" + ("" if "sha256:" in base else f"-{os_tag}")
    else:
        reference = f"{image_base(item)}-{kernel}-{os_tag}"
    tag = tag_of(reference)
    if tag is None or not tags.valid_tag(tag):
        raise TagError(node.name, tags.invalid_tag_reason(tag or reference))
    return reference


def tag_of(reference: str) -> str | None:
    """The tag of `registry[:port]/path/name:tag`: after the last ':' of the last path component."""
    last = reference.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def mixed_os_notes(contract: Contract, gpu_nodes: Sequence[Node]) -> tuple[FleetNote, ...]:
    """ClusterPolicy builds every pool's tag from the os tag of ONE GPU node it happens to list first
    (a Limit(1) list from its cache): on a fleet with several os tags, the nodes of the other OS pull
    an image built for the wrong OS. And one kernel on two OS versions stops the operator outright."""
    policy = contract.policy
    if policy is None:
        return ()
    by_os: dict[str, list[Node]] = {}
    for node in gpu_nodes:
        try:
            by_os.setdefault(own_os_tag(node, contract.rule), []).append(node)
        except TagError:
            continue
    notes = [note for note in (_kernel_clash(policy, gpu_nodes),) if note]
    if len(by_os) > 1:
        notes.append(_mixed_os(contract, policy, by_os))
    return tuple(notes)


def _mixed_os(contract: Contract, policy: DriverResource, by_os: Mapping[str, list[Node]]) -> FleetNote:
    counts = ", ".join(f"{os_tag} ({len(nodes)})" for os_tag, nodes in sorted(by_os.items()))
    cases = []
    for read_os in sorted(by_os):
        wrong = [
            f"{node.name} pulls {_safe_image(policy, node, read_os)}"
            for os_tag, nodes in sorted(by_os.items())
            if os_tag != read_os
            for node in nodes
        ]
        cases.append(f"If it reads a {read_os} node: " + "; ".join(_first(wrong, 5)))
    message = (
        f"{policy.ref} builds every driver image tag from the OS of ONE GPU node (whichever its cached "
        f"list returns first), but the GPU nodes run {len(by_os)} OS versions: {counts}. "
        + " | ".join(cases)
        + ". Fix: set spec.driver.useNvidiaDriverCRD: true and declare one NVIDIADriver per OS, "
        "with a nodeSelector on feature.node.kubernetes.io/system-os_release.ID and VERSION_ID"
    )
    names = tuple(node.name for nodes in by_os.values() for node in nodes)
    return FleetNote(message, policy, names)


def _kernel_clash(policy: DriverResource, gpu_nodes: Sequence[Node]) -> FleetNote | None:
    """The operator's kernel map refuses one kernel seen with two os-release ID+VERSION_ID."""
    seen: dict[str, tuple[str, str]] = {}
    for node in gpu_nodes:
        kernel, full_os = node.labels.get(tags.KERNEL), _full_os(node)
        if not kernel or full_os is None:
            continue
        first = seen.setdefault(kernel, (full_os, node.name))
        if first[0] != full_os:
            message = (
                f"kernel {kernel} runs on {first[1]} ({first[0]}) and on {node.name} ({full_os}): "
                f"with {policy.ref} the GPU Operator stops with 'different OS versions found for the same "
                "kernel version' and deploys no precompiled driver at all"
            )
            return FleetNote(message, policy, (first[1], node.name))
    return None


def _full_os(node: Node) -> str | None:
    os_id, version = node.labels.get(tags.OS_ID), node.labels.get(tags.OS_VERSION_ID)
    return f"{os_id}{version}" if os_id and version else None


def _safe_image(policy: DriverResource, node: Node, os_tag: str) -> str:
    try:
        return image_for(policy, node, os_tag)
    except TagError as exc:
        return f"nothing ({exc.reason})"


def _first(items: Sequence[str], count: int) -> list[str]:
    return [*items[:count], f"and {len(items) - count} more"] if len(items) > count else list(items)


# GPU Feature Discovery's driver labels, the older and the newer keys; the lab uses the older.
DRIVER_LABELS = (
    (tags.DRIVER_MAJOR, tags.DRIVER_MINOR, tags.DRIVER_REV),
    (
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ),
)


def as_upgraded(want: Want) -> Node:
    """The node as it will be labelled once its driver resource is rolled out: GFD reports the new
    branch, and its minor and revision are not known yet (so they are left out, read as 0)."""
    branch = want.resource.version if want.resource else ""
    major = want.node.labels.get(tags.DRIVER_MAJOR)
    if not branch.isdigit() or major == branch:
        return want.node
    labels = dict(want.node.labels)
    for major_key, *rest in DRIVER_LABELS:
        if major_key in labels or major_key == tags.DRIVER_MAJOR:
            labels[major_key] = branch
        for key in rest:
            labels.pop(key, None)
    labels.pop("nvidia.com/cuda.driver-version.full", None)
    return replace(want.node, labels=labels)
