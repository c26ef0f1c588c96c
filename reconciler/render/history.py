"""`gpudrv matrix history` output: a table, or the rows as data (in JSON one row per line)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.core.images.history import CommitInfo, Lifetime
from reconciler.render import document, table
from reconciler.render.matrix import key_json

HEADER = ("ROW", "ADDED", "REMOVED")


def json_lines(value: dict[str, Any]) -> str:
    """The document as JSON with one row per line: greppable, and the C encoder (indent= is pure
    Python, several times slower on a long history)."""
    rows = value["rows"]
    head = [f"  {document.json_text(key, indent=None)}: {document.json_text(item, indent=None)}"
            for key, item in value.items() if key != "rows"]  # fmt: skip
    lines = ",\n".join(f"    {document.json_text(row, indent=None)}" for row in rows)
    tail = '"rows": [\n' + lines + "\n  ]" if rows else '"rows": []'
    return "{\n" + ",\n".join([*head, "  " + tail]) + "\n}"


def as_json(lifetimes: Sequence[Lifetime], matrix_path: str) -> dict[str, Any]:
    rows = [
        {
            **key_json(life.key),
            "added": _commit(life.added),
            "removed": None if life.removed is None else _commit(life.removed),
        }
        for life in lifetimes
    ]
    return document.document("matrix-history", True, matrix=matrix_path, rows=rows)


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
