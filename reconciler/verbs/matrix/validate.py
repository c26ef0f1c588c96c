"""`gpudrv matrix validate [PATH]`: the support matrix is well-formed (commands/matrix.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments import file_path
from reconciler.arguments.groups import matrix_option, output_option
from reconciler.commands import Output
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "check the matrix file",
    "Every problem as FILE:LINE: message. Exit 0 valid, 2 invalid.",
    (
        ("gpudrv matrix validate", "matrix/support-matrix.csv (or gpudrv.yaml's matrix)"),
        ("gpudrv matrix validate matrix/gpu-operator.csv", "another file"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    matrix: Path
    output: Output


def register(verbs: SubParsers) -> None:
    parser = add_parser(verbs, "validate", __name__, parents=[matrix_option(), output_option(Output.GITHUB)])
    parser.add_argument(
        "path", nargs="?", type=file_path("PATH"), metavar="PATH", help="matrix file (default: --matrix)"
    )


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.path or args.matrix, args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import matrix

    return matrix.validate(settings.matrix, settings.output)
