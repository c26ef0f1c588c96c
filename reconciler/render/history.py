"""`gpudrv matrix history` output: a table, or JSON one object per line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.adapters import github
from reconciler.core.history import CommitInfo, Lifetime
from reconciler.render import table

HEADER = ("ROW", "ADDED", "REMOVED")


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
    return table.columns(
        [HEADER, *((life.key.as_csv(), _short(life.added), _short(life.removed)) for life in lifetimes)]
    )


def _commit(info: CommitInfo) -> dict[str, Any]:
    return {"commit": info.commit, "author": info.author, "date": info.date, "pr": info.pr}


def _short(info: CommitInfo | None) -> str:
    if info is None:
        return "-"
    pr = f" (#{info.pr})" if info.pr is not None else ""
    return f"{info.date[:10]} {info.commit[:8]} {info.author}{pr}"
