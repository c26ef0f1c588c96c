"""One workload explained: the nodes its placement admits, why not the others, and CUDA driver checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.core import cuda, placement
from reconciler.core.placement import Fit, Workload
from reconciler.core.tags import Node


@dataclass(frozen=True)
class Report:
    workload: Workload
    fit: Fit
    findings: tuple[cuda.Finding, ...]

    @property
    def unplaced(self) -> bool:
        return not self.fit.nodes

    def count(self, severity: cuda.Severity) -> int:
        return sum(finding.severity is severity for finding in self.findings)


def report(item: Workload, nodes: Sequence[Node], table: cuda.Table) -> Report:
    fit = placement.evaluate(item.placement, nodes)
    fits = set(fit.nodes)  # once: a set per node made 10,000 nodes take a minute
    admitted = [node for node in nodes if node.name in fits]
    return Report(item, fit, tuple(cuda.check(item.images, item.placement, admitted, table)))
