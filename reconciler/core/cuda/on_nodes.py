"""An image's requirements judged on the drivers nodes run now, as their labels show them: explain's
findings per admitted node, and the fleet page's rows (cuda_workloads.py). The gate over a moving node's
pods is cuda_gate.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.core.cuda import cuda
from reconciler.core.cuda.cuda_gate import (
    CUDA_FULL,
    Bounds,
    BranchTable,
    Driver,
    ImageRead,
    State,
    branch_of,
    driver,
    judge,
    label_cuda,
)
from reconciler.core.cuda.cuda_require import ImageRequirements
from reconciler.core.images.tags import Node

Tables = tuple[BranchTable, cuda.Table]  # the branches' CUDA versions, and the NGC images'


def node_driver(node: Node, table: BranchTable) -> Driver | None:
    """The driver a node runs, as its labels show it (GFD's full version, else the lab's parts)."""
    shown = node.labels.get("nvidia.com/cuda.driver-version.full", "")
    version = shown if branch_of(shown) is not None else str(cuda.node_driver(node) or "")
    found = driver(version, table, {})
    if found is None:
        return None
    cuda_label = label_cuda(node.labels)
    if cuda_label is None:
        return found
    return Driver(version, Bounds(found.cuda.branch, cuda_label, cuda_label), f"its {CUDA_FULL}")


def node_findings(
    images: Sequence[str], admitted: Sequence[Node], reads: Mapping[str, ImageRead], tables: Tables
) -> list[cuda.Finding]:
    """Per image read, the admitted nodes whose driver it breaks on (error) or cannot be confirmed on
    (warning), one finding per image and driver. An image not read is judged by the NGC table by the
    caller; one the table does not know either is a warning saying it was not checked."""
    findings: list[cuda.Finding] = []
    branches, compat = tables
    drivers = [(node.name, found) for node in admitted if (found := node_driver(node, branches)) is not None]
    for image in dict.fromkeys(images):
        read = reads.get(image)
        if read is None:
            continue
        if read.requirements is None:
            known = compat.need(image) is not None
            if read.failed or not known:  # named, whatever table the caller falls back to
                table = "judged by data/cuda-compat.json" if known else "not in data/cuda-compat.json either"
                message = f"{image} was not read from its registry ({read.note}; {table})"
                findings.append(cuda.Finding(cuda.Severity.WARNING, image, "", (), message))
            continue
        by_driver: dict[Driver, list[str]] = {}
        for name, found in drivers:
            by_driver.setdefault(found, []).append(name)
        for found, names in by_driver.items():
            verdict = judge(read.requirements, found)
            if verdict.state is State.OK:
                continue
            severity = cuda.Severity.ERROR if verdict.state is State.BREAKS else cuda.Severity.WARNING
            message = f"{image} {verdict.message}; on {', '.join(names)}"
            findings.append(cuda.Finding(severity, image, _cuda_of(read.requirements), tuple(names), message))
    return findings


def _cuda_of(image: ImageRequirements) -> str:
    return next((item.text.split(" ", 1)[0] for item in image.requirements), "")
