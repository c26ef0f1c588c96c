"""`gpudrv matrix validate` output: a verdict line, or GitHub annotations and a step summary."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters import github
from reconciler.core import matrix


def verdict(path: Path, parsed: matrix.Matrix) -> str:
    if parsed.ok:
        return f"{path}: {len(parsed.rows)} rows, valid"
    return f"{path}: {github.count(len(parsed.problems), 'problem')}"


def annotate(path: Path, parsed: matrix.Matrix) -> list[github.Annotation]:
    file = github.workspace_path(str(path))
    return [
        github.Annotation("error", problem.message, file, problem.line, "support matrix")
        for problem in parsed.problems
    ]


def summary(path: Path, parsed: matrix.Matrix) -> github.Summary:
    where = github.code(str(path))
    if parsed.ok:
        return github.Summary("gpudrv matrix validate: valid", f"{where}: {len(parsed.rows)} rows, valid.")
    rows = [(str(problem.line), github.text(problem.message)) for problem in parsed.problems]
    table = github.Table(("Line", "Problem"), rows)
    problems = github.count(len(parsed.problems), "problem")
    lead = f"{where} has {problems}; gpudrv refuses to read it until they are fixed."
    return github.Summary("gpudrv matrix validate: invalid", lead, (table,))
