"""What `gpudrv apply` did, node by node, for `-o json` (one object on stdout; the progress lines go to
stderr) and `-o github` (the progress on stdout and a section of the job's step summary)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from reconciler.adapters import github
from reconciler.commands import Output


@dataclass
class Report:
    mode: str  # "lab" or "operator"
    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (status, detail)
    audit_ok: bool | None = None

    def set(self, name: str, status: str, detail: str = "") -> None:
        self.nodes[name] = (status, detail)

    def data(self, code: int) -> dict[str, object]:
        rows = [
            {"node": name, "status": status, "detail": detail}
            for name, (status, detail) in sorted(self.nodes.items())
        ]
        counts: dict[str, int] = {}
        for row in rows:
            counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
        return {
            "command": "apply",
            "mode": self.mode,
            "ok": code == 0,
            "exit_code": code,
            "audit_ok": self.audit_ok,
            "counts": counts,
            "nodes": rows,
        }

    def summary(self, code: int) -> github.Summary:
        rows = [
            (github.code(name), status, github.text(detail))
            for name, (status, detail) in sorted(self.nodes.items())
        ]
        lead = "done" if code == 0 else "findings: see the job log" if code == 1 else "failed"
        table = github.Table(("node", "status", "detail"), rows)
        return github.Summary(f"gpudrv apply ({self.mode} mode): {lead}", tables=(table,) if rows else ())


def run(output: Output, report: Report, body: Callable[[], int]) -> int:
    """Runs the apply; in JSON mode with its progress on stderr, then the object on stdout."""
    if output is Output.JSON:
        with _progress_to_stderr():
            code = body()
        print(github.json_text(report.data(code)))
        return code
    code = body()
    if output is Output.GITHUB:
        github.append_summary(report.summary(code))
    return code


@contextlib.contextmanager
def _progress_to_stderr() -> Iterator[None]:
    with contextlib.redirect_stdout(sys.stderr):
        yield
