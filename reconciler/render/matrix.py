"""`gpudrv matrix validate` output: a verdict line, the rows and problems as data, or GitHub annotations
and a step summary; `gpudrv matrix add` as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.core.base import github_text
from reconciler.core.images import matrix
from reconciler.core.images.tags import ImageKey
from reconciler.render import document, words


def verdict(path: Path, parsed: matrix.Matrix) -> str:
    if parsed.ok:
        return f"{path}: {len(parsed.rows)} rows, valid"
    return f"{path}: {words.count(len(parsed.problems), 'problem')}"


def annotate(path: Path, parsed: matrix.Matrix) -> list[github_text.Annotation]:
    file = str(path)
    return [
        github_text.Annotation("error", problem.message, file, problem.line, "support matrix")
        for problem in parsed.problems
    ]


def summary(path: Path, parsed: matrix.Matrix) -> github_text.Summary:
    where = github_text.code(str(path))
    if parsed.ok:
        return github_text.Summary(
            "gpudrv matrix validate: valid", f"{where}: {len(parsed.rows)} rows, valid."
        )
    rows = [(str(problem.line), github_text.text(problem.message)) for problem in parsed.problems]
    table = github_text.Table(("Line", "Problem"), rows)
    problems = words.count(len(parsed.problems), "problem")
    lead = f"{where} has {problems}; gpudrv refuses to read it until they are fixed."
    return github_text.Summary("gpudrv matrix validate: invalid", lead, (table,))


def as_json(path: Path, parsed: matrix.Matrix) -> dict[str, Any]:
    return document.document(
        "matrix-validate",
        parsed.ok,
        matrix=str(path),
        row_count=len(parsed.rows),
        rows=[{**key_json(row.key), "line": row.line} for row in parsed.rows],
        findings=[
            {"origin": f"{path}:{problem.line}", "line": problem.line, "message": problem.message}
            for problem in parsed.problems
        ],
    )


def key_json(key: ImageKey) -> dict[str, str]:
    """A matrix row, the same in every command's data: its three cells and the image tag they make."""
    return {"driver_branch": key.driver_branch, "kernel": key.kernel, "os_tag": key.os_tag, "tag": key.tag}


def added_json(path: Path, key: ImageKey, line: int, added: bool) -> dict[str, Any]:
    row = {**key_json(key), "line": line}
    return document.document("matrix-add", True, matrix=str(path), added=added, row=row)
