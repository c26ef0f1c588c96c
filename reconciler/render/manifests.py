"""`gpudrv manifests validate` output for GitHub (an annotation per problem, a table in the step summary)
and as data."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.ci import github
from reconciler.adapters.files.node_manifests import Report
from reconciler.render import document


def as_json(report: Report) -> dict[str, Any]:
    return document.document(
        "manifests-validate",
        not report.problems,
        folder=str(report.folder),
        manifest_count=report.nodes,
        findings=[
            {"origin": f"{p.file}:{p.line}", "file": str(p.file), "line": p.line, "message": p.message}
            for p in report.problems
        ],
    )


def annotate(report: Report) -> list[github.Annotation]:
    return [
        github.Annotation("error", p.message, github.workspace_path(str(p.file)), p.line, "Node manifest")
        for p in report.problems
    ]


def summary(report: Report) -> github.Summary:
    where = github.code(str(report.folder))
    if not report.problems:
        lead = f"{github.count(report.nodes, 'Node manifest')} under {where}, each matching the schema."
        return github.Summary("gpudrv manifests validate: valid", lead)
    rows = [(github.code(f"{p.file}:{p.line}"), github.text(p.message)) for p in report.problems]
    problems, manifests = (
        github.count(len(report.problems), "problem"),
        github.count(report.nodes, "Node manifest"),
    )
    lead = f"{problems} in {manifests} under {where}."
    table = github.Table(("Where", "Problem"), rows)
    return github.Summary("gpudrv manifests validate: invalid", lead, (table,))
