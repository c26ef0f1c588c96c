"""`gpudrv status`: each GPU node's driver, kernel and image, live; with --from, the desired driver
from git (commands/status.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import clusters
from reconciler.arguments.groups import (
    allow_empty_option,
    matrix_option,
    node_options,
    output_option,
    selector_option,
)
from reconciler.commands import Output
from reconciler.usage import LIVE, Usage
from reconciler.verbs import add_parser, source, targets

if TYPE_CHECKING:
    from reconciler.commands.clusters import Target
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "one line per GPU node: driver, desired driver, image, upgrade state, what blocks it",
    f"{LIVE} --from DIR adds the desired driver from git. Exit 0, 2 an error or no GPU node (--allow-empty).",
    (
        ("gpudrv status --from clusters/lab", "the lab, live, against its manifests"),
        ("gpudrv status -l pool=a100 -o json", "one pool, as JSON"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    matrix: Path
    output: Output
    from_dir: Path | None = None  # the desired state in git
    source: NodeSource | None = None  # the live nodes; else `clusters`
    clusters: list[Target] | None = None  # --cluster/--all-clusters


def register(commands: SubParsers) -> None:
    parents = [node_options(desired=True), selector_option(), allow_empty_option(), clusters.parent()]
    add_parser(commands, "status", __name__, parents=[*parents, matrix_option(), output_option()])


def main(args: argparse.Namespace) -> int:
    if (picked := targets(args)) is not None:
        return run(Settings(args.matrix, args.output, clusters=picked))
    return run(Settings(args.matrix, args.output, args.from_dir, source(args, live=True)))


def run(settings: Settings) -> int:
    from reconciler.commands import status

    if settings.clusters is not None:
        return status.status_many(settings.clusters, settings.matrix, settings.output)
    assert settings.source is not None
    return status.run_status(settings.from_dir, settings.matrix, settings.source, settings.output)
