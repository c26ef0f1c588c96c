"""`gpudrv explain [KIND/NAME]`: the nodes a workload's placement admits, why not the others, and
whether the drivers it admits can run its CUDA images.

Offline (`--from DIR`) it reads nodes and workloads from the same tree; live it reads every node
and one pod or every pod of a namespace, and adds the scheduler's own PodScheduled message.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reconciler.adapters import desired
from reconciler.adapters.ci import github
from reconciler.adapters.cluster import workloads
from reconciler.adapters.files import manifests
from reconciler.adapters.sources import NodeSource
from reconciler.commands import FINDINGS, OK, Output, cuda_gates
from reconciler.core.contract import driver_images
from reconciler.core.cuda import cuda, cuda_gate, placement
from reconciler.core.cuda.placement import Workload
from reconciler.core.images.tags import Node
from reconciler.core.views.explain import Images, Report, report
from reconciler.errors import GpudrvError
from reconciler.render import document, explain

_ALIASES = {
    "Pod": ("pod", "pods", "po"),
    "Job": ("job", "jobs"),
    "CronJob": ("cronjob", "cronjobs", "cj"),
    "Deployment": ("deployment", "deployments", "deploy"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"),
}
KINDS = {alias: kind for kind, aliases in _ALIASES.items() for alias in (*aliases, kind.lower())}


def run(
    target: str | None,
    namespace: str | None,
    source: NodeSource,
    output: Output,
    registry_images: bool = True,
) -> int:
    table = load_table()
    nodes, items = read(target, namespace, source)
    images = _images(items, nodes) if registry_images else None
    reports = [report(item, nodes, table, images) for item in items]
    code = exit_code(reports, output)
    if output is Output.GITHUB:
        github.publish(explain.annotate(reports), explain.summary(reports), explain.closing(reports))
    elif output.structured:
        data = explain.as_json(reports, code == OK)
        print(document.text({**data, "desired": source.desired.as_json()}, output))
    else:
        print(explain.as_text(reports))
    return code


def exit_code(reports: Sequence[Report], output: Output) -> int:
    """1 on a driver too old for an image; outside a PR check also when a workload fits no node
    (in a PR check that is only a warning: Pending can be intended)."""
    errors = any(report.count(cuda.Severity.ERROR) for report in reports)
    unplaced = output is not Output.GITHUB and any(report.unplaced for report in reports)
    return FINDINGS if errors or unplaced else OK


def load_table(path: Path = cuda_gates.COMPAT_FILE) -> cuda.Table:
    return cuda_gates.load_compat(path)


def _images(items: Sequence[Workload], nodes: Sequence[Node]) -> Images:
    """The images of the workloads' GPU containers, read for the GPU nodes' platforms (amd64 when none
    says)."""
    platforms = {cuda_gate.platform(node.labels) for node in nodes if node.gpu_present} or {"linux/amd64"}
    reads = cuda_gates.read_images(
        (image, on) for item in items for image in item.gpu_images for on in platforms
    )
    by_image: dict[str, cuda_gate.ImageRead] = {}
    for (image, _), found in sorted(reads.items()):  # the first platform that could be read wins
        if by_image.get(image) is None or by_image[image].requirements is None:
            by_image[image] = found
    return Images(by_image, cuda_gates.load_table())


def read(target: str | None, namespace: str | None, source: NodeSource) -> tuple[list[Node], list[Workload]]:
    kind, name = parse_target(target)
    if source.from_dir is not None:
        found = _select(workloads.load_workloads(source.from_dir), kind, name, namespace)
        if target is not None and not found:
            within = f" in namespace {namespace}" if namespace else ""
            raise GpudrvError(f"{target} not found{within} under {source.from_dir}")
        nodes = [node for node in manifests.load_nodes(source.from_dir) if source.selects(node)]
        return _as_upgraded(source, nodes), found
    if kind not in (None, "Pod"):
        raise GpudrvError(
            f"live, explain reads pods: give pod/NAME or no target (for {target}, use --from DIR)"
        )
    live = workloads.read_live(
        source.cluster, namespace or placement.DEFAULT_NAMESPACE, name, source.selector
    )
    return live.nodes, live.pods


def _as_upgraded(source: NodeSource, nodes: list[Node]) -> list[Node]:
    """With the GPU Operator's driver resources in the tree, each GPU node as it will be once they are
    rolled out (the branch its resource names); other nodes, and the lab, as declared."""
    state = source.desired
    if not state.operator:
        return nodes
    wanted = {want.node.name: want for want in desired.wants(state, nodes).wants}
    return [driver_images.as_upgraded(wanted[node.name]) if node.name in wanted else node for node in nodes]


def parse_target(target: str | None) -> tuple[str | None, str | None]:
    """`pod/NAME` -> ("Pod", NAME); a bare NAME is any kind (live: a pod)."""
    if target is None:
        return None, None
    alias, slash, name = target.partition("/")
    if not slash:
        return None, target
    if alias.lower() not in KINDS:
        raise GpudrvError(
            f"{target}: unknown kind {alias!r}; use pod, job, cronjob, deployment or statefulset"
        )
    if not name or "/" in name:
        raise GpudrvError(f"{target}: give KIND/NAME, e.g. pod/cuda13-job")
    return KINDS[alias.lower()], name


def _select(
    items: list[Workload], kind: str | None, name: str | None, namespace: str | None
) -> list[Workload]:
    return [
        item
        for item in items
        if kind in (None, item.kind) and name in (None, item.name) and namespace in (None, item.namespace)
    ]
