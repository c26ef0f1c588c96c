"""`gpudrv matrix history`: when each matrix row was added, and by which commit (commands/history.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments.groups import matrix_option, output_option
from reconciler.commands import Output
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "every row ever in the matrix: added and removed by which commit, author, date, PR",
    "One pass over the first-parent git history of the matrix file (needs a full clone). A merged "
    "pull request's rows belong to the commit that landed them.",
    (("gpudrv matrix history", "a table"), ("gpudrv matrix history -o json", "as JSON")),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    matrix: Path
    output: Output


def register(verbs: SubParsers) -> None:
    add_parser(verbs, "history", __name__, parents=[matrix_option(), output_option()])


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.matrix, args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import history

    return history.run(settings.matrix, settings.output)
