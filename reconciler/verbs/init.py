"""`gpudrv init [DIR]`: a fleet repository to start from, or with --from-cluster the live cluster's
(commands/init.py, whose Settings it runs from)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments import given, path
from reconciler.arguments.groups import cluster_options
from reconciler.usage import Usage
from reconciler.verbs import add_parser, options

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "start a fleet repository: gpudrv.yaml, the matrix, a cluster, workflows, pre-commit",
    "Writes gpudrv.yaml, matrix/support-matrix.csv, clusters/NAME/ (driver resources, Node manifests), "
    "four workflows .github/workflows/{pr,audit,apply,build}.yml and .pre-commit-config.yaml (a local "
    "hook: the gpudrv on PATH). The workflows are pinned to this gpudrv's commit, or --action. Never "
    "overwrites: a file already there is exit 2, and nothing is written.",
    (
        ("gpudrv init fleet", "an example fleet in ./fleet"),
        ("gpudrv init --from-cluster --context prod", "the live cluster's GPU nodes and images"),
    ),
)
FROM_READS_MANIFESTS = False


def register(commands: SubParsers) -> None:
    parser = add_parser(commands, "init", __name__)
    parser.add_argument(
        "folder", nargs="?", type=path("DIR"), default=Path(), metavar="DIR", help="default: ."
    )
    parser.add_argument(
        "--name", default="prod", type=given("--name", "name"), help="the cluster's folder (default prod)"
    )
    parser.add_argument(
        "--action",
        type=given("--action", "OWNER/NAME@COMMIT"),
        metavar="OWNER/NAME@COMMIT",
        help="the gpudrv the workflows and hooks use (default: the repository and commit this gpudrv "
        "was built from)",
    )
    parser.add_argument(
        "--from-cluster",
        action="store_true",
        help="the GPU nodes, driver resources and images of the live cluster, instead of an example",
    )
    group = parser.add_argument_group("cluster (with --from-cluster)")
    cluster_options(group)
    group.add_argument(
        "--operator-version",
        type=given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release, like v26.3.3 (default: the running operator's)",
    )


def main(args: argparse.Namespace) -> int:
    from reconciler.commands import init

    return init.run(
        init.Settings(
            args.folder, args.name, args.action, args.from_cluster, options(args), args.operator_version
        )
    )
