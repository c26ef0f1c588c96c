"""`gpudrv apply --from DIR`: drive each node to its desired driver, one GPU Operator state at a time.

The gates, the budgets and the final audit are here; the upgrade itself is core/lab/executor.py's
(its state machine, over adapters/cluster/fleet.py's Fleet). An API server that goes away for a while
(restarted, etcd stalled) is waited for (kube.Gateway.patience).
"""

from __future__ import annotations

import time

from reconciler.adapters import kube
from reconciler.adapters.cluster import gpu_operator
from reconciler.adapters.cluster.fleet import Fleet, SystemHost, run_owner
from reconciler.commands import FINDINGS, OK, cuda_gates, upgrades
from reconciler.commands.settings import ApplySettings
from reconciler.core.audit import audit
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.core.lab import fleet_upgrade
from reconciler.core.lab.fleet_upgrade import Outcome
from reconciler.core.upgrades import upgrade
from reconciler.core.upgrades.upgrade import Images
from reconciler.core.views import diff
from reconciler.errors import GpudrvError
from reconciler.render.progress import Progress
from reconciler.render.upgrades import plan_text

RECONNECT_SECONDS = 180.0  # how long an upgrade waits out an API server that stopped answering
BUDGET_SETTLE_SECONDS = 30.0
BUDGET_ADVICE = (
    "Let that manager change the budget, or take the budget out of its hands first (docs/lab-mode.md, "
    "budgets another manager owns); the budget and the nodes are left as they were"
)


def run(
    settings: ApplySettings, state: Desired, options: kube.Options, record: upgrades.Record | None = None
) -> int:
    """Lab mode's apply: `state` (adapters/desired.py) declares no driver resource."""
    record = record or upgrades.Record()
    record.mode = str(state.mode)
    record.desired = state.as_json()
    # 1. manifests and matrix valid first
    desired = upgrades.load_declared(settings.from_dir, settings.selector)
    upgrades.require_declared(desired, settings.from_dir, settings.selector, settings.allow_empty)
    images = upgrades.load_images(settings.matrix, settings.merged_ref)  # 2. the image gate: the merged ref
    fleet = upgrades.connect(options)
    _refuse_beside_operator(fleet)  # 3. never two controllers on one label
    if settings.dry_run:
        return _dry_run(fleet, desired, images, settings, record)
    fleet.gateway.patience = RECONNECT_SECONDS  # from here on the cluster changes: outages are waited out
    fleet.gateway.notice = lambda text: print(f"waiting for the cluster: {text}", flush=True)
    _sync_budgets(fleet, desired)  # 4. budgets are part of the reviewed change
    outcome = _upgrade_all(fleet, desired, images, settings)
    _note_outcome(record, outcome)
    return _final_audit(fleet, images.working, outcome, record, settings.selector)


def _refuse_beside_operator(fleet: Fleet) -> None:
    """Lab mode drives nvidia.com/gpu-driver-upgrade-state itself; where the GPU Operator runs, its
    upgrade controller owns that label (and removes it when auto-upgrade is off)."""
    found = gpu_operator.operator_present(fleet.gateway)
    if found is not None:
        raise GpudrvError(
            f"lab mode refused: {found} in the cluster at {fleet.host}: the GPU Operator's upgrade "
            "controller owns nvidia.com/gpu-driver-upgrade-state there, and two controllers must never "
            "drive one label"
        )


def _dry_run(
    fleet: Fleet, desired: upgrades.Declared, images: Images, settings: ApplySettings, record: upgrades.Record
) -> int:
    changing = _budgets_to_apply(fleet, desired)  # a budget apply would be refused: refused here too
    live = upgrades.read_live(fleet, desired)
    force = settings.upgrade.force
    plans, images = upgrades.plans_with_history(
        desired, live, images, force, settings.matrix, cuda=settings.cuda
    )
    for plan in plans:
        refused = next((gate.detail for gate in plan.gates if not gate.ok), None)
        outcome = "skipped" if plan.skipped else "blocked" if plan.blocked else "planned"
        record.note(plan.node, outcome, refused or (plan.target_tag if outcome == "planned" else None))
    print(plan_text(plans, images))
    for budget, change in sorted(changing, key=lambda pair: (pair[0].namespace, pair[0].name)):
        print(f"would apply PDB {budget.ref}: {change}; budgets above are as they are live now")
    print("dry run: nothing was changed")
    return FINDINGS if any(plan.blocked and not plan.skipped for plan in plans) else OK


def _budget_drift(fleet: Fleet, desired: upgrades.Declared) -> dict[tuple[str, str], str]:
    """The declared budgets that differ live, each with what changes; unchanged ones are left alone."""
    live = [
        found
        for namespace in sorted({b.namespace for b in desired.budgets})
        for found in fleet.cluster.budget_specs(namespace)
    ]
    return {
        (d.namespace, d.name): ", ".join(f"{c.name} {c.live} -> {c.desired}" for c in d.fields)
        or "absent live"
        for d in diff.budget_drift(desired.budgets, live)
    }


def _budgets_to_apply(fleet: Fleet, desired: upgrades.Declared) -> list[tuple[diff.Budget, str]]:
    """The declared budgets that differ live, each with what changes, checked by the API server first
    (a dry run of each unforced apply): a field another field manager owns (Helm, Argo CD, a person's
    kubectl) is one line naming it, exit 2, and no budget and no node is changed."""
    drifted = _budget_drift(fleet, desired)
    changing = [
        (declared, change)
        for declared in desired.budgets
        if (change := drifted.get((declared.namespace, declared.name))) is not None
    ]
    for declared, change in changing:
        _apply_budget(fleet, declared, change, dry_run=True)
    return changing


def _apply_budget(fleet: Fleet, declared: diff.Budget, change: str, *, dry_run: bool = False) -> None:
    ref = f"PDB {declared.ref} ({change}; {declared.origin or 'DIR'})"
    fleet.apply_budget(
        declared.namespace, declared.name, declared.spec, ref=ref, advice=BUDGET_ADVICE, dry_run=dry_run
    )


def _sync_budgets(fleet: Fleet, desired: upgrades.Declared) -> None:
    for declared, change in _budgets_to_apply(fleet, desired):
        _apply_budget(fleet, declared, change)
        print(f"applied PDB {declared.ref}: {change} (server-side, field manager gpudrv)")
    deadline = time.monotonic() + BUDGET_SETTLE_SECONDS
    while not all(b.fresh for b in fleet.budgets()) and time.monotonic() < deadline:
        time.sleep(0.5)  # the disruption controller recomputes status after a spec change


def _upgrade_all(
    fleet: Fleet, desired: upgrades.Declared, images: Images, settings: ApplySettings
) -> Outcome:
    gates = cuda_gates.Gates(settings.cuda, [])  # each image is read once per run

    def read() -> fleet_upgrade.Round:
        live = upgrades.read_live(fleet, desired)
        gates.know(live.node_list())
        plans = upgrades.make_plans(desired, live, images, settings.upgrade.force, gates)
        return fleet_upgrade.Round(plans, live.pods, live.budgets)

    return fleet_upgrade.FleetUpgrade(
        fleet, SystemHost(), images, settings.upgrade, read, owner=run_owner, reporter=Progress
    ).run()


def _note_outcome(record: upgrades.Record, outcome: Outcome) -> None:
    for name in outcome.done:
        record.note(name, "upgraded")
    for name in outcome.skipped:
        record.note(name, "skipped", f"{upgrade.SKIP_LABEL}=true")
    for name, why in outcome.blocked.items():
        record.note(name, "blocked", why)
    for name, why in outcome.failed.items():
        record.note(name, "failed", why)


def _final_audit(
    fleet: Fleet,
    working_tags: frozenset[str],
    outcome: Outcome,
    record: upgrades.Record,
    selector: LabelSelector | None = None,
) -> int:
    result = audit.audit([live.node for live in fleet.gpu_nodes(selector)], working_tags)
    record.audit = result
    print("audit: " + ("OK" if result.ok else "; ".join(f.line() for f in result.findings)))
    summary = f"{len(outcome.done)} upgraded, {len(outcome.blocked)} blocked, {len(outcome.failed)} failed"
    if outcome.skipped:
        summary += f", {len(outcome.skipped)} skipped ({upgrade.SKIP_LABEL}=true)"
    print(summary)
    return OK if outcome.ok and result.ok else FINDINGS
