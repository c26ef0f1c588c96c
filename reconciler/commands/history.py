"""`gpudrv matrix history`: every row that was ever in the matrix, who added it, when, in which PR."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconciler.adapters import git, github
from reconciler.commands import OK
from reconciler.core.history import CommitInfo, Lifetime
from reconciler.errors import GpudrvError

HEADER = ("ROW", "ADDED", "REMOVED")


def run(matrix_path: Path, output: str) -> int:
    repo, repo_path = git.locate(matrix_path)
    lifetimes = git.matrix_history(repo, repo_path)
    if not lifetimes and not (Path.cwd() / matrix_path).exists():
        raise GpudrvError(f"{matrix_path}: no such file, and no commit on HEAD ever had it")
    print(json_lines(as_json(lifetimes)) if output == "json" else as_text(lifetimes))
    return OK


def json_lines(entries: Sequence[dict[str, Any]]) -> str:
    """A JSON list with one object per line: greppable, and the C encoder (indent= is pure Python,
    several times slower on a long history)."""
    return (
        "[\n" + ",\n".join(f"  {github.json_text(entry, indent=None)}" for entry in entries) + "\n]"
        if entries
        else "[]"
    )


def as_json(lifetimes: Sequence[Lifetime]) -> list[dict[str, Any]]:
    return [
        {
            "driver_branch": life.key.driver_branch,
            "kernel": life.key.kernel,
            "os_tag": life.key.os_tag,
            "added": _commit(life.added),
            "removed": None if life.removed is None else _commit(life.removed),
        }
        for life in lifetimes
    ]


def as_text(lifetimes: Sequence[Lifetime]) -> str:
    """A table, one row per stay in the matrix; each commit as `date short-hash author (#PR)`."""
    rows = [HEADER, *((life.key.as_csv(), _short(life.added), _short(life.removed)) for life in lifetimes)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADER) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    )


def _commit(info: CommitInfo) -> dict[str, Any]:
    return {"commit": info.commit, "author": info.author, "date": info.date, "pr": info.pr}


def _short(info: CommitInfo | None) -> str:
    if info is None:
        return "-"
    pr = f" (#{info.pr})" if info.pr is not None else ""
    return f"{info.date[:10]} {info.commit[:8]} {info.author}{pr}"
