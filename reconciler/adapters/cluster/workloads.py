"""Workloads to explain: pod templates from manifests in git, or live pods with the scheduler's verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import cluster, kube
from reconciler.adapters.files import manifests, positions
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.cuda import placement
from reconciler.core.cuda.placement import Workload
from reconciler.core.images import node_schema
from reconciler.core.images.tags import Node
from reconciler.core.views import reads
from reconciler.errors import GpudrvError


@dataclass(frozen=True)
class Live:
    """What a live explain reads in one go: every node, the pods, and where they came from."""

    nodes: list[Node]
    pods: list[Workload]
    host: str


def load_workloads(folder: Path) -> list[Workload]:
    """Every Pod, Job, CronJob, Deployment and StatefulSet under `folder`, in file order."""
    found: dict[tuple[str, str, str], Workload] = {}
    for path in manifests.manifest_files(folder):
        for line, document in manifests.documents_of_kinds(path, placement.POD_SPEC_PATHS):
            item = _from_manifest(path, line, document)
            key = (item.kind, item.namespace, item.name)
            if key in found:
                also = found[key].origin
                raise GpudrvError(f"{item.ref} is declared twice (also {also})", file=str(path), line=line)
            found[key] = item
    return list(found.values())


def read_live(
    options: kube.Options, namespace: str, pod_name: str | None, selector: LabelSelector | None = None
) -> Live:
    """All nodes (those `selector` matches), and one pod or every pod of the namespace, in name order."""
    live = cluster.connect(options)
    documents: Iterable[dict[str, Any]]
    if pod_name is None:
        documents = live.pods(namespace)
    elif (document := live.pod(namespace, pod_name)) is not None:
        documents = [document]
    else:
        raise GpudrvError(f"pod {pod_name} not found in namespace {namespace} in the cluster at {live.host}")
    pods = sorted((_from_live(document) for document in documents), key=lambda pod: pod.name)
    return Live(live.nodes(selector, reads.for_workloads(pods)), pods, live.host)


def scheduler_message(document: dict[str, Any]) -> str | None:
    """The PodScheduled=False condition's message: the scheduler's own account of a Pending pod."""
    for condition in (document.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return None


def _from_manifest(path: Path, line: int, document: dict[str, Any]) -> Workload:
    try:
        return placement.workload(document, str(path), line)
    except placement.SpecError as exc:
        at = positions.line_of(document, exc.path, line)
        message = str(exc)
        if isinstance(exc, placement.NotAString):  # quote what the file says, not what YAML made of it
            written = manifests.written(path, document, exc.path)
            message = node_schema.must_be_string(placement.dotted(exc.path), exc.value, written)
        raise GpudrvError(
            f"{document.get('kind')} {_name(document)}: {message}", file=str(path), line=at
        ) from None


def _from_live(document: dict[str, Any]) -> Workload:
    document = {**document, "kind": "Pod"}  # list items carry no kind
    try:
        return placement.workload(document, scheduler=scheduler_message(document))
    except placement.SpecError as exc:
        raise GpudrvError(f"pod {_name(document)}: {exc}") from None


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return str(name or "(no name)")
