"""`gpudrv matrix impact --base REF`: what the matrix change since REF means for the fleet's nodes
(commands/impact.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import arguments
from reconciler.adapters.sources import NodeSource
from reconciler.arguments import GITHUB_HELP, given, values
from reconciler.arguments.groups import allow_empty_option, matrix_option, node_options, selector_option
from reconciler.commands import Output
from reconciler.usage import Usage
from reconciler.verbs import add_parser, source

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "rows added/removed since REF, and each GPU node's audit status before and after",
    "The nodes: under --from DIR, else gpudrv.yaml's fleet, else live (also live with --kubeconfig or "
    "--context). Exit 1 when a node that had its image at REF would lose it, 2 an error or no GPU "
    "node (--allow-empty).",
    (
        ("gpudrv matrix impact --base main --from clusters/lab", "the working tree against main"),
        ("gpudrv matrix impact --base origin/main -o markdown", "for a pull request's summary"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    base: str
    matrix: Path
    source: NodeSource
    output: Output
    config_path: Path | None  # gpudrv.yaml, whose helm: values the whole-contract comparison reads


def register(verbs: SubParsers) -> None:
    parents = [node_options(), selector_option(), allow_empty_option(), matrix_option()]
    parser = add_parser(verbs, "impact", __name__, parents=parents)
    parser.add_argument(
        "--base",
        required=True,
        type=given("--base", "git ref"),
        metavar="REF",
        help="git ref to compare with",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=values(Output.TEXT, Output.JSON, Output.YAML, Output.MARKDOWN, Output.GITHUB),
        help=f"text, json, yaml, markdown (for a PR summary) or {GITHUB_HELP}",
    )


def main(args: argparse.Namespace) -> int:
    arguments.fleet_nodes(args)
    return run(Settings(args.base, args.matrix, source(args), args.output, args.config_path))


def run(settings: Settings) -> int:
    from reconciler.commands import impact

    return impact.run(settings.base, settings.matrix, settings.source, settings.output, settings.config_path)
