"""The upgrade executor: each node through its remaining GPU Operator states, the fleet in rounds.

The node's state label is the only memory: killed at any moment and run again, a node resumes at
the step its label names. A step's own change to the node (the cordon, the driver labels, the
uncordon) is written in the same patch as the next state's label, so it is on the node exactly when
the node has moved on: a run killed at any moment never writes a step twice. Evictions are their own
record (an evicted pod is gone).

Decisions are plain functions (which nodes next, whether a lease is free, what a failure leaves
behind); every read and write goes through `UpgradeFleet` (adapters/cluster/fleet.py's Fleet on a cluster, an
in-memory fleet in tests/unit/test_executor.py) and every clock and wait through `Host`.

Here are its settings, its ports, the node lease and what a step writes; one node's run is
core/lab/node_run.py, the fleet in rounds core/lab/fleet_upgrade.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from reconciler.core.base.flags import Kind, flag
from reconciler.core.upgrades import upgrade
from reconciler.core.upgrades.budget import Pod, Role
from reconciler.core.upgrades.upgrade import (
    FAILURE,
    INITIAL_UNSCHEDULABLE,
    LEGACY_INITIAL_UNSCHEDULABLE,
    OWNER,
    LiveNode,
    State,
)

LEASE_SECONDS = 60.0
CONFLICT_RETRIES = 10  # a compare-and-swap lost this many times in a row gives up
DRIVER_APP = "nvidia-driver-daemonset"  # the GPU Operator's label on a ClusterPolicy's driver pods
# ... and on the driver pods of every DaemonSet an NVIDIADriver makes (and, in its newer releases, a
# ClusterPolicy's too): manifests/state-driver/0500_daemonset.yaml, assets/state-driver/0500_daemonset.yaml
DRIVER_COMPONENT = ("app.kubernetes.io/component", "nvidia-driver")


def is_driver_pod(labels: Mapping[str, str]) -> bool:
    return labels.get("app") == DRIVER_APP or labels.get(DRIVER_COMPONENT[0]) == DRIVER_COMPONENT[1]


WAIT_SECONDS = 2.0  # between looks at a driver that is being installed


class Installer(StrEnum):
    LABELS = "labels"  # gpudrv sets the driver labels itself (the lab's stand-in for the operator)
    WAIT = "wait"  # the GPU Operator installs; gpudrv waits for its driver pod and GFD's labels


@dataclass(frozen=True)
class Options:
    """The lab upgrade's settings: flags of `gpudrv apply` (and of `reconcile --apply`, which passes them
    on), part of apply's settings type (commands/settings.py)."""

    max_parallel: int = flag(
        "--max-parallel",
        Kind.COUNT,
        1,
        metavar="N",
        help="nodes at a time (default 1)",
        relay="apply's (default 1)",
    )
    drain_timeout: float = flag(
        "--drain-timeout", Kind.SECONDS, 300.0, metavar="D", help="per drain step (default 5m)",
        relay="apply's (default 5m)",
    )  # fmt: skip
    installer: Installer = flag(
        "--installer", Kind.CHOICE, Installer.LABELS, choices=tuple(each.value for each in Installer),
        help="how the driver gets installed", relay="apply's",
    )  # fmt: skip
    install_timeout: float = flag(
        "--timeout", Kind.SECONDS, 600.0, metavar="D",
        help="installer=wait: how long (default 10m); with the GPU Operator: per batch",
        relay="apply's installer=wait timeout",
    )  # fmt: skip
    force: bool = flag("--force", Kind.SWITCH, False, help="also delete pods that have no controller")


class StepFailed(Exception):
    """A step could not finish; the node goes to upgrade-failed with this reason."""


class LeaseLost(Exception):
    """Another run holds the node now (this run's lease expired under it): stop touching it."""


class Busy(Exception):
    """Another gpudrv run holds the node."""


# --- the ports: what the executor needs of the world ------------------------------------------------


class Host(Protocol):
    """Clocks, waits, and whether a lease holder's process still runs."""

    def now(self) -> float:
        """Wall-clock seconds (leases are compared across hosts)."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def alive(self, holder: str) -> bool | None:
        """Whether the holder's process runs, when this host can tell (same host); None otherwise."""
        ...


class Reporter(Protocol):
    def say(self, text: str) -> None: ...

    def wait(self, text: str) -> None: ...


class UpgradeFleet(Protocol):
    """The reads and writes of one node's upgrade."""

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        """The node and its resourceVersion, or None if there is no such node."""
        ...

    def pods_on(self, node: str) -> list[Pod]: ...

    def patch_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        resource_version: str | None = None,
        expect: Callable[[LiveNode], None] | None = None,
    ) -> None:
        """A merge patch on the node as read fresh (`expect` sees it first and may raise); retried
        on a conflict with another writer."""
        ...

    def swap_node(self, name: str, resource_version: str, annotations: Mapping[str, str | None]) -> bool:
        """The annotations written only onto that version of the node; False when it changed."""
        ...

    def drain(
        self,
        node: str,
        roles: Collection[Role],
        *,
        timeout: float,
        force: bool,
        say: Callable[[str], None],
        wait: Callable[[str], None],
    ) -> None:
        """Evict the node's pods in `roles` (budgets respected); StepFailed naming what held them."""
        ...

    def restart_driver(self, node: str) -> list[str]:
        """Delete the node's driver pods that are out of date with their DaemonSet; the pods deleted."""
        ...

    def event(
        self, node: str, reason: str, message: str, warning: bool = False, name: str | None = None
    ) -> None: ...


# --- leases ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lease:
    holder: str  # host/pid/random
    expires: float  # wall-clock seconds


_LEASE = re.compile(r'\s*\{\s*"holder"\s*:\s*"([^"\\]*)"\s*,\s*"expires"\s*:\s*([-+0-9.eE]+)\s*\}\s*')


def lease_text(lease: Lease) -> str:
    """The annotation's JSON, {"holder": ..., "expires": ...}; holders are host/pid/hex, no quotes."""
    holder = lease.holder.replace("\\", "").replace('"', "")
    return f'{{"holder": "{holder}", "expires": {lease.expires!r}}}'


def parse_lease(text: str | None) -> Lease | None:
    found = _LEASE.fullmatch(text or "")
    if found is None:
        return None
    try:
        return Lease(found.group(1), float(found.group(2)))
    except ValueError:
        return None


def lease_free(lease: Lease | None, me: str, now: float, alive: bool | None) -> bool:
    """May `me` take a node with this lease? Unheld, its own, or the holder is gone: its process is
    known dead (same host), or it is on another host and its lease expired."""
    if lease is None or lease.holder == me:
        return True
    if alive is not None:
        return not alive
    return lease.expires <= now


# --- what a step writes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Writes:
    """What a step changes on the node, written with the next state's label; `said` once written."""

    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None
    said: str | None = None


# Written with upgrade-done: an upgrade that ends leaves none of its annotations behind.
DONE_ANNOTATIONS: dict[str, str | None] = {
    INITIAL_UNSCHEDULABLE: None,
    LEGACY_INITIAL_UNSCHEDULABLE: None,
    FAILURE: None,
    OWNER: None,
}


def initial_annotations(cordoned_before: bool) -> dict[str, str | None]:
    """Written with upgrade-required: the operator's annotation only when the node was cordoned
    before (its presence is what counts), gpudrv's older one gone."""
    return {INITIAL_UNSCHEDULABLE: "true" if cordoned_before else None, LEGACY_INITIAL_UNSCHEDULABLE: None}


@dataclass(frozen=True)
class Failure:
    """What a failed step leaves on the node: upgrade-failed and the reason; the cordon as it is."""

    annotations: dict[str, str | None]
    said: str


def failure(state: State, reason: str, cordoned_before: bool) -> Failure:
    """The operator's rule: a failed node is not uncordoned; it stays cordoned until its driver is in
    sync, then goes to uncordon-required (upgrade-done if it was cordoned before). A failure before
    the cordon step leaves the node as schedulable as it was."""
    cordoned = state not in upgrade.BEFORE_CORDON or cordoned_before
    held = "; left cordoned until its driver is in sync" if cordoned else "; not cordoned"
    return Failure({FAILURE: f"{state}: {reason}"}, f"upgrade-failed at {state}: {reason}{held}")
