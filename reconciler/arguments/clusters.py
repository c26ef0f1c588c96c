"""`--cluster NAME` and `--all-clusters`: the clusters of gpudrv.yaml a command reads (commands/clusters.py).

A cluster takes its kubeconfig and context from its entry, so --kubeconfig and --context are refused
beside these flags. The command line still wins where both speak: --operator-version over the entry's
operatorVersion (which wins over the file's), --from over the entry's fleet, and -l is applied to every
cluster, beside the entry's own selector (both must match).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from reconciler.adapters import kube
from reconciler.adapters.files import config
from reconciler.core.base.label_selector import LabelSelector
from reconciler.errors import GpudrvError

if TYPE_CHECKING:  # commands/clusters.py is imported only when clusters are picked
    from reconciler.commands.clusters import Target


def parent(one: bool = False) -> argparse.ArgumentParser:
    """The flags, in a group of their own; `one`: a command that takes one cluster at a time (apply)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_options(parser, one)
    return parser


def add_options(parser: argparse.ArgumentParser, one: bool = False) -> None:
    group = parser.add_argument_group("clusters (gpudrv.yaml's clusters:)")
    if one:
        group.add_argument(
            "--cluster",
            dest="clusters",
            action="append",
            metavar="NAME",
            help="the cluster of gpudrv.yaml's clusters: to apply to (one: a rollout is one cluster's)",
        )
        return
    group.add_argument(
        "--cluster",
        dest="clusters",
        action="append",
        metavar="NAME",
        help="read this cluster of gpudrv.yaml's clusters: (repeat for more)",
    )
    group.add_argument(
        "--all-clusters",
        action="store_true",
        help="read every cluster of gpudrv.yaml's clusters:, side by side",
    )


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "clusters", None) or getattr(args, "all_clusters", False))


def targets(args: argparse.Namespace, entries: tuple[config.ClusterEntry, ...]) -> list[Target]:
    """The clusters the flags pick, each with the command line's flags applied; one error line for
    anything that does not fit."""
    verb = " ".join(str(part) for part in (args.command, getattr(args, "verb", None)) if part)
    flag = "--all-clusters" if getattr(args, "all_clusters", False) else "--cluster"
    if getattr(args, "kubeconfig", None) or getattr(args, "context", None):
        raise GpudrvError(
            f"gpudrv {verb}: {flag} takes each cluster's kubeconfig and context from gpudrv.yaml; "
            "drop --kubeconfig/--context"
        )
    if not entries:
        where = (
            f"{args.config_path} has no clusters:"
            if args.config_path
            else f"no gpudrv.yaml {config.searched()}"
        )
        raise GpudrvError(f"gpudrv {verb}: {flag} reads gpudrv.yaml's clusters:, but {where}")
    if getattr(args, "all_clusters", False) and getattr(args, "clusters", None):
        raise GpudrvError(f"gpudrv {verb}: give --cluster NAME or --all-clusters, not both")
    by_name = {entry.name: entry for entry in entries}
    picked = (
        list(entries)
        if getattr(args, "all_clusters", False)
        else [_entry(name, by_name) for name in dict.fromkeys(args.clusters)]
    )
    return [_target(args, entry) for entry in picked]


def one_target(args: argparse.Namespace, entries: tuple[config.ClusterEntry, ...]) -> Target:
    """apply's cluster: one, by design (a rollout is watched and stopped per cluster)."""
    names = list(dict.fromkeys(args.clusters))
    if len(names) > 1:
        raise GpudrvError(
            f"gpudrv {args.command}: one cluster at a time, by design ({', '.join(names)} given): run it "
            "once per cluster, each after the last one's rollout is done"
        )
    return targets(args, entries)[0]


def _entry(name: str, by_name: dict[str, config.ClusterEntry]) -> config.ClusterEntry:
    if name not in by_name:
        raise GpudrvError(
            f"--cluster {name}: gpudrv.yaml names no such cluster (it has: {', '.join(by_name)})"
        )
    return by_name[name]


def _target(args: argparse.Namespace, entry: config.ClusterEntry) -> Target:
    from reconciler.commands.clusters import Target

    from_flag = (
        getattr(args, "operator_version", None) if not getattr(args, "version_from_config", False) else None
    )
    version = from_flag or entry.operator_version or getattr(args, "operator_version", None)
    kubeconfig = str(entry.kubeconfig) if entry.kubeconfig is not None else None
    # The entry's own operatorVersion is blamed on its line; gpudrv.yaml's top-level one on the file.
    origin = (
        entry.origin if entry.operator_version else str(getattr(args, "config_path", None) or "gpudrv.yaml")
    )
    return Target(
        entry.name,
        kube.Options(kubeconfig, entry.context, getattr(args, "request_timeout", None)),
        getattr(args, "from_dir", None) or entry.fleet or getattr(args, "fleet", None),
        version,
        version_from_config=from_flag is None and version is not None,
        selector=_both(entry.selector, getattr(args, "selector", None)),
        allow_empty=getattr(args, "allow_empty", False),
        version_origin=origin,
    )


def _both(first: LabelSelector | None, second: LabelSelector | None) -> LabelSelector | None:
    if first is None or second is None:
        return first or second
    return LabelSelector((*first.requirements, *second.requirements))


def in_cluster(args: argparse.Namespace, target: Target, output: Any, desired: bool) -> argparse.Namespace:
    """The command line as if it named one cluster: its kubeconfig, context, operator version and
    selector, and where --from is the desired state (`desired`: diff, plan, apply), its fleet."""
    one = argparse.Namespace(**vars(args))
    one.clusters, one.all_clusters = None, False
    one.kubeconfig, one.context = target.options.kubeconfig, target.options.context
    one.operator_version, one.version_from_config = target.operator_version, target.version_from_config
    one.selector = target.selector
    if desired:
        one.from_dir = target.fleet
    if output is not None:
        one.output = output
    return one
