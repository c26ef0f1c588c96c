"""`gpudrv plan --from DIR`: per node to upgrade, the target, the steps, and every gate's state.

In the lab the desired driver is each node's declared labels and gpudrv runs the steps itself. With
the GPU Operator's driver resources in DIR the operator's upgrade controller runs them: the plan is
which nodes the resources move to another driver, the image each will pull, and the gates.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters import desired, kube
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.sources import require_gpu_nodes
from reconciler.commands import FINDINGS, OK, Output, cuda_gates, upgrades
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.core.cuda.cuda_gate import READ_REGISTRY, Reading
from reconciler.core.rollout import rollout
from reconciler.core.upgrades.upgrade import Images
from reconciler.core.views import reads
from reconciler.render import document
from reconciler.render.upgrades import moves_json, moves_text, plan_json, plan_text


def run(
    from_dir: Path,
    matrix_path: Path,
    *,
    merged_ref: str | None,
    force: bool,
    options: kube.Options,
    output: Output,
    pins: desired.Pins,
    selector: LabelSelector | None = None,
    allow_empty: bool = False,
    cuda: Reading = READ_REGISTRY,
) -> int:
    state = desired.from_git(from_dir, pins)
    declared = upgrades.load_declared(from_dir, selector)
    if not state.operator:  # lab mode: the declared GPU nodes are the plan's
        upgrades.require_declared(declared, from_dir, selector, allow_empty)
    images = upgrades.load_images(matrix_path, merged_ref)
    fleet = upgrades.connect(options)
    state = desired.on_cluster(state, fleet.gateway)
    if state.operator:
        gates = cuda_gates.Gates(cuda, [])
        return _operator_plan(
            fleet, state, images, force, output, gates=gates, selector=selector, allow_empty=allow_empty
        )
    live = upgrades.read_live(fleet, declared)
    plans, images = upgrades.plans_with_history(declared, live, images, force, matrix_path, cuda=cuda)
    code = FINDINGS if any(plan.blocked and not plan.skipped for plan in plans) else OK
    if output.structured:
        print(document.text({**plan_json(plans, images, code == OK), "desired": state.as_json()}, output))
    else:
        print(plan_text(plans, images))
    return code


def _operator_plan(
    fleet: Fleet,
    state: Desired,
    images: Images,
    force: bool,
    output: Output,
    *,
    gates: cuda_gates.Gates,
    selector: LabelSelector | None,
    allow_empty: bool,
) -> int:
    """The resources in git applied to the live nodes' facts (kernel, OS, the driver they run)."""
    live = fleet.cluster.gpu_nodes(selector, reads.for_contract(state.contract))
    require_gpu_nodes(len(live), f"in the cluster at {fleet.host}", selector, allow_empty)
    found = desired.wants(state, live)
    moving = list(rollout.moving(found.wants))
    pods = fleet.pods_on_nodes(moving)
    moves = rollout.moves(found.wants, {}, images, pods, fleet.budgets() if moving else [], force=force)
    moves = gates.on_moves(moves, pods, live)
    code = FINDINGS if any(move.blocked for move in moves) or found.notes else OK
    if output.structured:
        print(
            document.text(
                {**moves_json(moves, found, images, code == OK), "desired": state.as_json()}, output
            )
        )
    else:
        print(moves_text(moves, found, images))
    return code
