"""`gpudrv matrix fill`: copy the images the fleet needs and the registry lacks from upstream, and add
their rows (commands/fill.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import given
from reconciler.arguments.groups import (
    allow_empty_option,
    matrix_option,
    node_options,
    output_option,
    registry_options,
    repository,
    selector_option,
    upstream,
)
from reconciler.commands import Output
from reconciler.core.images.registry import Repository
from reconciler.usage import Usage
from reconciler.verbs import add_parser, source

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "copy the images the fleet lacks from an upstream registry, plan the builds of the rest",
    "For each image the GPU nodes need and the matrix lacks (MISSING, NEXT-MISSING): ADD the row if "
    "the target registry (--registry) has it, COPY it from --upstream (every platform, digests "
    "verified) and add the row, or BUILD it (-o github-matrix: a workflow's build matrix). Rows are "
    "added only for images verified in the target. Exit 0 all filled, 1 a build needed or a copy "
    "failed, 2 an error.",
    (
        ("gpudrv matrix fill --upstream nvcr.io/nvidia/driver --dry-run", "the plan"),
        ("gpudrv matrix fill --upstream nvcr.io/nvidia/driver", "copy, verify, add the rows"),
        (
            "gpudrv matrix fill -o github-matrix",
            "the builds, for strategy.matrix (gpudrv.yaml's registries)",
        ),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    source: NodeSource
    matrix: Path
    upstream: Repository
    registry: Repository
    output: Output
    dry_run: bool
    concurrency: int


def register(verbs: SubParsers) -> None:
    parents = [node_options(), selector_option(), allow_empty_option(), matrix_option()]
    parser = add_parser(
        verbs, "fill", __name__, parents=[*parents, output_option(Output.GITHUB, Output.GITHUB_MATRIX)]
    )
    parser.add_argument(
        "--upstream",
        type=given("--upstream", "repository"),
        metavar="REPO",
        help="the OCI repository to copy missing images from, like nvcr.io/nvidia/driver "
        "(default: gpudrv.yaml's upstream)",
    )
    registry_options(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan (COPY, ADD, BUILD); copy and write nothing"
    )


def main(args: argparse.Namespace) -> int:
    return run(
        Settings(
            source(args),
            args.matrix,
            upstream(args),
            repository(args),
            args.output,
            args.dry_run,
            args.concurrency,
        )
    )


def run(settings: Settings) -> int:
    from reconciler.commands import fill

    return fill.run(
        settings.source,
        settings.matrix,
        settings.upstream,
        settings.registry,
        settings.output,
        dry_run=settings.dry_run,
        concurrency=settings.concurrency,
    )
