"""`gpudrv reconcile`'s loop, its side of the wiring: the messages it receives and the ports it uses.

The threads (git-sync, node-watch, leader-election, the HTTP server's signal handler) only post
messages; the loop (core/incluster/reconcile_loop.py) reads them in one thread and does everything else
through these ports. adapters/incluster/reconcile_ports.py implements them on git, the cluster,
Prometheus and logging (commands/reconcile/service.py wires them); tests/unit/test_reconcile_loop.py
on plain Python with a fake clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Protocol

from reconciler.core.audit.audit import Finding
from reconciler.core.contract.operator import Contract
from reconciler.core.images.tags import Node
from reconciler.core.incluster.fleetwatch import Change

CONFIG_NAME = "gpudrv.yaml"

# The Node events' reasons.
MISSING = "DriverImageMissing"
AVAILABLE = "DriverImageAvailable"
INVALID = "DriverTagInvalid"


class Unreadable(Exception):
    """A read the loop depends on failed (a commit, the contract, the apply worktree): its text says why."""


# --- what is in force ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A commit put in force: its valid matrix, and what its gpudrv.yaml says."""

    commit: str
    matrix: str  # in the repository
    tags: frozenset[str]
    fleet: str | None
    operator_version: str | None
    committed: int


@dataclass(frozen=True)
class LoopSettings:
    branch: str  # the fleet repository's, for the log
    resync: float = 300.0  # a full audit at least this often (and apply again at the same commit)
    event_refresh: float = 1800.0  # a lasting problem's event is counted again this often


# --- the inbox ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitFetched:
    """git-sync: the newest commit of the branch."""

    commit: str


@dataclass(frozen=True)
class NodesListed:
    """node-watch: the whole set of GPU nodes, from a (re-)list."""

    nodes: Sequence[Node]
    version: str


@dataclass(frozen=True)
class NodeChanged:
    node: Node


@dataclass(frozen=True)
class NodeDeleted:
    name: str


NodeNews = NodesListed | NodeChanged | NodeDeleted


@dataclass(frozen=True)
class Watched:
    generation: int  # news of an older watch (before a step-down) is dropped
    news: NodeNews


@dataclass(frozen=True)
class LeaseNews:
    """leader-election: wakes the loop, which asks the lease itself (every turn, news or not)."""

    leading: bool


@dataclass(frozen=True)
class StopRequested:
    """SIGTERM or SIGINT: stop after this step."""


Message = CommitFetched | Watched | LeaseNews | StopRequested


# --- what the loop writes ----------------------------------------------------------------------------


class Level(IntEnum):
    """A log line's level (the numbers are the logging module's)."""

    INFO = 20
    WARNING = 30
    ERROR = 40


class Tally(StrEnum):
    """The counters the loop increments."""

    AUDIT_ERRORS = "audit_errors"  # a full audit could not read the contract
    REJECTED = "rejected"  # a fetched commit not put in force
    APPLY_RUNS = "apply_runs"  # a `gpudrv apply` run ended; its label is the result


@dataclass(frozen=True)
class Event:
    """A Node event: what the node's problem (or its end) is; render/reconcile.py words it."""

    node: str
    reason: str  # MISSING, INVALID or AVAILABLE
    key: str  # what makes it the same problem again: the tag, or the reason text
    where: str  # the matrix and the commit in force
    finding: Finding | None = None  # for MISSING and INVALID
    warning: bool = True
    recount: bool = True  # False: a problem already reported; counted only if the event is stale


@dataclass(frozen=True)
class Figures:
    """The audit's state as exported: what the gauges show (all zero and empty on a standby)."""

    leader: bool = False
    gpu_nodes: int = 0
    missing: Mapping[str, str] = field(default_factory=dict)  # node -> the tag it lacks
    invalid: frozenset[str] = frozenset()  # nodes whose labels give no tag
    fleet_problems: int = 0
    # Nodes per upgrade state. Empty clears the series; otherwise the states named are set (a state
    # seen once keeps its series, as Prometheus clients usually do).
    upgrade_states: Mapping[str, int] = field(default_factory=dict)
    # Node -> (the kernel it boots next, the tag it lacks there): the NEXT-MISSING findings.
    next_missing: Mapping[str, tuple[str, str]] = field(default_factory=dict)


# --- the ports ---------------------------------------------------------------------------------------


class Clock(Protocol):
    def monotonic(self) -> float: ...


class Inbox(Protocol):
    def take(self, wait: float) -> list[Message]:
        """The messages posted: waits up to `wait` seconds for the first, then takes all there are."""
        ...


class Repository(Protocol):
    """The fleet repository's checkout."""

    def load(self, commit: str) -> Snapshot:
        """Check the commit out and read its matrix and gpudrv.yaml; Unreadable when invalid."""
        ...

    def restore(self, commit: str) -> None:
        """Check the commit in force out again after a refused one (best effort)."""
        ...


class Cluster(Protocol):
    """What the loop reads from the cluster: the driver contract, and the GPU nodes (as Watched news)."""

    def contract(self, operator_version: str | None) -> Contract:
        """The GPU Operator's driver contract now; Unreadable when it cannot be read."""
        ...

    def watch(self, generation: int) -> None:
        """Start listing and watching the GPU nodes; their news arrives as Watched(generation, ...)."""
        ...

    def unwatch(self) -> None: ...


class Lease(Protocol):
    def is_leading(self) -> bool:
        """Whether this replica holds the lease now (True without leader election)."""
        ...


class Run(Protocol):
    """A running `gpudrv apply`."""

    commit: str

    def poll(self) -> int | None:
        """Its exit status once it has ended."""
        ...

    def interrupt(self, grace: float) -> int:
        """Stop it (given `grace` seconds to finish its step); its exit status."""
        ...


class Applier(Protocol):
    def start(self, snapshot: Snapshot) -> Run:
        """`gpudrv apply` at the snapshot's commit, in a worktree of it; Unreadable if none can be made."""
        ...


class Output(Protocol):
    """The log, the metrics and the Node events."""

    def log(self, level: Level, text: str) -> None: ...

    def change(self, change: Change) -> None:
        """One node's change, as a log line."""
        ...

    def event(self, event: Event) -> None: ...

    def count(self, tally: Tally, label: str | None = None) -> None: ...

    def observe(self, scope: str, seconds: float) -> None:
        """How long an audit took: scope 'nodes' (after node changes) or 'fleet' (all of them)."""
        ...

    def export(self, figures: Figures) -> None: ...

    def in_force(self, snapshot: Snapshot) -> None:
        """The commit now in force (its info and committer time)."""
        ...

    def audited(self) -> None:
        """An audit has just finished."""
        ...


@dataclass(frozen=True)
class Ports:
    clock: Clock
    inbox: Inbox
    repository: Repository
    cluster: Cluster
    lease: Lease
    output: Output
    applier: Applier | None = None  # None: audit only (no --apply)
