"""`gpudrv plan --from DIR`: per node to upgrade, the target, the steps, and every gate's state."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters import kube
from reconciler.commands import FINDINGS, OK, Output
from reconciler.commands import upgrades as up
from reconciler.render import upgrades as show


def run(
    from_dir: Path,
    matrix_path: Path,
    *,
    merged_ref: str | None,
    force: bool,
    options: kube.Options,
    output: Output,
) -> int:
    desired = up.load_desired(from_dir)
    images = up.load_images(matrix_path, merged_ref)
    live = up.read_live(up.connect(options), desired)
    plans, images = up.plans_with_history(desired, live, images, force, matrix_path)
    print(show.plan_json(plans, images) if output is Output.JSON else show.plan_text(plans, images))
    return FINDINGS if any(plan.blocked for plan in plans) else OK
