"""The fleet audit: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from reconciler.core.driver_images import FleetNote, Want, Wants
from reconciler.core.operator import DriverResource, Mode
from reconciler.core.tags import KERNEL, Node, TagError, tag


class Status(StrEnum):
    MISSING = "MISSING"
    INVALID = "INVALID"


@dataclass(frozen=True)
class Finding:
    node: str
    status: Status
    detail: str  # the missing tag, or why no tag could be computed
    origin: str | None = None
    image: str | None = None  # the full reference the GPU Operator pulls (None in the lab)
    resource: DriverResource | None = None  # the operator resource that decides the node's driver
    kernel: str | None = None  # the node's kernel label, for messages about the image it lacks

    def line(self) -> str:
        subject = self.image if self.status is Status.MISSING and self.image else self.detail
        text = f"{self.node} {self.status} {subject}"
        return f"{text} ({self.resource.ref})" if self.resource else text


@dataclass(frozen=True)
class AuditResult:
    audited: tuple[str, ...]
    findings: tuple[Finding, ...]
    mode: Mode = Mode.LAB
    notes: tuple[FleetNote, ...] = ()
    tags: Mapping[str, str | None] = field(default_factory=dict)  # each audited node's tag, if it has one

    @property
    def ok(self) -> bool:
        return not self.findings and not self.notes


def audit(nodes: Iterable[Node], matrix_tags: frozenset[str]) -> AuditResult:
    """The lab's audit of the nodes labelled gpu.present=true, in node-name order."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    findings = [finding for node in gpu_nodes if (finding := check(node, matrix_tags))]
    tags = {node.name: _tag_or_none(node) for node in gpu_nodes}
    return AuditResult(tuple(node.name for node in gpu_nodes), tuple(findings), tags=tags)


def _tag_or_none(node: Node) -> str | None:
    try:
        return tag(node)
    except TagError:
        return None


def audit_wants(found: Wants, matrix_tags: frozenset[str]) -> AuditResult:
    """The audit of the images the driver contract gives each GPU node, with the fleet's notes."""
    findings = [finding for want in found.wants if (finding := check_want(want, matrix_tags))]
    audited = tuple(want.node.name for want in found.wants)
    tags = {want.node.name: want.tag for want in found.wants}
    return AuditResult(audited, tuple(findings), found.contract.mode, found.notes, tags)


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
