"""`gpudrv manifests validate` output for GitHub: an annotation per problem, a table in the step summary."""

from __future__ import annotations

from reconciler.adapters import github
from reconciler.adapters.node_manifests import Report


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
