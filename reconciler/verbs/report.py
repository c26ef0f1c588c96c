"""`gpudrv report`: the fleet in numbers (nodes, skew, matrix rows), or -o html its page
(commands/status.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import add, clusters
from reconciler.arguments.groups import (
    allow_empty_option,
    matrix_option,
    node_options,
    output_option,
    selector_option,
)
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.usage import Usage
from reconciler.verbs import add_parser, source, targets

if TYPE_CHECKING:
    from reconciler.commands.clusters import Target
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "NODES, SKEW, MATRIX_ROWS, per-node tag; -o html: the fleet page",
    "Live, or offline with --from DIR. -o html writes one self-contained HTML page (coverage grid, "
    "upgrade states, matrix history). Exit 0, 2 an error or no GPU node (--allow-empty).",
    (
        ("gpudrv report --from clusters/lab", "the lab's numbers"),
        ("gpudrv report -o html > fleet.html", "the fleet page, live"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    matrix: Path
    output: Output
    registry_images: bool
    source: NodeSource | None = None  # one cluster or manifests; else `clusters`
    clusters: list[Target] | None = None  # --cluster/--all-clusters


def register(commands: SubParsers) -> None:
    parents = [node_options(), selector_option(), allow_empty_option(), clusters.parent(), matrix_option()]
    parser = add_parser(commands, "report", __name__, parents=[*parents, output_option(Output.HTML)])
    add(parser, ApplySettings, "registry_images")


def main(args: argparse.Namespace) -> int:
    images = args.registry_images == "on"
    if (picked := targets(args)) is not None:
        return run(Settings(args.matrix, args.output, images, clusters=picked))
    return run(Settings(args.matrix, args.output, images, source(args)))


def run(settings: Settings) -> int:
    from reconciler.commands import status

    if settings.clusters is not None:
        return status.report_many(
            settings.clusters, settings.matrix, settings.output, settings.registry_images
        )
    assert settings.source is not None
    return status.run_report(settings.matrix, settings.source, settings.output, settings.registry_images)
