"""`gpudrv explain [KIND/NAME]`: why a CUDA workload is Pending, or would be after an upgrade
(commands/explain.py); with --cluster/--all-clusters, once per cluster."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import GITHUB_HELP, add, clusters, values
from reconciler.arguments.groups import node_options, selector_option
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.usage import Usage
from reconciler.verbs import add_parser, per_cluster, source

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "which nodes a workload may run on, why not the others, and CUDA driver checks",
    "Pods, Jobs, CronJobs, Deployments and StatefulSets (their pod templates) from --from DIR, or live "
    "pods. Exit 1 when a workload fits no node or a node's driver is too old for its CUDA image (with "
    "-o github only the latter: fitting no node is a warning there).",
    (
        ("gpudrv explain pod/cuda13-job --from clusters/lab", "why it stays Pending"),
        ("gpudrv explain -n gpu-drv", "every live pod of a namespace"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    target: str | None  # KIND/NAME; None: every workload
    namespace: str | None
    source: NodeSource
    output: Output
    registry_images: bool


def register(commands: SubParsers) -> None:
    parser = add_parser(
        commands, "explain", __name__, parents=[node_options(), clusters.parent(), selector_option()]
    )
    parser.add_argument(
        "target", nargs="?", metavar="KIND/NAME", help="e.g. pod/cuda13-job (default: every workload)"
    )
    parser.add_argument("-n", "--namespace", help="namespace (live default: default; --from: all)")
    add(parser, ApplySettings, "registry_images")
    parser.add_argument(
        "-o",
        "--output",
        choices=values(Output.TEXT, Output.JSON, Output.YAML, Output.GITHUB),
        help=f"text, json, yaml or {GITHUB_HELP}",
    )


def main(args: argparse.Namespace) -> int:
    if (code := per_cluster(args, main)) is not None:
        return code
    return run(Settings(args.target, args.namespace, source(args), args.output, args.registry_images == "on"))


def run(settings: Settings) -> int:
    from reconciler.commands import explain

    return explain.run(
        settings.target, settings.namespace, settings.source, settings.output, settings.registry_images
    )
