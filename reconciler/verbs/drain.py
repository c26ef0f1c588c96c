"""`gpudrv drain NODE`: cordon and evict, like kubectl drain, naming the budget that refuses
(commands/drain.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.adapters import kube
from reconciler.arguments import add, given, seconds
from reconciler.arguments.groups import node_options, output_option
from reconciler.commands import Output
from reconciler.core.lab.executor import Options
from reconciler.usage import LIVE, Usage
from reconciler.verbs import add_parser, as_data, options

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "cordon and evict, naming the budget that refuses",
    f"{LIVE} Like kubectl drain, through the eviction API. Exit 0 drained, 1 refused (the node stays "
    "cordoned unless --preflight) or timed out, 2 an error.",
    (
        ("gpudrv drain lab-node-1 --preflight", "refuse before cordoning when a budget would"),
        ("gpudrv drain lab-node-1 --timeout 20s", "give up after 20 seconds"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    node: str
    timeout: float  # seconds
    force: bool
    preflight: bool
    cluster: kube.Options
    output: Output


def register(commands: SubParsers) -> None:
    parser = add_parser(commands, "drain", __name__, parents=[node_options(manifests=False), output_option()])
    parser.add_argument("node", type=given("NODE", "node name"), metavar="NODE")
    parser.add_argument(
        "--timeout", type=seconds, default=300.0, metavar="D", help="give up after D (default 5m)"
    )
    add(parser, Options, "force")
    parser.add_argument("--preflight", action="store_true", help="do not cordon when a budget would refuse")


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.node, args.timeout, args.force, args.preflight, options(args), args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import drain

    def drained(record: Any) -> int:
        return drain.run(
            settings.node,
            settings.timeout,
            settings.force,
            settings.preflight,
            settings.cluster,
            record=record,
        )

    return as_data(settings.output, "drain", drained, node=settings.node)
