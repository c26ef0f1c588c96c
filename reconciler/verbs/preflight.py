"""`gpudrv preflight --kernel K`: before a kernel upgrade, each GPU node's image for that kernel
(commands/preflight.py); with --cluster/--all-clusters, once per cluster."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.sources import NodeSource
from reconciler.arguments import clusters, kernel
from reconciler.arguments.groups import (
    allow_empty_option,
    matrix_option,
    node_options,
    output_option,
    registry_options,
    repository,
    selector_option,
)
from reconciler.commands import Output
from reconciler.core.images.registry import Repository
from reconciler.usage import Usage
from reconciler.verbs import add_parser, per_cluster, source

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "before a kernel bump: the image each GPU node would need on kernel K, by pool",
    "Every node labelled nvidia.com/gpu.present=true (live or under --from DIR, -l to narrow), moved to "
    "kernel K with its own OS and driver, under the driver contract in force (lab, ClusterPolicy or "
    "NVIDIADriver, and the operator release's os-tag rule). Each pool (OS, driver) whose image is not "
    "in the matrix (or, with --registry, the registry): a heading with the image, then `NODE MISSING "
    "IMAGE` per node. Exit 0 every node ready (`OK: N GPU nodes ready for kernel K`), 1 a node without "
    "its image or without a tag, 2 an error, a kernel that cannot be part of a tag, or no GPU node "
    "(--allow-empty).",
    (
        ("gpudrv preflight --from clusters/lab --kernel 5.15.0-119-generic", "the pools that lack it"),
        ("gpudrv preflight -l pool=a100 --kernel 6.8.0-60-generic", "live, one pool"),
        ("gpudrv preflight --kernel 6.8.0-60-generic --registry", "gpudrv.yaml's registry instead"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    source: NodeSource
    kernel: str
    matrix: Path
    output: Output
    registry: Repository | None  # --registry: the registry instead of the matrix
    concurrency: int


def register(commands: SubParsers) -> None:
    parents = [node_options(), clusters.parent(), selector_option(), allow_empty_option(), matrix_option()]
    parser = add_parser(commands, "preflight", __name__, parents=[*parents, output_option(Output.GITHUB)])
    parser.add_argument(
        "--kernel",
        required=True,
        type=kernel,
        metavar="KERNEL",
        help="the kernel to check, as NFD's kernel-version.full spells it (6.8.0-60-generic)",
    )
    registry_options(parser, audit=True)


def main(args: argparse.Namespace) -> int:
    if (code := per_cluster(args, main)) is not None:
        return code
    registry = repository(args) if args.registry is not None else None
    return run(Settings(source(args), args.kernel, args.matrix, args.output, registry, args.concurrency))


def run(settings: Settings) -> int:
    from reconciler.commands import preflight

    return preflight.run(
        settings.source,
        settings.kernel,
        settings.matrix,
        settings.output,
        repository=settings.registry,
        concurrency=settings.concurrency,
    )
