"""Many clusters, one support matrix: the clusters gpudrv.yaml names (`clusters:`), read side by side.

`--cluster NAME` (repeatable) and `--all-clusters` pick them. Each cluster is read on a thread of its
own (at most CONCURRENCY at once), through its own connection with its own timeouts; a cluster that
cannot be read is one line on stderr and exit 2 at the end, while the others' results are printed in
full. Node names carry their cluster, `CLUSTER/NODE` (core/cluster_names.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from reconciler.adapters import kube
from reconciler.adapters.sources import NodeSource
from reconciler.core.label_selector import LabelSelector
from reconciler.errors import GpudrvError

CONCURRENCY = 4  # clusters read at once: each is mostly waiting on its API server

T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """One cluster as a command reads it: gpudrv.yaml's entry with the command line's flags applied."""

    name: str
    options: kube.Options
    fleet: Path | None = None  # its desired state (diff, plan): its own fleet, else gpudrv.yaml's or --from
    operator_version: str | None = None
    version_from_config: bool = False
    selector: LabelSelector | None = None
    allow_empty: bool = False

    def source(self) -> NodeSource:
        """The cluster's live nodes and driver resources."""
        return NodeSource(
            None,
            self.options,
            self.operator_version,
            self.selector,
            self.allow_empty,
            version_from_config=self.version_from_config,
        )


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """One cluster's result, or the one line that says why there is none."""

    target: Target
    result: T | None = None
    error: str | None = None


def fan_out(targets: Sequence[Target], work: Callable[[Target], T]) -> list[Outcome[T]]:
    """`work` on every cluster at once (CONCURRENCY at most), in the targets' order. A GpudrvError (an
    unreachable cluster, refused credentials, a bad answer, no GPU node) becomes that cluster's error;
    anything else is a bug and propagates."""

    def one(target: Target) -> Outcome[T]:
        try:
            return Outcome(target, work(target))
        except GpudrvError as exc:
            return Outcome(target, error=str(exc))

    if len(targets) == 1:
        return [one(targets[0])]
    from concurrent.futures import ThreadPoolExecutor  # only when there are several

    with ThreadPoolExecutor(max_workers=min(CONCURRENCY, len(targets)), thread_name_prefix="cluster") as pool:
        return list(pool.map(one, targets))


def report_errors(outcomes: Sequence[Outcome[T]]) -> bool:
    """Each failed cluster's line on stderr (after the others' results); True when there was one."""
    failed = [outcome for outcome in outcomes if outcome.error is not None]
    for outcome in failed:
        flat = (outcome.error or "").replace("\r", "\\r").replace("\n", "\\n")
        print(f"gpudrv: cluster {outcome.target.name}: {flat}", file=sys.stderr)
    return bool(failed)
