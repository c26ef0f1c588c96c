"""`gpudrv apply --from DIR`: the desired driver on the fleet. On a GPU Operator fleet (the one desired
state says: adapters/desired.py) the operator's staged rollout (commands/rollout.py); in the lab,
gpudrv's own steps (commands/apply.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler import arguments
from reconciler.adapters import desired, kube
from reconciler.arguments import add, clusters
from reconciler.arguments.groups import (
    allow_empty_option,
    gate_options,
    matrix_option,
    node_options,
    output_option,
    selector_option,
)
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.core.lab.executor import Options
from reconciler.errors import GpudrvError
from reconciler.usage import DESIRED, LIVE, Usage
from reconciler.verbs import add_parser, as_data, options

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "upgrade nodes to their desired driver",
    f"{LIVE} {DESIRED} In the lab gpudrv runs each step; with the GPU Operator's driver resources in "
    "DIR it stages the operator's rollout (canary, batches); --hold / --await-sync when a GitOps "
    "engine applies the driver resources. -o json/yaml: the progress on stderr, one object at the end; "
    "-o github: a step summary too. Exit 0 done, 1 blocked or failed, 2 an error or no GPU node "
    "(--allow-empty).",
    (
        ("gpudrv apply --from clusters/lab --dry-run", "the plan; nothing changes"),
        ("gpudrv apply --from clusters/prod --canary 1 --batch 5", "the operator's rollout, staged"),
        ("gpudrv apply --from clusters/prod --hold", "before Argo CD or Flux syncs: hold the nodes"),
        ("gpudrv apply --from clusters/prod --await-sync", "after the sync: canary and batches"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    apply: ApplySettings  # its flags (and gpudrv.yaml's), shared with the loop's apply
    cluster: kube.Options
    pins: desired.Pins
    output: Output


def register(commands: SubParsers) -> None:
    parents = [node_options(desired=True), selector_option(), allow_empty_option(), clusters.parent(one=True)]
    parser = add_parser(
        commands,
        "apply",
        __name__,
        parents=[*parents, matrix_option(), gate_options(), output_option(Output.GITHUB)],
    )
    add(parser, ApplySettings, "dry_run")
    add(parser, Options, "max_parallel", "drain_timeout", "installer", "install_timeout")
    staged = parser.add_argument_group("with the GPU Operator's driver resources in DIR")
    add(staged, ApplySettings, "canary", "batch")
    add(staged.add_mutually_exclusive_group(), ApplySettings, "release", "hold", "await_sync")


def main(args: argparse.Namespace) -> int:
    if clusters.wanted(args):  # one cluster, by design: its entry's connection and fleet
        args = clusters.in_cluster(args, clusters.one_target(args, args.config_clusters), None, True)
    return run(Settings(arguments.apply_settings(args), options(args), arguments.pins(args), args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import apply, rollout

    given = settings.apply
    state = desired.from_git(given.from_dir, settings.pins)
    if state.operator:
        return as_data(
            settings.output,
            "apply",
            lambda record: rollout.run(given, state, settings.cluster, record),
            dry_run=given.dry_run,
        )
    if given.hold or given.await_sync:
        flag = "--hold" if given.hold else "--await-sync"
        raise GpudrvError(
            f"{flag} stages a GPU Operator rollout around a GitOps engine's sync, but "
            f"{given.from_dir} declares no ClusterPolicy or NVIDIADriver (lab mode applies nothing "
            "a GitOps engine owns, and no Helm installation of the operator)"
        )
    return as_data(
        settings.output,
        "apply",
        lambda record: apply.run(given, state, settings.cluster, record),
        dry_run=given.dry_run,
    )
