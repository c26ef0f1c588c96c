"""`gpudrv diff` output: `-` live and `+` desired lines like `kubectl diff`, JSON, or GitHub annotations
and a step summary. Red and green only on a terminal, and never with NO_COLOR.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.core.base import github_text
from reconciler.core.views.diff import BudgetDrift, Change, Drift, NodeDrift, ResourceDrift, State
from reconciler.render import document

RED, GREEN, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[0m"
Paint = Callable[[str, str], str]


def as_text(drift: Drift, desired_dir: Path, paint: Paint) -> str:
    if not drift.found:
        return "no drift"
    blocks = [_node_block(node, desired_dir, paint) for node in drift.nodes]
    blocks += [_budget_block(budget, paint) for budget in drift.budgets]
    blocks += [_resource_block(item, desired_dir, paint) for item in drift.resources]
    return "\n".join(line for block in blocks for line in block)


def as_json(drift: Drift) -> dict[str, Any]:
    """`ok` false: drift. `state` of each object: absent (declared, not live), undeclared (live, not
    declared) or changed."""
    return document.document(
        "diff",
        not drift.found,
        nodes=[
            {"node": n.node, "state": str(n.state), "origin": n.origin, "labels": _changes(n.labels, "key")}
            for n in drift.nodes
        ],
        budgets=[
            {
                "namespace": b.namespace,
                "name": b.name,
                "state": str(b.state),
                "origin": b.origin,
                "fields": _changes(b.fields, "field"),
            }
            for b in drift.budgets
        ],
        drivers=[
            {
                "kind": r.kind,
                "name": r.name,
                "state": str(r.state),
                "origin": r.origin,
                "fields": _changes(r.fields, "field"),
            }
            for r in drift.resources
        ],
    )


def _node_block(node: NodeDrift, desired_dir: Path, paint: Paint) -> list[str]:
    if node.state is State.ABSENT:
        return [paint(GREEN, f"+ node/{node.node}   (declared in {node.origin}; absent live)")]
    if node.state is State.UNDECLARED:
        return [paint(RED, f"- node/{node.node}   (live GPU node; not declared under {desired_dir})")]
    lines = [line for change in node.labels for line in _change(change, f"{change.name}=", str, paint)]
    return [paint(BOLD, f"node/{node.node}   ({node.origin})"), *lines]


def _budget_block(budget: BudgetDrift, paint: Paint) -> list[str]:
    ref = f"poddisruptionbudget/{budget.namespace}/{budget.name}"
    if budget.state is State.ABSENT:
        return [paint(GREEN, f"+ {ref}   (declared in {budget.origin}; absent live)")]
    lines = [
        line for change in budget.fields for line in _change(change, f"spec.{change.name}: ", _value, paint)
    ]
    return [paint(BOLD, f"{ref}   ({budget.origin})"), *lines]


def _resource_block(item: ResourceDrift, desired_dir: Path, paint: Paint) -> list[str]:
    ref = item.ref.lower()
    if item.state is State.ABSENT:
        return [paint(GREEN, f"+ {ref}   (declared in {item.origin}; absent live)")]
    if item.state is State.UNDECLARED:
        return [paint(RED, f"- {ref}   (live; not declared under {desired_dir})")]
    lines = [
        line for change in item.fields for line in _change(change, f"spec.{change.name}: ", _value, paint)
    ]
    return [paint(BOLD, f"{ref}   ({item.origin})"), *lines]


def _change(change: Change, prefix: str, show: Callable[[Any], str], paint: Paint) -> list[str]:
    desired = paint(GREEN, f"+ {prefix}{show(change.desired)}")
    if change.live is None:
        return [f"{desired}   (desired; not set live)"]
    return [f"{paint(RED, f'- {prefix}{show(change.live)}')}   (live)", f"{desired}   (desired)"]


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _changes(changes: tuple[Change, ...], name: str) -> list[dict[str, Any]]:
    return [{name: change.name, "desired": change.desired, "live": change.live} for change in changes]


def paint(colour: bool) -> Paint:
    """Red and green when `colour` (the command asks the terminal and NO_COLOR), else plain text."""
    if colour:
        return lambda colour, text: f"{colour}{text}{RESET}"
    return lambda _colour, text: text


# --- GitHub: an error on each drifted manifest, a table in the step summary ------------------------


def annotate(drift: Drift, desired_dir: Path) -> list[github_text.Annotation]:
    notes = [_node_annotation(node, desired_dir) for node in drift.nodes]
    notes += [_resource_annotation(item, desired_dir) for item in drift.resources]
    return notes + [_budget_annotation(budget) for budget in drift.budgets]


def _resource_annotation(item: ResourceDrift, desired_dir: Path) -> github_text.Annotation:
    if item.state is State.ABSENT:
        return github_text.at(
            "error", f"{item.ref} is declared here but absent live", item.origin, f"{item.ref} absent"
        )
    if item.state is State.UNDECLARED:
        message = f"{item.ref} is live but no manifest under {desired_dir} declares it"
        return github_text.at("error", message, None, f"{item.ref} not declared")
    lines = [
        f"{item.ref} differs live:",
        *(_change_text(change, f"spec.{change.name}", _value) for change in item.fields),
    ]
    return github_text.at("error", "\n".join(lines), item.origin, f"{item.ref} drifted from git")


def _node_annotation(node: NodeDrift, desired_dir: Path) -> github_text.Annotation:
    ref = f"node/{node.node}"
    if node.state is State.ABSENT:
        return github_text.at(
            "error", f"{ref} is declared here but absent live", node.origin, f"{ref} absent"
        )
    if node.state is State.UNDECLARED:
        message = f"{ref} is a live GPU node that no manifest under {desired_dir} declares"
        return github_text.at("error", message, None, f"{ref} not declared")
    lines = [f"{ref} differs live:", *(_change_text(change, change.name, str) for change in node.labels)]
    return github_text.at("error", "\n".join(lines), node.origin, f"{ref} drifted from git")


def _budget_annotation(budget: BudgetDrift) -> github_text.Annotation:
    ref = f"poddisruptionbudget/{budget.namespace}/{budget.name}"
    if budget.state is State.ABSENT:
        return github_text.at(
            "error", f"{ref} is declared here but absent live", budget.origin, f"{ref} absent"
        )
    lines = [
        f"{ref} differs live:",
        *(_change_text(change, f"spec.{change.name}", _value) for change in budget.fields),
    ]
    return github_text.at("error", "\n".join(lines), budget.origin, f"{ref} drifted from git")


def _change_text(change: Change, name: str, show: Callable[[Any], str]) -> str:
    live = "not set" if change.live is None else show(change.live)
    return f"{name}: desired {show(change.desired)}, live {live}"


def summary(drift: Drift, desired_dir: Path) -> github_text.Summary:
    where = github_text.code(str(desired_dir))
    if not drift.found:
        return github_text.Summary("gpudrv diff: no drift", f"The cluster matches {where}.")
    rows = [row for node in drift.nodes for row in _node_rows(node)]
    rows += [row for budget in drift.budgets for row in _budget_rows(budget)]
    rows += [row for item in drift.resources for row in _resource_rows(item)]
    table = github_text.Table(("Object", "Field", "Desired (git)", "Live", "Declared in"), rows)
    objects = len(drift.nodes) + len(drift.budgets) + len(drift.resources)
    lead = f"The live cluster differs from {where}: {objects} objects."
    return github_text.Summary("gpudrv diff: drift", lead, (table,))


def _node_rows(node: NodeDrift) -> list[tuple[str, ...]]:
    ref, origin = github_text.code(f"node/{node.node}"), github_text.code(node.origin or "")
    if node.state is State.ABSENT:
        return [(ref, "", "declared", "**absent**", origin)]
    if node.state is State.UNDECLARED:
        return [(ref, "", "**not declared**", "GPU node", "")]
    return [(ref, *_cells(change, change.name, str), origin) for change in node.labels]


def _budget_rows(budget: BudgetDrift) -> list[tuple[str, ...]]:
    ref = github_text.code(f"poddisruptionbudget/{budget.namespace}/{budget.name}")
    origin = github_text.code(budget.origin or "")
    if budget.state is State.ABSENT:
        return [(ref, "", "declared", "**absent**", origin)]
    return [(ref, *_cells(change, f"spec.{change.name}", _value), origin) for change in budget.fields]


def _resource_rows(item: ResourceDrift) -> list[tuple[str, ...]]:
    ref, origin = github_text.code(item.ref), github_text.code(item.origin or "")
    if item.state is State.ABSENT:
        return [(ref, "", "declared", "**absent**", origin)]
    if item.state is State.UNDECLARED:
        return [(ref, "", "**not declared**", "live", "")]
    return [(ref, *_cells(change, f"spec.{change.name}", _value), origin) for change in item.fields]


def _cells(change: Change, name: str, show: Callable[[Any], str]) -> tuple[str, str, str]:
    live = "_not set_" if change.live is None else github_text.code(show(change.live))
    return github_text.code(name), github_text.code(show(change.desired)), live


def closing(drift: Drift) -> str:
    text = f"gpudrv diff: {len(drift.nodes)} nodes and {len(drift.budgets)} disruption budgets drifted"
    return text + (f", {len(drift.resources)} GPU Operator driver resources" if drift.resources else "")
