"""`gpudrv plan --from DIR`: what apply would do, and what blocks it (commands/plan.py); with
--cluster/--all-clusters, once per cluster."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import arguments
from reconciler.adapters import desired, kube
from reconciler.arguments import clusters
from reconciler.arguments.groups import (
    allow_empty_option,
    gate_options,
    matrix_option,
    node_options,
    output_option,
    selector_option,
)
from reconciler.commands import Output
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.cuda.cuda_gate import Reading
from reconciler.usage import DESIRED, LIVE, Usage
from reconciler.verbs import add_parser, options, per_cluster

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "the upgrades git asks for, their steps and gates",
    f"{LIVE} {DESIRED} Exit 0 nothing blocked, 1 an upgrade blocked by a gate (image, budget), 2 an "
    "error or no GPU node (--allow-empty).",
    (
        ("gpudrv plan --from clusters/lab", "each node to upgrade: target, steps, gates"),
        ("gpudrv plan --merged-ref origin/main -o json", "gpudrv.yaml's fleet, as JSON"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    from_dir: Path  # the desired state in git
    matrix: Path
    merged_ref: str | None
    force: bool
    cluster: kube.Options
    output: Output
    pins: desired.Pins
    selector: LabelSelector | None
    allow_empty: bool
    cuda: Reading  # --registry-images, --allow-unverified-images


def register(commands: SubParsers) -> None:
    parents = [node_options(desired=True), selector_option(), allow_empty_option(), clusters.parent()]
    add_parser(
        commands, "plan", __name__, parents=[*parents, matrix_option(), gate_options(), output_option()]
    )


def main(args: argparse.Namespace) -> int:
    if (code := per_cluster(args, main)) is not None:
        return code
    return run(
        Settings(
            arguments.desired_dir(args),
            args.matrix,
            args.merged_ref,
            args.force,
            options(args),
            args.output,
            arguments.pins(args),
            args.selector,
            args.allow_empty,
            Reading(args.registry_images == "on", args.allow_unverified_images),
        )
    )


def run(settings: Settings) -> int:
    from reconciler.commands import plan

    return plan.run(
        settings.from_dir,
        settings.matrix,
        merged_ref=settings.merged_ref,
        force=settings.force,
        options=settings.cluster,
        output=settings.output,
        pins=settings.pins,
        selector=settings.selector,
        allow_empty=settings.allow_empty,
        cuda=settings.cuda,
    )
