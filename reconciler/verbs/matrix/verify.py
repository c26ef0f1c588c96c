"""`gpudrv matrix verify`: every matrix row's image is in the registry (commands/registry.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments.groups import matrix_option, output_option, registry_options, repository
from reconciler.commands import Output
from reconciler.core.images.registry import Repository
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "check every row's image is in the OCI registry",
    "HEAD of each row's manifest in the registry (credentials from $REGISTRY_AUTH_FILE or the docker "
    "config, else anonymous). Exit 0 all there, 1 a row without its image, 2 an error.",
    (
        ("gpudrv matrix verify --registry registry.example.com/nvidia/driver", "every row's image"),
        ("gpudrv matrix verify --list-tags", "also the tags the matrix lacks (gpudrv.yaml's registry)"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    matrix: Path
    registry: Repository
    list_tags: bool
    write: bool
    output: Output
    concurrency: int


def register(verbs: SubParsers) -> None:
    parser = add_parser(verbs, "verify", __name__, parents=[matrix_option(), output_option(Output.GITHUB)])
    registry_options(parser)
    parser.add_argument(
        "--list-tags", action="store_true", help="also list the registry's tags: note those the matrix lacks"
    )
    parser.add_argument(
        "--write", action="store_true", help="append those tags as rows (implies --list-tags)"
    )


def main(args: argparse.Namespace) -> int:
    return run(
        Settings(args.matrix, repository(args), args.list_tags, args.write, args.output, args.concurrency)
    )


def run(settings: Settings) -> int:
    from reconciler.commands import registry

    return registry.verify(
        settings.matrix,
        settings.registry,
        list_tags=settings.list_tags,
        write=settings.write,
        output=settings.output,
        concurrency=settings.concurrency,
    )
