"""One workload explained: the nodes its placement admits, why not the others, and CUDA driver checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.cuda import cuda, cuda_gate, on_nodes, placement
from reconciler.core.cuda.placement import Fit, Workload
from reconciler.core.images.tags import Node


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


@dataclass(frozen=True)
class Images:
    """The images' own requirements as read from their registries, and the driver branches' CUDA."""

    reads: Mapping[str, cuda_gate.ImageRead]
    branches: cuda_gate.BranchTable


def report(item: Workload, nodes: Sequence[Node], table: cuda.Table, images: Images | None = None) -> Report:
    """The fit, and the CUDA findings: an image read from its registry is judged by its requirements,
    any other by the NGC table."""
    fit = placement.evaluate(item.placement, nodes)
    fits = set(fit.nodes)  # once: a set per node made 10,000 nodes take a minute
    admitted = [node for node in nodes if node.name in fits]
    if images is None:
        return Report(item, fit, tuple(cuda.check(item.images, item.placement, admitted, table)))
    read = {image for image, found in images.reads.items() if found.requirements is not None}
    by_table = [image for image in item.images if image not in read]
    found = on_nodes.node_findings(item.gpu_images, admitted, images.reads, (images.branches, table))
    return Report(item, fit, (*found, *cuda.check(by_table, item.placement, admitted, table)))
