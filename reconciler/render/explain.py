"""`gpudrv explain` output: text, JSON, or the PR check's GitHub annotations and step summary."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from reconciler.core.base import github_text
from reconciler.core.cuda import cuda
from reconciler.core.views.explain import Report
from reconciler.render import document, words

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


def as_json(reports: Sequence[Report], ok: bool) -> dict[str, Any]:
    return document.document(
        "explain", ok, workload_count=len(reports), workloads=[_json(report) for report in reports]
    )


def _json(report: Report) -> dict[str, Any]:
    """A workload, and every node it was weighed against: fits, or the reason it does not."""
    item, fit = report.workload, report.fit
    nodes = [{"node": name, "fits": True, "reason": None} for name in fit.nodes]
    nodes += [{"node": name, "fits": False, "reason": reason} for name, reason in fit.reasons.items()]
    return {
        "kind": item.kind,
        "namespace": item.namespace,
        "name": item.name,
        "origin": item.origin,
        "fits": bool(fit.nodes),
        "nodes": sorted(nodes, key=lambda node: str(node["node"])),
        "scheduler": item.scheduler,
        "findings": [_finding(finding) for finding in report.findings],
    }


def _finding(finding: cuda.Finding) -> dict[str, Any]:
    return {
        "severity": str(finding.severity),
        "image": finding.image,
        "cuda": finding.cuda,
        "node_names": list(finding.nodes),
        "message": finding.message,
    }


# --- GitHub: the PR check's annotations at each manifest, a table in the step summary -------------


def annotate(reports: Sequence[Report]) -> list[github_text.Annotation]:
    return [annotation for report in reports for annotation in _annotations(report)]


def _annotations(report: Report) -> Iterator[github_text.Annotation]:
    item = report.workload
    file, line = (item.file or None), item.line
    if report.unplaced:
        why = [f"{node}: {reason}" for node, reason in report.fit.reasons.items()]
        why += [f"scheduler: {item.scheduler}"] if item.scheduler else []
        message = "\n".join([f"{item.ref} fits no node", *why])
        yield github_text.Annotation("warning", message, file, line, f"{item.ref} fits no node")
    for finding in report.findings:
        level: github_text.Level = "error" if finding.severity is cuda.Severity.ERROR else "warning"
        title = f"{item.ref}: CUDA {finding.cuda} and the node driver"
        yield github_text.Annotation(level, finding.message, file, line, title)


def summary(reports: Sequence[Report]) -> github_text.Summary:
    errors = sum(report.count(cuda.Severity.ERROR) for report in reports)
    unplaced = sum(report.unplaced for report in reports)
    heading = (
        f"gpudrv explain: {words.count(len(reports), 'workload')}, {unplaced} fit no node, "
        f"{words.count(errors, 'CUDA driver error')}"
    )
    lead = "Where each workload may run, and whether the drivers there can run its CUDA images."
    # Driver errors first, then workloads that fit no node: the step summary may be cut short.
    ordered = sorted(reports, key=lambda report: (not report.count(cuda.Severity.ERROR), not report.unplaced))
    rows = [_row(report) for report in ordered]
    table = github_text.Table(("Workload", "Fits", "CUDA driver", "Manifest"), rows)
    return github_text.Summary(heading, lead, (table,))


def _row(report: Report) -> tuple[str, str, str, str]:
    item = report.workload
    fits = ", ".join(github_text.code(node) for node in report.fit.nodes) or "**no node**"
    cuda_cells = [
        f"**{finding.severity}**: {github_text.text(finding.message)}" for finding in report.findings
    ]
    return (
        github_text.code(item.ref),
        fits,
        "<br>".join(cuda_cells) or "ok",
        github_text.code(item.origin or "live"),
    )


def closing(reports: Sequence[Report]) -> str:
    unplaced = sum(report.unplaced for report in reports)
    errors = sum(report.count(cuda.Severity.ERROR) for report in reports)
    warnings = sum(report.count(cuda.Severity.WARNING) for report in reports)
    return (
        f"gpudrv explain: {len(reports)} workloads, {unplaced} fit no node, "
        f"{errors} CUDA driver errors, {warnings} CUDA driver warnings"
    )
