"""The fleet audit: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from reconciler.core.audit.cluster_names import fleet_note, qualified
from reconciler.core.contract.driver_images import FleetNote, Want, Wants, kernel_next
from reconciler.core.contract.operator import DriverResource, Mode
from reconciler.core.images.tags import KERNEL, Node, TagError, next_kernel, rebooted, tag


class Status(StrEnum):
    MISSING = "MISSING"
    INVALID = "INVALID"
    NEXT_MISSING = "NEXT-MISSING"  # the image for the kernel the node boots next is not there


@dataclass(frozen=True)
class Finding:
    node: str
    status: Status
    detail: str  # the missing tag, or why no tag could be computed
    origin: str | None = None
    image: str | None = None  # the full reference the GPU Operator pulls (None in the lab)
    resource: DriverResource | None = None  # the operator resource that decides the node's driver
    kernel: str | None = None  # the node's kernel label (NEXT-MISSING: its next kernel)

    @property
    def lacks_image(self) -> bool:
        return self.status in (Status.MISSING, Status.NEXT_MISSING)

    def line(self) -> str:
        subject = self.image if self.lacks_image and self.image else self.detail
        text = f"{self.node} {self.status} {subject}"
        if self.status is Status.NEXT_MISSING:
            text += f" (kernel {self.kernel}, at its next reboot)"
        return f"{text} ({self.resource.ref})" if self.resource else text


@dataclass(frozen=True)
class AuditResult:
    audited: tuple[str, ...]
    findings: tuple[Finding, ...]
    mode: Mode = Mode.LAB
    notes: tuple[FleetNote, ...] = ()
    tags: Mapping[str, str | None] = field(default_factory=dict)  # each audited node's tag, if it has one
    # The kernel each node boots next, for the nodes whose next kernel is known and not the running one.
    next_kernels: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings and not self.notes


def audit(nodes: Iterable[Node], matrix_tags: frozenset[str]) -> AuditResult:
    """The lab's audit of the nodes labelled gpu.present=true, in node-name order."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    tags = {node.name: _tag_or_none(node) for node in gpu_nodes}
    findings = []
    for node in gpu_nodes:
        findings += [finding] if (finding := check(node, matrix_tags)) else []
        if tags[node.name] is not None and (finding := _check_lab_next(node, matrix_tags)):
            findings.append(finding)
    upcoming = {
        node.name: kernel for node in gpu_nodes if tags[node.name] and (kernel := _next_or_none(node))
    }
    return AuditResult(
        tuple(node.name for node in gpu_nodes), tuple(findings), tags=tags, next_kernels=upcoming
    )


def _next_or_none(node: Node) -> str | None:
    try:
        return next_kernel(node)
    except TagError:
        return None


def _check_lab_next(node: Node, matrix_tags: frozenset[str]) -> Finding | None:
    try:
        kernel = next_kernel(node)
    except TagError as exc:
        return check_next(Want(node, reason=exc.reason), matrix_tags)
    if kernel is None:
        return None
    later = rebooted(node, kernel)
    return check_next(Want(later, tag=tag(later)), matrix_tags)


def _tag_or_none(node: Node) -> str | None:
    try:
        return tag(node)
    except TagError:
        return None


def audit_wants(found: Wants, matrix_tags: frozenset[str]) -> AuditResult:
    """The audit of the images the driver contract gives each GPU node, on the kernel it runs and on the
    kernel it boots next, with the fleet's notes; findings in node-name order, the running kernel's first."""
    now = [finding for want in found.wants if (finding := check_want(want, matrix_tags))]
    later = [finding for want in found.next_wants if (finding := check_next(want, matrix_tags))]
    findings = sorted(now + later, key=lambda finding: finding.node)  # stable: a node's running one first
    audited = tuple(want.node.name for want in found.wants)
    tags = {want.node.name: want.tag for want in found.wants}
    upcoming = {want.node.name: kernel for want in found.next_wants if (kernel := kernel_next(want))}
    return AuditResult(audited, tuple(findings), found.contract.mode, found.notes, tags, upcoming)


def check_next(want: Want, matrix_tags: frozenset[str]) -> Finding | None:
    """A finding for the image the node needs on its next kernel (core/driver_images.next_want)."""
    finding = check_want(want, matrix_tags)
    if finding is None:
        return None
    if finding.status is Status.INVALID:
        return replace(finding, detail=f"next kernel: {finding.detail}")
    return replace(finding, status=Status.NEXT_MISSING)


def check(node: Node, matrix_tags: frozenset[str]) -> Finding | None:
    try:
        wanted = tag(node)
    except TagError as exc:
        return Finding(node.name, Status.INVALID, exc.reason, node.origin)
    return check_want(Want(node, tag=wanted), matrix_tags)


def check_want(want: Want, matrix_tags: frozenset[str]) -> Finding | None:
    node = want.node
    if want.tag is None:
        return Finding(node.name, Status.INVALID, want.reason or "no tag", node.origin, None, want.resource)
    if want.tag in matrix_tags:
        return None
    kernel = node.labels.get(KERNEL)
    return Finding(node.name, Status.MISSING, want.tag, node.origin, want.image, want.resource, kernel)


# --- many clusters --------------------------------------------------------------------------------


def in_cluster(result: AuditResult, cluster: str) -> AuditResult:
    """The audit of one of many clusters, each node named `CLUSTER/NODE` (a node name has no slash)
    and each fleet note saying its cluster."""

    def name(node: str) -> str:
        return qualified(cluster, node)

    return AuditResult(
        tuple(name(node) for node in result.audited),
        tuple(replace(finding, node=name(finding.node)) for finding in result.findings),
        result.mode,
        tuple(fleet_note(note, cluster) for note in result.notes),
        {name(node): tag for node, tag in result.tags.items()},
        {name(node): kernel for node, kernel in result.next_kernels.items()},
    )


def combined(results: Sequence[AuditResult]) -> AuditResult:
    """Several clusters' audits (in_cluster's) as one: their nodes, findings and notes in cluster
    order. The mode is theirs when they share it, else the GPU Operator's first (a missing image is
    then a driver resource's, per cluster)."""
    modes = [result.mode for result in results] or [Mode.LAB]
    mode = modes[0] if len(set(modes)) == 1 else next(m for m in modes if m is not Mode.LAB)
    return AuditResult(
        tuple(node for result in results for node in result.audited),
        tuple(finding for result in results for finding in result.findings),
        mode,
        tuple(note for result in results for note in result.notes),
        {node: tag for result in results for node, tag in result.tags.items()},
        {node: kernel for result in results for node, kernel in result.next_kernels.items()},
    )
