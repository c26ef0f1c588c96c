"""`gpudrv audit`: every GPU node's image is in the matrix, or with --registry in the registry
(commands/audit.py, commands/registry.py); with --cluster/--all-clusters, gpudrv.yaml's clusters."""

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
    registry_options,
    repository,
    selector_option,
)
from reconciler.commands import Output
from reconciler.core.images.registry import Repository
from reconciler.errors import GpudrvError
from reconciler.usage import Usage
from reconciler.verbs import add_parser, source, targets

if TYPE_CHECKING:
    from reconciler.commands.clusters import Target
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "check every GPU node's image is in the matrix",
    "Every node labelled nvidia.com/gpu.present=true, live or under --from DIR: `NODE MISSING TAG` for "
    "each image the matrix (or, with --registry, the registry) lacks; `NODE NEXT-MISSING TAG (kernel K, "
    "at its next reboot)` for the image of the kernel a node boots next (the label "
    "gpudrv.dev/kernel-version.next). Exit 0 all there, 1 missing, 2 "
    "an error or no GPU node at all (--allow-empty for a fleet that really has none). The OK line "
    "says what was checked; in lab mode (no GPU Operator driver resource) it is the lab's one word.",
    (
        ("gpudrv audit --from clusters/lab", "OK"),
        ("gpudrv audit -l pool=a100 -o json", "live, one pool, as JSON"),
        ("gpudrv audit --registry registry.example.com/nvidia/driver", "the registry instead"),
        ("gpudrv audit --all-clusters", "gpudrv.yaml's clusters, side by side: CLUSTER/NODE"),
    ),
)
FROM_READS_MANIFESTS = True


@dataclass(frozen=True)
class Settings:
    matrix: Path
    output: Output
    source: NodeSource | None = None  # one cluster or manifests; else `clusters`
    clusters: list[Target] | None = None  # --cluster/--all-clusters
    registry: Repository | None = None  # --registry: the registry instead of the matrix
    concurrency: int = 1


def register(commands: SubParsers) -> None:
    parents = [node_options(), clusters.parent(), selector_option(), allow_empty_option(), matrix_option()]
    parser = add_parser(commands, "audit", __name__, parents=[*parents, output_option(Output.GITHUB)])
    registry_options(parser, audit=True)


def main(args: argparse.Namespace) -> int:
    picked = targets(args)
    if picked is not None and args.registry is not None:
        raise GpudrvError(
            "gpudrv audit --registry reads one cluster at a time; drop --cluster/--all-clusters"
        )
    return run(
        Settings(
            args.matrix,
            args.output,
            source=source(args) if picked is None else None,
            clusters=picked,
            registry=repository(args) if args.registry is not None else None,
            concurrency=args.concurrency,
        )
    )


def run(settings: Settings) -> int:
    if settings.clusters is not None:
        from reconciler.commands import audit

        return audit.run_many(settings.clusters, settings.matrix, settings.output)
    assert settings.source is not None
    if settings.registry is not None:
        from reconciler.commands import registry

        return registry.audit(settings.source, settings.registry, settings.output, settings.concurrency)
    from reconciler.commands import audit

    return audit.run(settings.source, settings.matrix, settings.output)
