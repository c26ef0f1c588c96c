"""`gpudrv matrix impact --base REF`: what the working tree's matrix changes, row by row and node by node.

The nodes (live, or the manifests with --from) are the same on both sides: this is the matrix's impact.
Exit 1 when a node that had its image at REF would lose it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.adapters import git, schemas
from reconciler.commands import FINDINGS, OK
from reconciler.commands.sources import NodeSource, valid_matrix
from reconciler.core import matrix
from reconciler.core.impact import Impact, NodeImpact, impact
from reconciler.core.tags import ImageKey

ARROW = "\u2192"


def run(base: str, matrix_path: Path, source: NodeSource, output: str) -> int:
    after = [row.key for row in valid_matrix(matrix_path).rows]
    repo, repo_path = git.locate(matrix_path)
    text = git.read_at(repo, base, repo_path)
    # The base is history: take the rows it had, even if it also had problems.
    before = [] if text is None else [row.key for row in matrix.parse(text, schemas.load("matrix-row")).rows]
    result = impact(before, after, source.gpu_nodes())
    print(_RENDER[output](result, base, repo_path))
    return FINDINGS if result.broken else OK


def as_text(result: Impact, base: str, path: str) -> str:
    lines = [f"{path}: {base} {ARROW} working tree"]
    lines += [f"+ {key.as_csv()}" for key in result.added] + [f"- {key.as_csv()}" for key in result.removed]
    if not (result.added or result.removed):
        lines.append("no rows added or removed")
    lines += [f"{n.node}: {n.before} {ARROW} {n.after}  {_subject(n)}" for n in result.nodes]
    return "\n".join(lines)


def as_markdown(result: Impact, base: str, path: str) -> str:
    lines = [f"### Support matrix impact: `{path}`, `{base}` {ARROW} this change", ""]
    if result.added or result.removed:
        lines += ["| Row | Image tag | Change |", "|---|---|---|"]
        lines += [_row_cells(key, "added") for key in result.added]
        lines += [_row_cells(key, "**removed**") for key in result.removed]
    else:
        lines.append("No rows added or removed.")
    if result.nodes:
        lines += ["", "| Node | Image tag | Before | After |", "|---|---|---|---|"]
        lines += [_node_cells(node) for node in result.nodes]
    return "\n".join(lines)


def as_json(result: Impact, base: str, path: str) -> dict[str, Any]:
    return {
        "base": base,
        "matrix": path,
        "added": [_key(key) for key in result.added],
        "removed": [_key(key) for key in result.removed],
        "nodes": [_node(node) for node in result.nodes],
        "broken": [node.node for node in result.broken],
    }


def _subject(node: NodeImpact) -> str:
    return node.tag if node.tag is not None else f"({node.reason})"


def _row_cells(key: ImageKey, change: str) -> str:
    return f"| `{key.as_csv()}` | `{key.tag}` | {change} |"


def _node_cells(node: NodeImpact) -> str:
    subject = f"`{node.tag}`" if node.tag is not None else _cell(node.reason or "")
    after = f"**{node.after}**" if node.changed else node.after
    return f"| {_cell(node.node)} | {subject} | {node.before} | {after} |"


def _cell(text: str) -> str:
    # A pipe would end the table cell; a newline would end the row.
    return text.replace("|", "\\|").replace("\n", " ")


def _key(key: ImageKey) -> dict[str, str]:
    return {"driver_branch": key.driver_branch, "kernel": key.kernel, "os_tag": key.os_tag, "tag": key.tag}


def _node(node: NodeImpact) -> dict[str, Any]:
    return {
        "node": node.node,
        "tag": node.tag,
        "reason": node.reason,
        "before": node.before,
        "after": node.after,
    }


def _json_text(result: Impact, base: str, path: str) -> str:
    return json.dumps(as_json(result, base, path), indent=2)


_RENDER: dict[str, Callable[[Impact, str, str], str]] = {
    "text": as_text,
    "markdown": as_markdown,
    "json": _json_text,
}
