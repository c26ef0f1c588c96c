"""`gpudrv matrix history`: every row that was ever in the matrix, who added it, when, in which PR."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters import files, git
from reconciler.commands import OK, Output
from reconciler.errors import GpudrvError
from reconciler.render import document, history


def run(matrix_path: Path, output: Output) -> int:
    repo, repo_path = git.locate(matrix_path)
    lifetimes = git.matrix_history(repo, repo_path)
    if not lifetimes and not files.absolute(matrix_path).exists():
        raise GpudrvError(f"{matrix_path}: no such file, and no commit on HEAD ever had it")
    if output.structured:
        data = history.as_json(lifetimes, str(matrix_path))
        print(history.json_lines(data) if output is Output.JSON else document.text(data, output))
    else:
        print(history.as_text(lifetimes))
    return OK
