"""Where nodes and the matrix come from: manifests in git (`--from DIR`) or the live cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reconciler.adapters import cluster, files, kube, manifests, schemas
from reconciler.core import matrix
from reconciler.core.tags import Node
from reconciler.errors import GpudrvError


@dataclass(frozen=True)
class NodeSource:
    from_dir: Path | None = None
    cluster: kube.Options = field(default_factory=kube.Options)

    def gpu_nodes(self) -> list[Node]:
        if self.from_dir is not None:
            return [node for node in manifests.load_nodes(self.from_dir) if node.gpu_present]
        return cluster.connect(self.cluster).gpu_nodes()

    def node(self, name: str) -> Node:
        if self.from_dir is not None:
            found = next((node for node in manifests.load_nodes(self.from_dir) if node.name == name), None)
            where = f"in {self.from_dir}"
        else:
            live = cluster.connect(self.cluster)
            found, where = live.node(name), f"in the cluster at {live.host}"
        if found is None:
            raise GpudrvError(f"node {name} not found {where}")
        return found


def read_matrix(path: Path) -> tuple[str, matrix.Matrix]:
    """The matrix file's text and its parse; problems are left for the caller to report."""
    text = files.read_text(path)
    return text, matrix.parse(text, schemas.load("matrix-row"))


def valid_matrix(path: Path) -> matrix.Matrix:
    """The parsed matrix, or one error line naming the first problem."""
    return require_valid(path, read_matrix(path)[1])


def require_valid(path: Path, parsed: matrix.Matrix) -> matrix.Matrix:
    if parsed.problems:
        first, more = parsed.problems[0], len(parsed.problems) - 1
        tail = f" (and {more} more; run gpudrv matrix validate)" if more else ""
        raise GpudrvError(f"{first.message}{tail}", file=str(path), line=first.line)
    return parsed
