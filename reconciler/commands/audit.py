"""`gpudrv audit`: every GPU node's image must be in the support matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler.commands import FINDINGS, OK
from reconciler.commands.sources import NodeSource, valid_matrix
from reconciler.core.audit import AuditResult, Finding, Status, audit


def run(source: NodeSource, matrix_path: Path, output: str) -> int:
    tags = valid_matrix(matrix_path).tags()
    result = audit(source.gpu_nodes(), tags)
    print(json.dumps(as_json(result), indent=2) if output == "json" else as_text(result))
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
