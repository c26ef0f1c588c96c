"""The fleet audit: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from reconciler.core.tags import Node, TagError, tag


class Status(StrEnum):
    MISSING = "MISSING"
    INVALID = "INVALID"


@dataclass(frozen=True)
class Finding:
    node: str
    status: Status
    detail: str  # the missing tag, or why no tag could be computed
    origin: str | None = None

    def line(self) -> str:
        return f"{self.node} {self.status} {self.detail}"


@dataclass(frozen=True)
class AuditResult:
    audited: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings


def audit(nodes: Iterable[Node], matrix_tags: frozenset[str]) -> AuditResult:
    """Audit the nodes labelled gpu.present=true, in node-name order."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    findings = [finding for node in gpu_nodes if (finding := check(node, matrix_tags))]
    return AuditResult(tuple(node.name for node in gpu_nodes), tuple(findings))


def check(node: Node, matrix_tags: frozenset[str]) -> Finding | None:
    try:
        wanted = tag(node)
    except TagError as exc:
        return Finding(node.name, Status.INVALID, exc.reason, node.origin)
    if wanted in matrix_tags:
        return None
    return Finding(node.name, Status.MISSING, wanted, node.origin)
