"""`gpudrv diff --from DIR`: the desired state in git against the live cluster, like `kubectl diff`.

`-` lines are live, `+` lines desired; red and green only on a terminal, and never with NO_COLOR.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.adapters import cluster, manifests
from reconciler.commands import FINDINGS, OK
from reconciler.core.diff import Budget, BudgetDrift, Change, Drift, NodeDrift, State, diff

RED, GREEN, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[0m"
Paint = Callable[[str, str], str]


def run(desired_dir: Path, options: cluster.Options, output: str) -> int:
    # Read git first: a broken manifest is reported without touching the cluster.
    nodes, budgets = manifests.load_nodes(desired_dir), manifests.load_budget_specs(desired_dir)
    live = cluster.connect(options)
    namespaces = sorted({budget.namespace for budget in budgets})
    live_budgets = [live_budget(doc) for ns in namespaces for doc in live.disruption_budgets(ns)]
    drift = diff(nodes, live.nodes(), budgets, live_budgets)
    text = json.dumps(as_json(drift), indent=2) if output == "json" else as_text(drift, desired_dir, _paint())
    print(text)
    return FINDINGS if drift.found else OK


def live_budget(document: dict[str, Any]) -> Budget:
    metadata = document.get("metadata") or {}
    return Budget(
        str(metadata.get("namespace", "")), str(metadata.get("name", "")), document.get("spec") or {}
    )


def as_text(drift: Drift, desired_dir: Path, paint: Paint) -> str:
    if not drift.found:
        return "no drift"
    blocks = [_node_block(node, desired_dir, paint) for node in drift.nodes]
    blocks += [_budget_block(budget, paint) for budget in drift.budgets]
    return "\n".join(line for block in blocks for line in block)


def as_json(drift: Drift) -> dict[str, Any]:
    return {
        "drift": drift.found,
        "nodes": [
            {"node": n.node, "state": str(n.state), "origin": n.origin, "labels": _changes(n.labels, "key")}
            for n in drift.nodes
        ],
        "budgets": [
            {
                "namespace": b.namespace,
                "name": b.name,
                "state": str(b.state),
                "origin": b.origin,
                "fields": _changes(b.fields, "field"),
            }
            for b in drift.budgets
        ],
    }


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


def _change(change: Change, prefix: str, show: Callable[[Any], str], paint: Paint) -> list[str]:
    desired = paint(GREEN, f"+ {prefix}{show(change.desired)}")
    if change.live is None:
        return [f"{desired}   (desired; not set live)"]
    return [f"{paint(RED, f'- {prefix}{show(change.live)}')}   (live)", f"{desired}   (desired)"]


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _changes(changes: tuple[Change, ...], name: str) -> list[dict[str, Any]]:
    return [{name: change.name, "desired": change.desired, "live": change.live} for change in changes]


def _paint() -> Paint:
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        return lambda colour, text: f"{colour}{text}{RESET}"
    return lambda _colour, text: text
