"""`gpudrv explain [KIND/NAME]`: the nodes a workload's placement admits, why not the others, and
whether the drivers it admits can run its CUDA images.

Offline (`--from DIR`) it reads nodes and workloads from the same tree; live it reads every node
and one pod or every pod of a namespace, and adds the scheduler's own PodScheduled message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import files, github, manifests, workloads
from reconciler.commands import FINDINGS, OK
from reconciler.commands.sources import NodeSource
from reconciler.core import cuda, placement
from reconciler.core.placement import Fit, Workload
from reconciler.core.tags import Node
from reconciler.errors import GpudrvError

# Inside the package, so it ships in the wheel with no packaging rule of its own.
COMPAT_FILE = Path(__file__).resolve().parent.parent / "data" / "cuda-compat.json"
OUTPUTS = ("text", "json", "github")
_ALIASES = {
    "Pod": ("pod", "pods", "po"),
    "Job": ("job", "jobs"),
    "CronJob": ("cronjob", "cronjobs", "cj"),
    "Deployment": ("deployment", "deployments", "deploy"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"),
}
KINDS = {alias: kind for kind, aliases in _ALIASES.items() for alias in (*aliases, kind.lower())}


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


def run(target: str | None, namespace: str | None, source: NodeSource, output: str) -> int:
    table = load_table()
    nodes, items = read(target, namespace, source)
    reports = [explain(item, nodes, table) for item in items]
    rendered = RENDERERS[output](reports)
    if output == "github":
        github.print_rendered(rendered)  # its annotations are gpudrv's own workflow commands
    else:
        print(rendered)
    return exit_code(reports, output)


def explain(item: Workload, nodes: Sequence[Node], table: cuda.Table) -> Report:
    fit = placement.evaluate(item.placement, nodes)
    admitted = [node for node in nodes if node.name in set(fit.nodes)]
    return Report(item, fit, tuple(cuda.check(item.images, item.placement, admitted, table)))


def exit_code(reports: Sequence[Report], output: str) -> int:
    """1 on a driver too old for an image; outside a PR check also when a workload fits no node
    (in a PR check that is only a warning: Pending can be intended)."""
    errors = any(report.count(cuda.Severity.ERROR) for report in reports)
    unplaced = output != "github" and any(report.unplaced for report in reports)
    return FINDINGS if errors or unplaced else OK


def load_table(path: Path = COMPAT_FILE) -> cuda.Table:
    try:
        return cuda.parse_table(json.loads(files.read_text(path)))
    except ValueError as exc:
        raise GpudrvError(f"{path}: {exc}") from None


def read(target: str | None, namespace: str | None, source: NodeSource) -> tuple[list[Node], list[Workload]]:
    kind, name = parse_target(target)
    if source.from_dir is not None:
        found = _select(workloads.load_workloads(source.from_dir), kind, name, namespace)
        if target is not None and not found:
            within = f" in namespace {namespace}" if namespace else ""
            raise GpudrvError(f"{target} not found{within} under {source.from_dir}")
        return manifests.load_nodes(source.from_dir), found
    if kind not in (None, "Pod"):
        raise GpudrvError(
            f"live, explain reads pods: give pod/NAME or no target (for {target}, use --from DIR)"
        )
    live = workloads.read_live(source.cluster, namespace or placement.DEFAULT_NAMESPACE, name)
    return live.nodes, live.pods


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


# --- text ----------------------------------------------------------------------------------------


def as_text(reports: Sequence[Report]) -> str:
    if not reports:
        return "no workloads to explain"
    return "\n".join(line for report in reports for line in _text_lines(report))


def _text_lines(report: Report) -> Iterator[str]:
    yield f"{report.workload.ref} fits {', '.join(report.fit.nodes) or 'no node'}"
    for node, reason in report.fit.reasons.items():
        yield f"  {node}: {reason}"
    if report.workload.scheduler:
        yield f"  scheduler: {report.workload.scheduler}"
    for finding in report.findings:
        yield f"  {finding.severity}: {finding.message}"


# --- json ----------------------------------------------------------------------------------------


def as_json(reports: Sequence[Report]) -> str:
    return github.json_text([_json(report) for report in reports])


def _json(report: Report) -> dict[str, Any]:
    item = report.workload
    return {
        "kind": item.kind,
        "namespace": item.namespace,
        "name": item.name,
        "nodes": list(report.fit.nodes),
        "reasons": dict(report.fit.reasons),
        "scheduler": item.scheduler,
        "cuda": [_finding(finding) for finding in report.findings],
        "origin": item.origin,
    }


def _finding(finding: cuda.Finding) -> dict[str, Any]:
    return {
        "severity": str(finding.severity),
        "image": finding.image,
        "cuda": finding.cuda,
        "nodes": list(finding.nodes),
        "message": finding.message,
    }


# --- GitHub annotations (the PR check) --------------------------------------------------------------


def as_github(reports: Sequence[Report]) -> str:
    lines = [annotation for report in reports for annotation in _annotations(report)]
    unplaced = sum(report.unplaced for report in reports)
    errors = sum(report.count(cuda.Severity.ERROR) for report in reports)
    warnings = sum(report.count(cuda.Severity.WARNING) for report in reports)
    lines.append(
        f"gpudrv explain: {len(reports)} workloads, {unplaced} fit no node, "
        f"{errors} CUDA driver errors, {warnings} CUDA driver warnings"
    )
    return "\n".join(lines)


def _annotations(report: Report) -> Iterator[str]:
    item = report.workload
    file, line = (github.workspace_path(item.file) if item.file else None), item.line
    if report.unplaced:
        why = [f"{node}: {reason}" for node, reason in report.fit.reasons.items()]
        why += [f"scheduler: {item.scheduler}"] if item.scheduler else []
        message = "\n".join([f"{item.ref} fits no node", *why])
        yield github.annotation("warning", message, file, line, title=f"{item.ref} fits no node")
    for finding in report.findings:
        level: github.Level = "error" if finding.severity is cuda.Severity.ERROR else "warning"
        title = f"{item.ref}: CUDA {finding.cuda} and the node driver"
        yield github.annotation(level, finding.message, file, line, title=title)


RENDERERS: dict[str, Callable[[Sequence[Report]], str]] = {
    "text": as_text,
    "json": as_json,
    "github": as_github,
}
