"""`gpudrv matrix validate` and `gpudrv matrix add`."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters import files, github, schemas
from reconciler.commands import ERROR, OK
from reconciler.commands.sources import read_matrix, require_valid
from reconciler.core import matrix
from reconciler.core.tags import ImageKey
from reconciler.errors import GpudrvError


def validate(path: Path, output: str = "text") -> int:
    _, parsed = read_matrix(path)
    if output == "github":
        github.publish(_annotations(path, parsed), _summary(path, parsed), _verdict(path, parsed))
    else:
        for problem in parsed.problems:
            print(f"{path}:{problem.line}: {problem.message}")
        if parsed.ok:
            print(_verdict(path, parsed))
    return OK if parsed.ok else ERROR


def _verdict(path: Path, parsed: matrix.Matrix) -> str:
    if parsed.ok:
        return f"{path}: {len(parsed.rows)} rows, valid"
    return f"{path}: {github.count(len(parsed.problems), 'problem')}"


def _annotations(path: Path, parsed: matrix.Matrix) -> list[github.Annotation]:
    file = github.workspace_path(str(path))
    return [
        github.Annotation("error", problem.message, file, problem.line, "support matrix")
        for problem in parsed.problems
    ]


def _summary(path: Path, parsed: matrix.Matrix) -> github.Summary:
    where = github.code(str(path))
    if parsed.ok:
        return github.Summary("gpudrv matrix validate: valid", f"{where}: {len(parsed.rows)} rows, valid.")
    rows = [(str(problem.line), github.text(problem.message)) for problem in parsed.problems]
    table = github.Table(("Line", "Problem"), rows)
    problems = github.count(len(parsed.problems), "problem")
    lead = f"{where} has {problems}; gpudrv refuses to read it until they are fixed."
    return github.Summary("gpudrv matrix validate: invalid", lead, (table,))


def add(path: Path, key: ImageKey) -> int:
    problems = matrix.row_problems(key, schemas.load("matrix-row"))
    if problems:
        raise GpudrvError(f"refused {key.as_csv()}: {'; '.join(problems)}")
    # Read, check and write under one lock: two adds at once must not both append to the same text.
    with files.locked(path) as target:
        text, existing = read_matrix(path)
        if (row := require_valid(path, existing).find(key)) is not None:
            print(f"{key.as_csv()} is already in {path} at line {row.line}; file unchanged")
            return OK
        updated = matrix.append_row(text, key)
        files.write_atomic(target, updated)
    line = updated.rstrip("\r\n").count("\n") + 1
    print(f"added {key.as_csv()} at {path}:{line} (image tag {key.tag})")
    return OK


def key_of(tag: str) -> ImageKey:
    try:
        return matrix.key_from_tag(tag)
    except ValueError as exc:
        raise GpudrvError(str(exc)) from None
