"""`gpudrv matrix validate` and `gpudrv matrix add`."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.ci import github
from reconciler.adapters.files import matrix_file, schemas
from reconciler.adapters.sources import read_matrix
from reconciler.commands import ERROR, OK, Output
from reconciler.core.images.matrix import key_from_tag, row_problems
from reconciler.core.images.tags import ImageKey
from reconciler.errors import GpudrvError
from reconciler.render import document, matrix


def validate(path: Path, output: Output = Output.TEXT) -> int:
    _, parsed = read_matrix(path)
    if output is Output.GITHUB:
        github.publish(
            matrix.annotate(path, parsed), matrix.summary(path, parsed), matrix.verdict(path, parsed)
        )
    elif output.structured:
        print(document.text(matrix.as_json(path, parsed), output))
    else:
        for problem in parsed.problems:
            print(f"{path}:{problem.line}: {problem.message}")
        if parsed.ok:
            print(matrix.verdict(path, parsed))
    return OK if parsed.ok else ERROR


def add(path: Path, key: ImageKey, output: Output = Output.TEXT) -> int:
    problems = row_problems(key, schemas.load("matrix-row"))
    if problems:
        raise GpudrvError(f"refused {key.as_csv()}: {'; '.join(problems)}")
    # Read, check and write under one lock: two adds at once must not both append to the same text.
    [row] = matrix_file.append(path, [key])
    if output.structured:
        print(document.text(matrix.added_json(path, key, row.line, row.added), output))
        return OK
    if not row.added:
        print(f"{key.as_csv()} is already in {path} at line {row.line}; file unchanged")
        return OK
    print(f"added {key.as_csv()} at {path}:{row.line} (image tag {key.tag})")
    return OK


def key_of(tag: str) -> ImageKey:
    try:
        return key_from_tag(tag)
    except ValueError as exc:
        raise GpudrvError(str(exc)) from None
