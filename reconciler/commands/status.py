"""`gpudrv status` and `gpudrv report`: where every GPU node stands, computed now from the cluster."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from reconciler.adapters import cluster, github, manifests
from reconciler.adapters.fleet import Fleet
from reconciler.commands import OK
from reconciler.commands.apply import FAILURE
from reconciler.commands.sources import valid_matrix
from reconciler.core import audit, budget, tags, upgrade
from reconciler.core.tags import Node
from reconciler.core.upgrade import LiveNode, State


@dataclass(frozen=True)
class Row:
    node: str
    driver: str | None
    desired: str | None
    tag: str | None
    in_matrix: bool
    state: str | None
    schedulable: bool
    blocker: str | None


def run_status(from_dir: Path | None, matrix_path: Path, options: cluster.Options, output: str) -> int:
    rows = status_rows(from_dir, matrix_path, options)
    print(github.json_text([asdict(row) for row in rows]) if output == "json" else status_table(rows))
    return OK


def status_rows(from_dir: Path | None, matrix_path: Path, options: cluster.Options) -> list[Row]:
    in_matrix = valid_matrix(matrix_path).tags()
    desired = {node.name: node for node in manifests.load_nodes(from_dir)} if from_dir else {}
    fleet = Fleet(cluster.connect(options))
    live = sorted(fleet.gpu_nodes(), key=lambda node: node.name)
    budgets = fleet.budgets() if live else []
    return [_row(fleet, node, desired.get(node.name), in_matrix, budgets) for node in live]


def _row(
    fleet: Fleet,
    live: LiveNode,
    desired: Node | None,
    in_matrix: frozenset[str],
    budgets: list[budget.Budget],
) -> Row:
    running = upgrade.driver(live.node.labels)
    wanted = upgrade.driver(desired.labels) if desired else None
    tag = _tag(live.node)
    return Row(
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


def status_table(rows: list[Row]) -> str:
    header = ("NODE", "DRIVER", "DESIRED", "TAG", "IN-MATRIX", "STATE", "SCHEDULABLE", "BLOCKER")
    cells = [header] + [
        (
            r.node,
            r.driver or "-",
            r.desired or "-",
            r.tag or "-",
            "yes" if r.in_matrix else "NO",
            r.state or "-",
            "yes" if r.schedulable else "no",
            r.blocker or "-",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in cells
    )


def run_report(matrix_path: Path, options: cluster.Options, output: str) -> int:
    parsed = valid_matrix(matrix_path)
    nodes = sorted(Fleet(cluster.connect(options)).gpu_nodes(), key=lambda node: node.name)
    result = audit.audit([n.node for n in nodes], parsed.tags())
    skew = sum(f.status is audit.Status.MISSING for f in result.findings)
    per_node = {
        n.name: {"tag": _tag(n.node), "upgrade_state": n.node.labels.get(tags.UPGRADE_STATE)} for n in nodes
    }
    data = {"nodes": len(nodes), "skew": skew, "matrix_rows": len(parsed.rows), "per_node": per_node}
    print(github.json_text(data) if output == "json" else report_text(data))
    return OK


def report_text(data: dict[str, object]) -> str:
    lines = [f"NODES={data['nodes']}", f"SKEW={data['skew']}", f"MATRIX_ROWS={data['matrix_rows']}"]
    per_node = data["per_node"]
    assert isinstance(per_node, dict)
    for name, facts in per_node.items():
        key = re.sub(r"[^A-Za-z0-9]", "_", name).upper()
        lines.append(f"{key}_TAG={facts['tag'] or ''}")
        lines.append(f"{key}_UPGRADE_STATE={facts['upgrade_state'] or ''}")
    return "\n".join(lines)
