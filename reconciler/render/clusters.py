"""Many clusters in one output: each node's `CLUSTER/NODE` name split back into `cluster` and `node`
for data, and the clusters read (or not) listed beside the results, each with the desired state its
result was computed under."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.audit.cluster_names import split
from reconciler.core.contract.desired import Desired


@dataclass(frozen=True)
class Read:
    """One cluster as the output lists it: its own verdict, node count and desired state (the one its
    result was computed under, as its single-cluster -o json carries it), or why it could not be read."""

    name: str
    ok: bool | None = None
    node_count: int | None = None
    error: str | None = None
    desired: Desired | None = None


def with_clusters(
    document: dict[str, Any], read: Sequence[Read], lists: Iterable[str] = ("nodes",)
) -> dict[str, Any]:
    """The document with `cluster` beside `node` in each item of `lists`, and `clusters`: each cluster's
    `desired` is null exactly where it could not be read (its `error` says why)."""
    for key in lists:
        for item in document.get(key) or ():
            cluster, node = split(str(item.get("node", "")))
            if cluster is not None:
                item["node"], item["cluster"] = node, cluster
    document["ok"] = bool(document.get("ok")) and all(one.error is None for one in read)  # exit 0 only then
    document["clusters"] = [
        {
            "name": one.name,
            "ok": one.ok,
            "node_count": one.node_count,
            "error": one.error,
            "desired": one.desired.as_json() if one.desired is not None else None,
        }
        for one in read
    ]
    return document


def counted(read: Sequence[Read]) -> str:
    """`in 2 clusters` / `in 2 of 3 clusters`, for a closing line."""
    done = sum(one.error is None for one in read)
    total = len(read)
    noun = "cluster" if total == 1 else "clusters"
    return f"in {done} {noun}" if done == total else f"in {done} of {total} {noun}"
