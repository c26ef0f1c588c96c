"""`gpudrv status` and `gpudrv report`: where every GPU node stands, computed now from the cluster."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from reconciler.adapters import kube, manifests
from reconciler.adapters.fleet import Fleet
from reconciler.adapters.sources import valid_matrix
from reconciler.commands import OK, Output
from reconciler.core import audit, budget, tags, upgrade
from reconciler.core.tags import Node
from reconciler.core.upgrade import FAILURE, LiveNode, State
from reconciler.render import upgrades as show


def run_status(from_dir: Path | None, matrix_path: Path, options: kube.Options, output: Output) -> int:
    rows = status_rows(from_dir, matrix_path, options)
    print(
        json.dumps([asdict(row) for row in rows], indent=2)
        if output is Output.JSON
        else show.status_table(rows)
    )
    return OK


def status_rows(from_dir: Path | None, matrix_path: Path, options: kube.Options) -> list[show.Row]:
    in_matrix = valid_matrix(matrix_path).tags()
    desired = {node.name: node for node in manifests.load_nodes(from_dir)} if from_dir else {}
    fleet = Fleet(kube.connect(options))
    live = sorted(fleet.gpu_nodes(), key=lambda node: node.name)
    budgets = fleet.budgets() if live else []
    return [_row(fleet, node, desired.get(node.name), in_matrix, budgets) for node in live]


def _row(
    fleet: Fleet,
    live: LiveNode,
    desired: Node | None,
    in_matrix: frozenset[str],
    budgets: list[budget.Budget],
) -> show.Row:
    running = upgrade.driver(live.node.labels)
    wanted = upgrade.driver(desired.labels) if desired else None
    tag = _tag(live.node)
    return show.Row(
        node=live.name,
        driver=running.version if running else None,
        desired=wanted.version if wanted else None,
        tag=tag,
        in_matrix=tag in in_matrix if tag else False,
        state=live.node.labels.get(tags.UPGRADE_STATE),
        schedulable=not live.unschedulable,
        blocker=_blocker(fleet, live, desired, budgets),
    )


def _tag(node: Node) -> str | None:
    try:
        return tags.tag(node)
    except tags.TagError:
        return None


def _blocker(fleet: Fleet, live: LiveNode, desired: Node | None, budgets: list[budget.Budget]) -> str | None:
    """What holds the node: a recorded failure, or a budget that refuses its drain now."""
    if failure := live.annotations.get(FAILURE):
        return failure
    state = upgrade.state_of(live.node.labels)
    pending = desired is not None and upgrade.needs_upgrade(desired, live) is not None
    if not pending and state in (None, State.DONE, State.FAILED):
        return None
    if state not in (None, *upgrade.BEFORE_CORDON, State.POD_DELETION, State.DRAIN):
        return None
    found = budget.blockers(fleet.pods_on(live.name), budgets)
    return "; ".join(b.message for b in found) or None


def run_report(matrix_path: Path, options: kube.Options, output: Output) -> int:
    parsed = valid_matrix(matrix_path)
    nodes = sorted(Fleet(kube.connect(options)).gpu_nodes(), key=lambda node: node.name)
    result = audit.audit([n.node for n in nodes], parsed.tags())
    skew = sum(f.status is audit.Status.MISSING for f in result.findings)
    per_node = {
        n.name: {"tag": _tag(n.node), "upgrade_state": n.node.labels.get(tags.UPGRADE_STATE)} for n in nodes
    }
    data = {"nodes": len(nodes), "skew": skew, "matrix_rows": len(parsed.rows), "per_node": per_node}
    print(json.dumps(data, indent=2) if output is Output.JSON else show.report_text(data))
    return OK
