"""Output of `gpudrv plan`, `status` and `report`: the plans, a line per GPU node, KEY=VALUE facts."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.audit.audit import AuditResult
from reconciler.core.contract.driver_images import Wants
from reconciler.core.cuda import cuda_gate
from reconciler.core.rollout.rollout import Move
from reconciler.core.upgrades.upgrade import Gate, Images, NodePlan
from reconciler.render import document, table
from reconciler.render.audit import findings_json, note_json


def plan_text(plans: Sequence[NodePlan], images: Images) -> str:
    if not plans:
        source = f"images from {images.path} on {images.ref}"
        return f"nothing to upgrade: every declared node runs its desired driver ({source})"
    lines: list[str] = []
    for plan in plans:
        lines.extend(_node_lines(plan))
    skipped = sum(plan.skipped for plan in plans)
    blocked = sum(plan.blocked for plan in plans) - skipped
    lines.append(
        f"{len(plans) - blocked - skipped} of {len(plans)} node(s) can proceed"
        + (f", {blocked} blocked" if blocked else "")
        + (f", {skipped} skipped" if skipped else "")
    )
    return "\n".join(lines)


def _node_lines(plan: NodePlan) -> list[str]:
    live = plan.live_driver.version if plan.live_driver else "unknown"
    head = f"{plan.node}: driver {live} -> {plan.target.version}"
    head += f", image {plan.target_tag}" if plan.target_tag else ""
    head += f" (now at {plan.state})" if plan.state else ""
    mark = " SKIPPED" if plan.skipped else " BLOCKED" if plan.blocked else ""
    lines = [head + mark, "  steps: " + " -> ".join(plan.steps)]
    lines.extend(f"  [{_mark(gate)}] {gate.name}: {gate.detail}" for gate in plan.gates)
    return lines


def plan_json(plans: Sequence[NodePlan], images: Images, ok: bool) -> dict[str, Any]:
    return document.document(
        "plan",
        ok,
        mode="lab",
        ref=images.ref,
        matrix=images.path,
        blocked=any(plan.blocked for plan in plans),
        node_count=len(plans),
        nodes=[_plan_dict(plan) for plan in plans],
        notes=[],
    )


def _plan_dict(plan: NodePlan) -> dict[str, Any]:
    return {
        "node": plan.node,
        "resource": None,
        "live_driver": plan.live_driver.version if plan.live_driver else None,
        "target_driver": plan.target.version,
        "target_tag": plan.target_tag,
        "image": None,
        "upgrade_state": plan.state,
        "steps": list(plan.steps),
        "cordoned_before": plan.cordoned_before,
        "blocked": plan.blocked,
        "skipped": plan.skipped,
        "gates": _gates(plan.gates),
    }


def _mark(gate: Gate) -> str:
    """ok, blocked, or note: a gate that passed with something it could not check (core/cuda/cuda_gate.py)."""
    if not gate.ok:
        return "blocked"
    return "note" if cuda_gate.unchecked((gate,)) else "ok"


def _gates(gates: Sequence[Gate]) -> list[dict[str, Any]]:
    return [{"name": str(g.name), "ok": g.ok, "detail": g.detail} for g in gates]


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
    upcoming: Upcoming | None = None  # the kernel it boots next, when that is not the running one


@dataclass(frozen=True)
class Upcoming:
    """A node's next kernel and the image it needs there: status OK, NEXT-MISSING or INVALID (the
    label gives no kernel: kernel and tag None)."""

    kernel: str | None
    tag: str | None
    status: str


def next_cell(upcoming: Upcoming | None) -> str:
    """`-`; `6.8.0-60-generic` (its image is in the matrix); `6.8.0-60-generic NEXT-MISSING`; `INVALID`."""
    if upcoming is None:
        return "-"
    if upcoming.kernel is None:
        return upcoming.status
    return upcoming.kernel if upcoming.status == "OK" else f"{upcoming.kernel} {upcoming.status}"


def status_table(rows: list[Row]) -> str:
    header = (
        "NODE",
        "DRIVER",
        "DESIRED",
        "TAG",
        "IN-MATRIX",
        "NEXT-KERNEL",
        "STATE",
        "SCHEDULABLE",
        "BLOCKER",
    )
    cells = [header] + [
        (
            r.node,
            r.driver or "-",
            r.desired or "-",
            r.tag or "-",
            "yes" if r.in_matrix else "NO",
            next_cell(r.upcoming),
            r.state or "-",
            "yes" if r.schedulable else "no",
            r.blocker or "-",
        )
        for r in rows
    ]
    return table.columns(cells)


def status_json(rows: list[Row]) -> dict[str, Any]:
    nodes = [
        {
            "node": r.node,
            "live_driver": r.driver,
            "target_driver": r.desired,
            "tag": r.tag,
            "in_matrix": r.in_matrix,
            **next_json(r.upcoming),
            "upgrade_state": r.state,
            "schedulable": r.schedulable,
            "blocker": r.blocker,
        }
        for r in rows
    ]
    return document.document("status", True, node_count=len(rows), nodes=nodes)


def next_json(upcoming: Upcoming | None) -> dict[str, Any]:
    """`next_kernel`, `next_tag`, `next_status` (null, null, null: it boots the kernel it runs)."""
    if upcoming is None:
        return {"next_kernel": None, "next_tag": None, "next_status": None}
    return {"next_kernel": upcoming.kernel, "next_tag": upcoming.tag, "next_status": upcoming.status}


def report_json(
    nodes: list[dict[str, Any]], missing: int, rows: int, next_missing: int = 0
) -> dict[str, Any]:
    """The lab's final report as data: NODES is node_count, SKEW missing_count, NEXT_SKEW
    next_missing_count, MATRIX_ROWS row_count."""
    return document.document(
        "report",
        True,
        node_count=len(nodes),
        missing_count=missing,
        next_missing_count=next_missing,
        row_count=rows,
        nodes=nodes,
    )


def report_text(data: dict[str, Any]) -> str:
    """KEY=VALUE lines; a node whose next kernel is not the running one has its NEXT_KERNEL and NEXT_TAG."""
    lines = [f"NODES={data['node_count']}", f"SKEW={data['missing_count']}"]
    lines.append(f"MATRIX_ROWS={data['row_count']}")
    lines.append(f"NEXT_SKEW={data['next_missing_count']}")  # after the lab's three figures
    for facts in data["nodes"]:
        key = re.sub(r"[^A-Za-z0-9]", "_", facts["node"]).upper()
        lines.append(f"{key}_TAG={facts['tag'] or ''}")
        lines.append(f"{key}_UPGRADE_STATE={facts['upgrade_state'] or ''}")
        if facts["next_status"] is not None:
            lines.append(f"{key}_NEXT_KERNEL={facts['next_kernel'] or ''}")
            lines.append(f"{key}_NEXT_TAG={facts['next_tag'] or ''}")
    return "\n".join(lines)


# --- the GPU Operator's rollout: which nodes the driver resources move, and their gates --------------


def moves_text(moves: Sequence[Move], found: Wants, images: Images) -> str:
    resources = f"{found.contract.mode} resources"
    if not moves:
        lines = [f"nothing to upgrade: every GPU node runs the version its {resources} ask for"]
    else:
        lines = [line for move in moves for line in _move_lines(move)]
        blocked = sum(move.blocked for move in moves)
        lines.append(
            f"{len(moves) - blocked} of {len(moves)} node(s) can proceed"
            + (f", {blocked} blocked" if blocked else "")
            + f" (images from {images.path} on {images.ref})"
        )
        lines.append(
            f"once the {resources} are applied, the GPU Operator's upgrade controller rolls them out "
            "(gpudrv never writes its state label)"
        )
    lines += [f"fleet: {note.message}" for note in found.notes]
    return "\n".join(lines)


def _move_lines(move: Move) -> list[str]:
    owner = f" ({move.resource.ref})" if move.resource else ""
    head = f"{move.node}: driver {move.running or 'unknown'} -> {move.target}{owner}"
    head += f", image {move.image}" if move.image else ""
    lines = [head + (" BLOCKED" if move.blocked else "")]
    lines.extend(f"  [{_mark(gate)}] {gate.name}: {gate.detail}" for gate in move.gates)
    return lines


def moves_json(moves: Sequence[Move], found: Wants, images: Images, ok: bool) -> dict[str, Any]:
    return document.document(
        "plan",
        ok,
        mode=str(found.contract.mode),
        ref=images.ref,
        matrix=images.path,
        blocked=any(move.blocked for move in moves),
        node_count=len(moves),
        nodes=[
            {
                "node": move.node,
                "resource": move.resource.ref if move.resource else None,
                "live_driver": move.running,
                "target_driver": move.target,
                "target_tag": move.tag,
                "image": move.image,
                "blocked": move.blocked,
                "skipped": False,
                "gates": _gates(move.gates),
            }
            for move in moves
        ],
        notes=[note_json(note) for note in found.notes],
    )


# --- apply and drain as data ---------------------------------------------------------------------

OUTCOMES = ("upgraded", "done", "planned", "blocked", "failed", "skipped", "held", "released", "in-progress",
            "cordoned", "drained", "not-cordoned")  # fmt: skip


def applied_json(
    kind: str,
    ok: bool,
    summary: str,
    outcomes: Mapping[str, tuple[str, str | None]],
    audit: AuditResult | None,
    **fields: Any,
) -> dict[str, Any]:
    """What an apply or a drain did: each node's outcome (OUTCOMES) and detail, the final audit's
    findings (`audited` false when the run ended before it), and `summary`, the run's last line."""
    nodes = [
        {"node": name, "outcome": outcome, "detail": detail}
        for name, (outcome, detail) in sorted(outcomes.items())
    ]
    return document.document(
        kind,
        ok,
        **fields,
        node_count=len(nodes),
        nodes=nodes,
        audited=audit is not None,
        findings=[] if audit is None else findings_json(audit),
        summary=summary,
    )
