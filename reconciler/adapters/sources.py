"""Where nodes and the matrix come from: manifests in git (`--from DIR`) or the live cluster."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.adapters import desired, files, kube
from reconciler.adapters.cluster import Cluster, connect
from reconciler.adapters.files import config, manifests, schemas
from reconciler.core.audit import preflight
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.core.contract.driver_images import Wants
from reconciler.core.contract.operator import Contract
from reconciler.core.images import matrix
from reconciler.core.images.tags import GPU_PRESENT, Node
from reconciler.core.views import reads
from reconciler.errors import GpudrvError


class NoGpuNode(GpudrvError):
    """A check that found no GPU node to check: a wrong --from, a -l that matches nothing, a cluster
    without GPU nodes. Exit 2, so a scheduled check never passes having checked nothing."""


def require_gpu_nodes(count: int, where: str, selector: LabelSelector | None, allow_empty: bool) -> None:
    """Refuse an empty set of GPU nodes `where` (`in DIR`, `in the cluster at HOST`) unless the fleet
    is declared empty (--allow-empty)."""
    if count or allow_empty:
        return
    if selector is not None:
        raise no_gpu_node(f"no GPU node {where} matches -l {selector.text()}")
    raise no_gpu_node(f"no GPU node {where} (no node labelled {GPU_PRESENT}=true)")


def no_gpu_node(subject: str) -> NoGpuNode:
    return NoGpuNode(f"{subject}: nothing was checked (--allow-empty if that is expected)")


@dataclass(frozen=True)
class NodeSource:
    """Nodes, and the GPU Operator's driver resources that decide their images, from one place."""

    from_dir: Path | None = None
    cluster: kube.Options = field(default_factory=kube.Options)
    operator_version: str | None = None  # None: the running operator's release live, else the newest
    selector: LabelSelector | None = None  # -l: only these nodes (the manifests' labels with --from)
    allow_empty: bool = False  # --allow-empty: no GPU node is a result, not an error
    version_from_config: bool = False  # operator_version is gpudrv.yaml's, not --operator-version
    helm: config.HelmValues | None = None  # gpudrv.yaml's helm: values files and chart version
    desired_dir: Path | None = None  # live nodes, the desired state in git there (status --from)
    config_origin: str = "gpudrv.yaml"  # where a gpudrv.yaml operatorVersion was written (file:line)

    @property
    def pins(self) -> desired.Pins:
        if self.version_from_config:
            return desired.Pins(
                config=self.operator_version, helm=self.helm, config_origin=self.config_origin
            )
        return desired.Pins(flag=self.operator_version, helm=self.helm, config_origin=self.config_origin)

    @property
    def desired(self) -> Desired:
        """The fleet's desired state (core/contract/desired.py), read once per run: git's with --from,
        else the cluster's. Its notes are said once."""
        found: Desired | None = self.__dict__.get("_desired")
        if found is None:
            if self.from_dir is not None:
                found = desired.from_git(self.from_dir, self.pins)
            elif self.desired_dir is not None:
                found = desired.on_cluster(desired.from_git(self.desired_dir, self.pins), self.live.gateway)
            else:
                found = desired.from_cluster(self.live.gateway, self.pins)
            self.__dict__["_desired"] = found
        return found

    def where(self) -> str:
        """Where the nodes are read, for messages: `in DIR` or `in the cluster at HOST`."""
        return f"in {self.from_dir}" if self.from_dir is not None else f"in the cluster at {self.live.host}"

    def require(self, count: int) -> None:
        """No GPU node read is exit 2 (see NoGpuNode), unless allow_empty."""
        require_gpu_nodes(count, self.where(), self.selector, self.allow_empty)

    @property
    def live(self) -> Cluster:
        """One connection per run, shared by every read. Not a cached_property: before Python 3.12 its
        lock is the class's, so clusters read side by side (commands/clusters.py) would connect one
        at a time, exec credential plugins and all."""
        found: Cluster | None = self.__dict__.get("_live")
        if found is None:
            found = self.__dict__["_live"] = connect(self.cluster)
        return found

    def gpu_nodes(self, labels: Collection[str] | None = None) -> list[Node]:
        """Live, each node keeps only `labels` (None: all); manifests are small and keep all."""
        if self.from_dir is not None:
            return [
                node
                for node in manifests.load_nodes(self.from_dir)
                if node.gpu_present and self.selects(node)
            ]
        return self.live.gpu_nodes(self.selector, labels)

    def selects(self, node: Node) -> bool:
        return self.selector is None or self.selector.matches(node.labels)

    def contract(self) -> Contract:
        """The driver resources in force: the manifests' with --from, else the cluster's."""
        return self.desired.contract

    def wants(self, kernel: str | None = None) -> Wants:
        """Every GPU node with the image the contract gives it (read the resources first: a broken
        resource is reported before any node is read); `kernel`: on that kernel instead of its own
        (gpudrv preflight)."""
        found = self.desired
        nodes = self.gpu_nodes(reads.for_contract(found.contract))
        return desired.wants(found, preflight.on_kernel(nodes, kernel) if kernel else nodes)

    def node(self, name: str) -> Node:
        if self.from_dir is not None:
            found = next((node for node in manifests.load_nodes(self.from_dir) if node.name == name), None)
            where = f"in {self.from_dir}"
        else:
            found, where = self.live.node(name), f"in the cluster at {self.live.host}"
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
