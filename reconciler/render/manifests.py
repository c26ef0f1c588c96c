"""`gpudrv manifests validate` output for GitHub (an annotation per problem, a table in the step summary)
and as data."""

from __future__ import annotations

from typing import Any

from reconciler.core.base import github_text
from reconciler.core.images.node_schema import Report
from reconciler.render import document, words


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


def annotate(report: Report) -> list[github_text.Annotation]:
    return [
        github_text.Annotation("error", p.message, p.file, p.line, "Node manifest") for p in report.problems
    ]


def summary(report: Report) -> github_text.Summary:
    where = github_text.code(str(report.folder))
    if not report.problems:
        lead = f"{words.count(report.nodes, 'Node manifest')} under {where}, each matching the schema."
        return github_text.Summary("gpudrv manifests validate: valid", lead)
    rows = [(github_text.code(f"{p.file}:{p.line}"), github_text.text(p.message)) for p in report.problems]
    problems, manifests = (
        words.count(len(report.problems), "problem"),
        words.count(report.nodes, "Node manifest"),
    )
    lead = f"{problems} in {manifests} under {where}."
    table = github_text.Table(("Where", "Problem"), rows)
    return github_text.Summary("gpudrv manifests validate: invalid", lead, (table,))


def verdict(report: Report) -> str:
    manifests = words.count(report.nodes, "Node manifest")
    if report.problems:
        return f"{report.folder}: {words.count(len(report.problems), 'problem')} in {manifests}"
    return f"{report.folder}: {manifests}, valid"
