"""`gpudrv matrix add`: one row, by its parts or by its image tag (commands/matrix.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments.groups import matrix_option, output_option
from reconciler.commands import Output
from reconciler.core.images.tags import ImageKey
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "append a row for an image that was built",
    "Checked before writing, under a lock; the rest of the file is left as it is. Exit 0 added (or "
    "already there), 2 refused.",
    (
        ("gpudrv matrix add 550 6.8.0-52-generic ubuntu24.04", "by its parts"),
        ("gpudrv matrix add --tag 550-6.8.0-52-generic-ubuntu24.04", "by its image tag"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    matrix: Path
    row: ImageKey
    output: Output


def register(verbs: SubParsers) -> None:
    parser = add_parser(
        verbs,
        "add",
        __name__,
        parents=[matrix_option(), output_option()],
        usage="gpudrv matrix add [--matrix PATH] [-o FORMAT] (BRANCH KERNEL OS_TAG | --tag TAG)",
    )
    parser.add_argument("parts", nargs="*", metavar="BRANCH KERNEL OS_TAG")
    parser.add_argument("--tag", help="the whole image tag, e.g. 550-5.15.0-119-generic-ubuntu22.04")
    parser.set_defaults(parser=parser)  # its usage error, for a row given neither way


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.matrix, _row(args), args.output))


def _row(args: argparse.Namespace) -> ImageKey:  # noqa: RET503
    if args.tag is not None and not args.parts:
        from reconciler.commands import matrix

        return matrix.key_of(args.tag)
    if args.tag is None and len(args.parts) == 3:
        return ImageKey(*args.parts)
    parser: argparse.ArgumentParser = args.parser
    parser.error("give BRANCH KERNEL OS_TAG, or --tag TAG")  # exits with code 2


def run(settings: Settings) -> int:
    from reconciler.commands import matrix

    return matrix.add(settings.matrix, settings.row, settings.output)
