"""`gpudrv drain NODE`: cordon and evict like `kubectl drain`, naming the budget that holds it upgrades."""

from __future__ import annotations

from reconciler.adapters import kube
from reconciler.adapters.cluster.drainer import Drain, DrainTimeout
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.commands import FINDINGS, OK, upgrades
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.budget import Role
from reconciler.errors import GpudrvError
from reconciler.render.progress import Progress

ROLES = (Role.GPU, Role.OTHER, Role.FINISHED)
RECONNECT_SECONDS = 180.0  # a drain waits out an API server that stopped answering for this long


def run(
    node: str,
    timeout: float,
    force: bool,
    preflight: bool,
    options: kube.Options,
    *,
    record: upgrades.Record | None = None,
) -> int:
    record = record or upgrades.Record()
    fleet = Fleet(kube.connect(options))
    fleet.gateway.patience = RECONNECT_SECONDS  # once reached: a restart mid-drain is waited out
    fleet.gateway.notice = lambda text: print(f"waiting for the cluster: {text}", flush=True)
    if fleet.node(node) is None:
        raise GpudrvError(f"node {node} not found in the cluster at {fleet.host}")
    found = budget.blockers(fleet.pods_on(node), fleet.budgets(), force)
    unmanaged = [b.message for b in found if not b.by_budget]
    refusals = [b.message for b in found if b.by_budget] if preflight else []
    if unmanaged or refusals:
        print(f"node/{node} not cordoned: " + "; ".join(unmanaged + refusals))
        record.note(node, "not-cordoned", "; ".join(unmanaged + refusals))
        return FINDINGS
    fleet.patch_node(node, unschedulable=True)
    print(f"node/{node} cordoned")
    try:
        progress = Progress(node)
        Drain(fleet, node, ROLES, timeout, force, say=progress.say, wait=progress.wait).run()
    except DrainTimeout as exc:
        print(f"{exc}\nnode/{node} stays cordoned: `kubectl uncordon {node}` to undo")
        record.note(node, "cordoned", str(exc))
        return FINDINGS
    print(f"node/{node} drained")
    record.note(node, "drained")
    return OK
