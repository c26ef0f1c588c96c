"""`gpudrv matrix impact --base REF`: what the working tree's matrix changes, row by row and node by node.

The nodes (live, or the manifests with --from) are the same on both sides: this is the matrix's impact.
Exit 1 when a node that had its image at REF would lose it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import git, github, schemas
from reconciler.commands import FINDINGS, OK
from reconciler.commands.sources import NodeSource, valid_matrix
from reconciler.core import matrix
from reconciler.core.impact import Impact, NodeImpact, impact
from reconciler.core.tags import ImageKey

ARROW = "\u2192"


def run(base: str, matrix_path: Path, source: NodeSource, output: str) -> int:
    rows = valid_matrix(matrix_path).rows
    repo, repo_path = git.locate(matrix_path)
    text = git.read_at(repo, base, repo_path)
    # The base is history: take the rows it had, even if it also had problems.
    before = [] if text is None else [row.key for row in matrix.parse(text, schemas.load("matrix-row")).rows]
    result = impact(before, [row.key for row in rows], source.gpu_nodes())
    if output == "github":
        context = Context(base, matrix_path, {row.key: row.line for row in rows})
        github.publish(annotate(result, context), summary(result, base, repo_path), closing(result))
    else:
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
    # A pipe would end the table cell, a newline the row; and a manifest's values are not markup.
    return github.text(text)


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
    return github.json_text(as_json(result, base, path))


_RENDER: dict[str, Callable[[Impact, str, str], str]] = {
    "text": as_text,
    "markdown": as_markdown,
    "json": _json_text,
}


# --- GitHub: the matrix file for a removed row a node still needs, the line of a row that helps ----


@dataclass(frozen=True)
class Context:
    base: str
    matrix_path: Path
    lines: Mapping[ImageKey, int]  # working-tree line of each row


def annotate(result: Impact, context: Context) -> list[github.Annotation]:
    notes = [_removed(key, result, context) for key in result.removed]
    notes += [_added(key, result, context) for key in result.added]
    return [note for note in notes if note is not None]


def _removed(key: ImageKey, result: Impact, context: Context) -> github.Annotation | None:
    broken = [node.node for node in result.broken if node.tag == key.tag]
    if not broken:
        return None
    # The row is gone from the working tree, so it has no line to point at: the file it left.
    message = (
        f"{key.as_csv()} was in {context.base} and is removed here, but the image {key.tag} is still "
        f"needed by {_names(broken)}: a driver pod there would be stuck in ImagePullBackOff"
    )
    title = f"removing {key.as_csv()} breaks {github.count(len(broken), 'GPU node')}"
    return github.Annotation("error", message, github.workspace_path(str(context.matrix_path)), None, title)


def _added(key: ImageKey, result: Impact, context: Context) -> github.Annotation | None:
    fixed = [node.node for node in result.nodes if node.tag == key.tag and node.changed]
    if not fixed:
        return None
    message = f"{key.as_csv()} adds the driver image {key.tag}, needed by {_names(fixed)}"
    origin = f"{context.matrix_path}:{context.lines[key]}"
    return github.at("notice", message, origin, f"{key.as_csv()} is needed")


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:10])
    return f"{shown} and {len(nodes) - 10} more" if len(nodes) > 10 else shown


def summary(result: Impact, base: str, path: str) -> github.Summary:
    broken = github.count(len(result.broken), "GPU node")
    heading = f"gpudrv matrix impact: {broken} would lose the driver image"
    if not result.broken:
        heading = "gpudrv matrix impact: no GPU node loses its driver image"
    lead = f"{github.code(path)}, {github.code(base)} {ARROW} this change."
    rows = github.Table(
        ("Row", "Image tag", "Change"),
        [(github.code(k.as_csv()), github.code(k.tag), "**removed**") for k in result.removed]
        + [(github.code(k.as_csv()), github.code(k.tag), "added") for k in result.added],
    )
    # Broken nodes first, then the other changes, then the rest: the step summary may be cut short.
    ordered = sorted(result.nodes, key=lambda node: (not node.broken, not node.changed))
    nodes = github.Table(("Node", "Image tag", "Before", "After"), [_node_cells_github(n) for n in ordered])
    return github.Summary(heading, lead, (rows, nodes) if result.nodes else (rows,))


def _node_cells_github(node: NodeImpact) -> tuple[str, str, str, str]:
    subject = github.code(node.tag) if node.tag is not None else github.text(node.reason or "")
    after = f"**{node.after}**" if node.changed else node.after
    return github.code(node.node), subject, node.before, after


def closing(result: Impact) -> str:
    added, broken = github.count(len(result.added), "row"), github.count(len(result.broken), "GPU node")
    return (
        f"gpudrv matrix impact: {added} added, {len(result.removed)} removed, {broken} would lose the image"
    )
