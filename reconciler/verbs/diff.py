"""`gpudrv diff --from DIR`: the desired YAML in git against the cluster, like kubectl diff
(commands/diff.py); with --cluster/--all-clusters, once per cluster."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import arguments
from reconciler.adapters import desired, kube
from reconciler.arguments import add, clusters, path
from reconciler.arguments.groups import cluster_options, output_option, selector_option
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.core.base.label_selector import LabelSelector
from reconciler.usage import DESIRED, LIVE, Usage
from reconciler.verbs import add_parser, options, per_cluster

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "node labels, PDB specs and GPU Operator driver resources in git against the live cluster",
    f"{LIVE} {DESIRED} Like kubectl diff: '-' live, '+' desired. Exit 0 no drift, 1 drift, 2 error.",
    (
        ("gpudrv diff --from clusters/lab", "the lab in git against the cluster"),
        ("gpudrv diff -l pool=a100 -o json", "gpudrv.yaml's fleet, one pool, as JSON"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    from_dir: Path  # the desired state in git
    cluster: kube.Options
    output: Output
    selector: LabelSelector | None
    pins: desired.Pins


def register(commands: SubParsers) -> None:
    parents = [selector_option(), clusters.parent(), output_option(Output.GITHUB)]
    parser = add_parser(commands, "diff", __name__, parents=parents)
    parser.add_argument(
        "--from",
        dest="from_dir",
        type=path("--from"),
        metavar="DIR",
        help="manifests in git (default: gpudrv.yaml's fleet)",
    )
    cluster_options(parser)
    add(parser, ApplySettings, "operator_version")  # the rule the desired resources' images follow


def main(args: argparse.Namespace) -> int:
    if (code := per_cluster(args, main)) is not None:
        return code
    return run(
        Settings(arguments.desired_dir(args), options(args), args.output, args.selector, arguments.pins(args))
    )


def run(settings: Settings) -> int:
    from reconciler.commands import diff

    return diff.run(settings.from_dir, settings.cluster, settings.output, settings.selector, settings.pins)
