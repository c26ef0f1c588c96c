"""`gpudrv matrix impact` output: text, JSON, Markdown for a PR, or GitHub annotations and a step summary.

Both Markdown forms come from the same tables, with every value escaped (github_text.text, github_text.code).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.core.audit.impact import OK, Impact, NodeImpact
from reconciler.core.base import github_text
from reconciler.core.images.tags import ImageKey
from reconciler.render import document, words
from reconciler.render.matrix import key_json

ARROW = "\u2192"


def as_text(result: Impact, base: str, path: str) -> str:
    lines = [f"{path}: {base} {ARROW} working tree"]
    lines += [f"+ {key.as_csv()}" for key in result.added] + [f"- {key.as_csv()}" for key in result.removed]
    if not (result.added or result.removed):
        lines.append("no rows added or removed")
    lines += [f"{n.node}: {n.shown_before} {ARROW} {n.shown_after}  {_subject(n)}" for n in result.nodes]
    lines += [f"cause: {cause}" for cause in result.causes]
    lines += [f"fleet: {problem}" for problem in result.problems]
    return "\n".join(lines)


def as_markdown(result: Impact, base: str, path: str) -> str:
    """For a PR description by hand: the same tables as the step summary, in the matrix's order."""
    changes = [(key, "added") for key in result.added] + [(key, "**removed**") for key in result.removed]
    tables = [_row_table(changes)] if changes else []
    tables += [_node_table(result.nodes, github_text.text)] if result.nodes else []
    heading = f"Support matrix impact: {github_text.code(path)}, {github_text.code(base)} {ARROW} this change"
    lead = "" if changes else "No rows added or removed."
    lead += "".join(f"\n\n**Cause:** {github_text.text(cause)}" for cause in result.causes)
    lead += "".join(f"\n\n**Fleet:** {github_text.text(problem)}" for problem in result.problems)
    section = github_text.Summary(heading, lead.strip("\n"), tables)
    return section.markdown(budget=sys.maxsize, max_rows=sys.maxsize).rstrip("\n")


def as_json(result: Impact, base: str, path: str) -> dict[str, Any]:
    return document.document(
        "matrix-impact",
        not result.failed,
        base=base,
        matrix=path,
        added=[key_json(key) for key in result.added],
        removed=[key_json(key) for key in result.removed],
        node_count=len(result.nodes),
        nodes=[_node(node) for node in result.nodes],
        findings=[_node(node) for node in result.broken],  # the nodes that would lose their image
        causes=list(result.causes),
        problems=list(result.problems),
    )


def _subject(node: NodeImpact) -> str:
    now = node.tag if node.tag is not None else f"({node.reason})"
    text = f"{node.before_tag or '(none)'} {ARROW} {now}" if node.retagged else now
    return text + (f", {_next_subject(node)}" if node.next else "")


def _next_subject(node: NodeImpact) -> str:
    """`next kernel 5.15.0-120-generic: TAG` (`at its next reboot` when the change takes it away)."""
    upcoming = node.next
    assert upcoming is not None
    if upcoming.kernel is None:
        return "next kernel: no tag (INVALID label)"
    tag = upcoming.tag or "(none)"
    if upcoming.before_tag != upcoming.tag:
        tag = f"{upcoming.before_tag or '(none)'} {ARROW} {tag}"
    text = f"next kernel {upcoming.kernel}: {tag}"
    return text + (" (lost at its next reboot)" if upcoming.broken else "")


def _row_table(changes: Sequence[tuple[ImageKey, str]]) -> github_text.Table:
    rows = [(github_text.code(key.as_csv()), github_text.code(key.tag), change) for key, change in changes]
    return github_text.Table(("Row", "Image tag", "Change"), rows)


def _node_table(nodes: Sequence[NodeImpact], name: Callable[[str], str]) -> github_text.Table:
    """`name` shows the node's name: a code span in the step summary, plain text in a PR description."""
    return github_text.Table(
        ("Node", "Image tag", "Before", "After"), [_node_cells(node, name) for node in nodes]
    )


def _node_cells(node: NodeImpact, name: Callable[[str], str]) -> tuple[str, str, str, str]:
    # A manifest's values are not markup, and a pipe would end the table cell.
    subject = github_text.code(node.tag) if node.tag is not None else github_text.text(node.reason or "")
    if node.retagged:
        subject = f"{github_text.code(node.before_tag or '(none)')} {ARROW} {subject}"
    if node.next is not None:
        upcoming = node.next
        kernel = github_text.code(upcoming.kernel) if upcoming.kernel else "INVALID label"
        tag = github_text.code(upcoming.tag) if upcoming.tag else "no tag"
        subject += f"; next kernel {kernel}: {tag}"
    after = f"**{node.shown_after}**" if node.changed else node.shown_after
    return name(node.node), subject, node.shown_before, after


def _node(node: NodeImpact) -> dict[str, Any]:
    return {
        "node": node.node,
        "tag": node.tag,
        "before_tag": node.before_tag,
        "cause": node.cause,
        "reason": node.reason,
        "before": node.shown_before,
        "after": node.shown_after,
        "next_kernel": node.next.kernel if node.next else None,
        "next_tag": node.next.tag if node.next else None,
        "changed": node.changed,
        "broken": node.broken,
    }


# --- GitHub: the matrix file for a removed row a node still needs, the line of a row that helps ----


@dataclass(frozen=True)
class Context:
    base: str
    matrix_path: Path
    lines: Mapping[ImageKey, int]  # working-tree line of each row


def annotate(result: Impact, context: Context) -> list[github_text.Annotation]:
    notes = [_removed(key, result, context) for key in result.removed]
    notes += [_added(key, result, context) for key in result.added]
    notes += [_retagged(cause, result, context) for cause in result.causes]
    found = [note for note in notes if note is not None]
    return found + [
        github_text.Annotation("error", problem, None, None, "driver resource refused")
        for problem in result.problems
    ]


def _retagged(cause: str, result: Impact, context: Context) -> github_text.Annotation | None:
    broken = [node for node in result.broken if node.cause == cause]
    if not broken:
        return None
    missing = ", ".join(dict.fromkeys(node.tag or "" for node in broken))
    message = (
        f"{cause}: {_names([node.node for node in broken])} would pull {missing}, which is not in "
        f"{context.matrix_path}; build it and add the row, or keep the change out"
    )
    title = f"{words.count(len(broken), 'GPU node')} need an image the matrix lacks"
    return github_text.Annotation("error", message, str(context.matrix_path), None, title)


def _removed(key: ImageKey, result: Impact, context: Context) -> github_text.Annotation | None:
    now = [node.node for node in result.broken if node.tag == key.tag and node.after != OK]
    later = [n for n in result.broken if n.next and n.next_broken and n.next.tag == key.tag]
    broken = list(dict.fromkeys([*now, *(node.node for node in later)]))
    if not broken:
        return None
    # The row is gone from the working tree, so it has no line to point at: the file it left.
    needed = [f"by {_names(now)}"] if now else []
    needed += [f"at the next reboot by {_next_names(later)}"] if later else []
    message = (
        f"{key.as_csv()} was in {context.base} and is removed here, but the image {key.tag} is still "
        f"needed {' and '.join(needed)}: a driver pod there would be stuck in ImagePullBackOff"
    )
    title = f"removing {key.as_csv()} breaks {words.count(len(broken), 'GPU node')}"
    return github_text.Annotation("error", message, str(context.matrix_path), None, title)


def _added(key: ImageKey, result: Impact, context: Context) -> github_text.Annotation | None:
    fixed = [
        node.node
        for node in result.nodes
        if node.changed and key.tag in (node.tag, node.next.tag if node.next else None)
    ]
    if not fixed:
        return None
    message = f"{key.as_csv()} adds the driver image {key.tag}, needed by {_names(fixed)}"
    origin = f"{context.matrix_path}:{context.lines[key]}"
    return github_text.at("notice", message, origin, f"{key.as_csv()} is needed")


def _next_names(nodes: Sequence[NodeImpact]) -> str:
    """`n1 (kernel K)`, each node with the kernel it boots next."""
    return _names([f"{node.node} (kernel {node.next.kernel if node.next else '?'})" for node in nodes])


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:10])
    return f"{shown} and {len(nodes) - 10} more" if len(nodes) > 10 else shown


def summary(result: Impact, base: str, path: str) -> github_text.Summary:
    broken = words.count(len(result.broken), "GPU node")
    heading = f"gpudrv matrix impact: {broken} would lose the driver image"
    if result.problems:
        heading += f", {words.count(len(result.problems), 'driver resource problem')}"
    if not result.failed:
        heading = "gpudrv matrix impact: no GPU node loses its driver image"
    lead = f"{github_text.code(path)}, {github_text.code(base)} {ARROW} this change."
    if later := sum(node.next_broken for node in result.broken):
        lead += (
            f" {words.count(later, 'GPU node')} would lose {words.verb(later, 'its', 'their')} driver "
            f"at {words.verb(later, 'its', 'their')} next reboot: the image of the kernel "
            f"{words.verb(later, 'it boots', 'they boot')} next (NEXT-MISSING)."
        )
    lead += "".join(f"\n\n**Cause:** {github_text.text(cause)}" for cause in result.causes)
    lead += "".join(f"\n\n**Fleet:** {github_text.text(problem)}" for problem in result.problems)
    changes = [(key, "**removed**") for key in result.removed] + [(key, "added") for key in result.added]
    # Broken nodes first, then the other changes, then the rest: the step summary may be cut short.
    ordered = sorted(result.nodes, key=lambda node: (not node.broken, not node.changed))
    tables = [_row_table(changes)] + ([_node_table(ordered, github_text.code)] if result.nodes else [])
    return github_text.Summary(heading, lead, tables)


def closing(result: Impact) -> str:
    added, broken = words.count(len(result.added), "row"), words.count(len(result.broken), "GPU node")
    return (
        f"gpudrv matrix impact: {added} added, {len(result.removed)} removed, {broken} would lose the image"
    )
