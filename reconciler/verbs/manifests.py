"""`gpudrv manifests validate`: the Node manifests under --from are well-formed
(commands/manifest_check.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import usage
from reconciler.arguments import DEFAULT_MANIFESTS, path
from reconciler.arguments.groups import output_option
from reconciler.commands import Output
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "check the Node manifests of the desired fleet",
    "",
    (("gpudrv manifests validate --from clusters/lab", "every Node manifest against its schema"),),
)
VALIDATE = Usage(
    "check every Node manifest against schemas/node-manifest.schema.json",
    "Every problem as FILE:LINE: message, at the label at fault. Exit 0 valid, 2 invalid.",
    (
        ("gpudrv manifests validate --from clusters/lab", "the lab's nodes"),
        ("gpudrv manifests validate", "gpudrv.yaml's fleet, else clusters/"),
    ),
)
FROM_READS_MANIFESTS = False


@dataclass(frozen=True)
class Settings:
    folder: Path
    output: Output


def register(commands: SubParsers) -> None:
    group = commands.add_parser("manifests", **usage.of(USAGE))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")
    parser = add_parser(verbs, "validate", __name__, VALIDATE, parents=[output_option(Output.GITHUB)])
    parser.add_argument(
        "--from",
        dest="folder",
        type=path("--from"),
        metavar="DIR",
        help=f"*.yaml/*.yml files under DIR (default: gpudrv.yaml's fleet, else {DEFAULT_MANIFESTS})",
    )


def main(args: argparse.Namespace) -> int:
    return run(Settings(args.folder, args.output))


def run(settings: Settings) -> int:
    from reconciler.commands import manifest_check

    return manifest_check.validate(settings.folder, settings.output)
