"""The door: one module per verb. Each verb's module registers its parser (its flags and its help),
turns the parsed flags into its own typed `Settings` and runs the command from them; the argparse
namespace goes no further than the verb's module. The work itself is in reconciler/commands, imported
when the verb runs, so `gpudrv audit` does not pay for the imports of apply or history.

A verb module has:
  USAGE                  what `gpudrv VERB --help` says (usage.py's Usage)
  FROM_READS_MANIFESTS   True where --from reads Node manifests instead of the cluster (tag, audit, ...);
                         False where --from is the desired state in git or there is no --from
  register(commands)     its parser, on the `gpudrv` subparsers (or its group's)
  main(args)             the parsed flags to Settings, then run(settings)
cli.py lists the verbs; this module has what several verbs' modules share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reconciler import arguments, usage
from reconciler.adapters import kube, sources
from reconciler.arguments import clusters
from reconciler.commands import Output
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    from reconciler.commands.clusters import Target


def add_parser(
    commands: SubParsers, name: str, module: str, says: usage.Usage | None = None, **options: Any
) -> argparse.ArgumentParser:
    """The parser of the verb whose module is named `module` (its __name__), with its help (`says`,
    else the module's USAGE); args.handler is that module, which runs it."""
    verb = sys.modules[module]
    parser = commands.add_parser(name, **usage.of(says or verb.USAGE), **options)
    parser.set_defaults(handler=verb)
    return parser


# --- what several verbs read from their parsed flags ----------------------------------------------


def options(args: argparse.Namespace) -> kube.Options:
    """How the verb reaches its cluster (kube.Options, the one connection type)."""
    return kube.Options(args.kubeconfig, args.context, args.request_timeout)


def source(args: argparse.Namespace, live: bool = False) -> sources.NodeSource:
    return arguments.node_source(args, options(args), live)


def name(args: argparse.Namespace) -> str:
    """`audit`, `matrix fill`: the verb as typed."""
    return " ".join(str(part) for part in (args.command, getattr(args, "verb", None)) if part)


def targets(args: argparse.Namespace) -> list[Target] | None:
    """The clusters of gpudrv.yaml that --cluster/--all-clusters pick; None without those flags. They
    read live clusters: --from (manifests instead of a cluster) is refused beside them."""
    if not clusters.wanted(args):
        return None
    if args.handler.FROM_READS_MANIFESTS and getattr(args, "from_dir", None):
        raise GpudrvError(
            f"gpudrv {args.command}: --from reads manifests, not clusters; drop --cluster/--all-clusters"
        )
    return clusters.targets(args, args.config_clusters)


def per_cluster(args: argparse.Namespace, main: Callable[[argparse.Namespace], int]) -> int | None:
    """With --cluster/--all-clusters: the verb once per cluster, each its own section; else None."""
    if (picked := targets(args)) is None:
        return None
    from reconciler.commands.clusters import sections

    desired = not args.handler.FROM_READS_MANIFESTS
    return sections(
        picked,
        name(args),
        lambda target, form: main(clusters.in_cluster(args, target, form, desired)),
        args.output,
    )


def as_data(output: Output, kind: str, run: Callable[[Any], int], **fields: Any) -> int:
    """-o json/yaml for apply and drain: progress to stderr, one object on stdout at the end."""
    from reconciler.commands import upgrades

    if output is Output.GITHUB:
        return upgrades.with_summary(kind, run)
    if not output.structured:
        return run(None)
    return upgrades.as_data(output, kind, run, **fields)
