"""The ports of the operator-mode rollout (staging.py): what the loop needs of the world. A node-watch
event is a `Sighting` in an `Inbox`, time is a `Clock`, lines and outcomes go to an `Output`, reads
and writes go through a `StagingFleet`, and apply's settings are read as `StagingSettings`. On a
cluster: adapters/cluster/staging.py (the clock: adapters/cluster/fleet.py's SystemHost); in memory:
tests/unit/memory_operator.py.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from reconciler.core.audit.audit import AuditResult
from reconciler.core.images.tags import Node
from reconciler.core.rollout.supervise import NodeFacts, Stages
from reconciler.core.upgrades.budget import Budget, Pod


@dataclass(frozen=True)
class Sighting:
    """What one node-watch event showed: nodes and their labels (`listed`: the whole set, a list)."""

    nodes: tuple[Node, ...]
    listed: bool = False


class Inbox(Protocol):
    def get(self, timeout: float) -> Sighting | None:
        """The next event, waiting up to `timeout` seconds (0: only one already there); None: none."""
        ...


class Clock(Protocol):
    def now(self) -> float: ...  # wall-clock seconds: the holds say since when

    def monotonic(self) -> float: ...


class Output(Protocol):
    def say(self, line: str) -> None: ...

    def note(self, name: str, outcome: str, detail: str | None = None) -> None:
        """A node's outcome as of now (-o json; the last one noted is the answer)."""
        ...

    def audited(self, result: AuditResult) -> None: ...


class StagingFleet(Protocol):
    """The reads and writes of an operator-mode rollout."""

    def read(self) -> list[NodeFacts]:
        """One consistent look at every GPU node the desired resources select."""
        ...

    def pods_on_nodes(self, names: Collection[str]) -> dict[str, list[Pod]]: ...

    def budgets(self) -> list[Budget]: ...

    def compare_resources(self, applies: bool) -> None:
        """The declared driver resources against the live ones; when gpudrv is to apply them, a field
        another manager owns is refused here (an error), before any node is touched."""
        ...

    def planned_resources(self, applies: bool) -> list[str]:
        """What a dry run says of each driver resource."""
        ...

    def writing(self) -> None:
        """From here on the cluster changes: an API server that stops answering is waited out."""
        ...

    def hold(self, name: str, why: str) -> None:
        """The skip label on the node, and gpudrv's mark saying `why`."""
        ...

    def release(self, name: str) -> None:
        """gpudrv's skip label and mark off the node."""
        ...

    def apply_resources(self) -> None:
        """Server-side apply of gpudrv's driver resources that differ (saying what it applies); never
        one Helm renders."""
        ...

    def others_apply(self) -> bool:
        """Do driver resources that differ wait for another writer (Helm renders them)?"""
        ...

    def await_sync(self, timeout: float) -> bool:
        """Wait for the GitOps engine to make the driver resources as declared; False after `timeout`."""
        ...

    def node_watch(self) -> AbstractContextManager[Inbox]:
        """The node watch, running while the context lasts; its first event is the list."""
        ...

    def audit(self) -> AuditResult:
        """The GPU nodes as they are now against the matrix in the working tree."""
        ...


class StagingSettings(Protocol):
    """What the rollout reads of apply's settings: --canary/--batch, --timeout (per batch),
    --dry-run, --hold, --await-sync, and whether gpudrv applies the driver resources itself."""

    @property
    def stages(self) -> Stages: ...
    @property
    def timeout(self) -> float: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def hold(self) -> bool: ...
    @property
    def await_sync(self) -> bool: ...
    @property
    def applies(self) -> bool: ...
