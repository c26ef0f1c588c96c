"""`gpudrv tag NODE`: the driver image tag a node needs (commands/tag.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import given
from reconciler.arguments.groups import node_options, output_option
from reconciler.commands import Output
from reconciler.usage import Usage
from reconciler.verbs import add_parser, source

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "print the driver image tag a node needs",
    "From the node's labels: driver branch, kernel, OS (<branch>-<kernel>-<os-tag>). Live, or the "
    "Node manifest under --from DIR. Exit 0, or 2 with one line naming the label at fault.",
    (
        ("gpudrv tag lab-node-0 --from clusters/lab", "550-5.15.0-119-generic-ubuntu22.04"),
        ("gpudrv tag gpu-node-7 --context prod", "the live node"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    node: str
    source: NodeSource
    output: Output


def register(commands: SubParsers) -> None:
    parser = add_parser(commands, "tag", __name__, parents=[node_options(), output_option()])
    parser.add_argument("node", type=given("NODE", "node name"), metavar="NODE")


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.node, source(args), args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import tag

    return tag.run(settings.node, settings.source, settings.output)
