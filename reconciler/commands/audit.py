"""`gpudrv audit`: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.adapters import github
from reconciler.commands import FINDINGS, OK
from reconciler.commands.sources import NodeSource, valid_matrix
from reconciler.core.audit import AuditResult, Finding, Status, audit


def run(source: NodeSource, matrix_path: Path, output: str) -> int:
    tags = valid_matrix(matrix_path).tags()
    result = audit(source.gpu_nodes(), tags)
    if output == "github":
        github.publish(annotate(result, matrix_path), summary(result, matrix_path), closing(result))
    else:
        print(github.json_text(as_json(result)) if output == "json" else as_text(result))
    return OK if result.ok else FINDINGS


def as_text(result: AuditResult) -> str:
    return "\n".join(finding.line() for finding in result.findings) if result.findings else "OK"


def as_json(result: AuditResult) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "audited": list(result.audited),
        "findings": [_finding(f) for f in result.findings],
    }


def _finding(finding: Finding) -> dict[str, Any]:
    missing = finding.status is Status.MISSING
    return {
        "node": finding.node,
        "status": str(finding.status),
        "tag": finding.detail if missing else None,
        "reason": None if missing else finding.detail,
        "origin": finding.origin,
    }


# --- GitHub: an error on each node's manifest (with --from), a table in the step summary -----------


def annotate(result: AuditResult, matrix_path: Path) -> list[github.Annotation]:
    return [github.at("error", _message(f, matrix_path), f.origin, _title(f)) for f in result.findings]


def _title(finding: Finding) -> str:
    if finding.status is Status.MISSING:
        return f"{finding.node}: driver image not in the support matrix"
    return f"{finding.node}: no driver image tag"


def _message(finding: Finding, matrix_path: Path) -> str:
    if finding.status is Status.INVALID:
        return f"node {finding.node}: {finding.detail}"
    return (
        f"node {finding.node} needs the driver image {finding.detail}, which is not in {matrix_path}: "
        f"its driver pod would be stuck in ImagePullBackOff. Build the image, then add the row with "
        f"gpudrv matrix add --tag {finding.detail}"
    )


def summary(result: AuditResult, matrix_path: Path) -> github.Summary:
    matrix_file = github.code(str(matrix_path))
    audited = github.count(len(result.audited), "GPU node")
    if result.ok:
        return github.Summary("gpudrv audit: OK", f"{audited}, each with its driver image in {matrix_file}.")
    heading = f"gpudrv audit: {len(result.findings)} of {audited} without a driver image"
    lead = f"Not in {matrix_file}, or no tag to look for: a driver pod there is stuck in ImagePullBackOff."
    rows = [
        (github.code(f.node), f"**{f.status}**", github.code(f.detail), github.code(f.origin or "live"))
        for f in result.findings
    ]
    table = github.Table(("Node", "Status", "Image tag or reason", "Manifest"), rows)
    return github.Summary(heading, lead, (table,))


def closing(result: AuditResult) -> str:
    missing = sum(f.status is Status.MISSING for f in result.findings)
    audited = github.count(len(result.audited), "GPU node")
    return f"gpudrv audit: {audited}, {missing} MISSING, {len(result.findings) - missing} INVALID"
