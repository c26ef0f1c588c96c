"""Many clusters side by side: each node named `CLUSTER/NODE` (a Kubernetes node name never holds a
slash, so the parts split back apart), and several clusters' findings put together as one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reconciler.core.contract.driver_images import FleetNote, Want, Wants
from reconciler.core.cuda.cuda_workloads import Judged
from reconciler.core.images.tags import Node
from reconciler.core.upgrades.upgrade import LiveNode

SEPARATOR = "/"


def qualified(cluster: str, name: str) -> str:
    return f"{cluster}{SEPARATOR}{name}"


def split(name: str) -> tuple[str | None, str]:
    """`CLUSTER/NODE` into its parts; a name without a cluster has None."""
    cluster, found, node = name.partition(SEPARATOR)
    return (cluster, node) if found else (None, name)


def clusters_of(names: Sequence[str]) -> list[tuple[str, int]]:
    """The clusters among `names` (CLUSTER/NODE) and how many of the names each has, in name order."""
    counts: dict[str, int] = {}
    for name in names:
        cluster, _ = split(name)
        if cluster is not None:
            counts[cluster] = counts.get(cluster, 0) + 1
    return sorted(counts.items())


def node(found: Node, cluster: str) -> Node:
    return replace(found, name=qualified(cluster, found.name))


def want(found: Want, cluster: str) -> Want:
    return replace(found, node=node(found.node, cluster))


def wants(found: Wants, cluster: str) -> Wants:
    """One cluster's images, its nodes named CLUSTER/NODE and its notes saying the cluster."""
    return replace(
        found,
        wants=tuple(want(item, cluster) for item in found.wants),
        next_wants=tuple(want(item, cluster) for item in found.next_wants),
        notes=tuple(fleet_note(item, cluster) for item in found.notes),
    )


def fleet_note(found: FleetNote, cluster: str) -> FleetNote:
    """A fleet note of one cluster: it says the cluster, and names its nodes with it."""
    return replace(
        found,
        message=f"cluster {cluster}: {found.message}",
        nodes=tuple(qualified(cluster, name) for name in found.nodes),
    )


def combined(found: Sequence[Wants]) -> Wants:
    """Several clusters' (already qualified) images as one, in cluster order; at least one. The first
    cluster's contract stands for the whole: each cluster's own is said apart (the page's facts)."""
    return Wants(
        found[0].contract,
        tuple(item for one in found for item in one.wants),
        tuple(note for one in found for note in one.notes),
        tuple(item for one in found for item in one.next_wants),
    )


def live_node(found: LiveNode, cluster: str) -> LiveNode:
    return replace(found, node=node(found.node, cluster))


def judged(row: Judged, cluster: str) -> Judged:
    """A CUDA workloads row of one cluster: its nodes and pods (NAMESPACE/NAME) named with it."""
    return replace(
        row,
        nodes=tuple(qualified(cluster, name) for name in row.nodes),
        pods=tuple(qualified(cluster, ref) for ref in row.pods),
    )
