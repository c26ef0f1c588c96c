"""The audit of a fleet that changes while it is watched: `gpudrv reconcile`'s state, pure.

Nodes arrive one event at a time (or as a whole list after a re-list); each is audited on its own the
moment its labels change, and the whole fleet again when the matrix or the driver contract changes.
What changed for a node is a `Change`: the loop turns changes into metrics and Node events. Each node's
next kernel (tags.NEXT_KERNEL) is audited with it: a NEXT-MISSING finding is kept beside its running
one and exported as a series, with no Change and no event of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from reconciler.core.audit.audit import Finding, Status, check_next, check_want
from reconciler.core.contract.driver_images import FleetNote, mixed_os_notes, next_want, want_of
from reconciler.core.contract.operator import Contract, ContractError, Mode
from reconciler.core.images.tags import UPGRADE_STATE, Node

NO_STATE = "none"  # the metric's name for a node without the upgrade-state label


class Kind(StrEnum):
    MISSING = "missing"  # the node's image is not in the matrix (new, or another tag than before)
    INVALID = "invalid"  # no tag can be computed from the node's labels (new, or another reason)
    CLEARED = "cleared"  # the node had a finding and has none now
    GONE = "gone"  # the node left the watched set (deleted, or no longer a GPU node)


@dataclass(frozen=True)
class Change:
    node: str
    kind: Kind
    finding: Finding | None  # the node's finding now (None for CLEARED and GONE)
    before: Finding | None  # its finding until now
    tag: str | None = None  # the image tag the node needs now, when its labels give one


def check_node(
    contract: Contract, node: Node, matrix_tags: frozenset[str]
) -> tuple[str | None, Finding | None]:
    """One node's audit: the tag it needs (None when there is none) and its finding. Two NVIDIADrivers
    claiming the node is that node's problem here (the loop keeps serving the rest of the fleet),
    where `gpudrv audit` stops with an error."""
    try:
        want = want_of(contract, node)
    except ContractError as exc:
        return None, Finding(node.name, Status.INVALID, exc.reason, node.origin)
    return want.tag, check_want(want, matrix_tags)


def check_node_next(contract: Contract, node: Node, matrix_tags: frozenset[str]) -> Finding | None:
    """The node's NEXT-MISSING finding: the image it needs on the kernel it boots next is not in the
    matrix. None when its next kernel is the one it runs, or when no image can be named for it on
    either kernel (its running finding, or `gpudrv audit`, says why)."""
    try:
        want = want_of(contract, node)
        later = next_want(contract, want) if want.tag is not None else None
    except ContractError:
        return None
    finding = check_next(later, matrix_tags) if later is not None else None
    return finding if finding is not None and finding.status is Status.NEXT_MISSING else None


def same(a: Finding | None, b: Finding | None) -> bool:
    """The same problem: status and tag (or reason); a new image reference alone is not news."""
    if a is None or b is None:
        return a is b
    return (a.status, a.detail) == (b.status, b.detail)


class FleetAudit:
    """The watched GPU nodes and each one's finding."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.findings: dict[str, Finding] = {}
        self.upcoming: dict[str, Finding] = {}  # node -> its NEXT-MISSING finding

    # --- the nodes: what the watch says --------------------------------------------------------------

    def replace(self, nodes: Iterable[Node]) -> set[str]:
        """A fresh list: the names that are new, changed or gone since the last view."""
        fresh = {node.name: node for node in nodes if node.gpu_present}
        touched = set(self.nodes.keys() - fresh.keys())
        touched |= {name for name, node in fresh.items() if not _same_labels(self.nodes.get(name), node)}
        self.nodes = fresh
        return touched

    def upsert(self, node: Node) -> bool:
        """True when the node is new or its labels changed (a status heartbeat changes nothing)."""
        if not node.gpu_present:
            return self.remove(node.name)
        if _same_labels(self.nodes.get(node.name), node):
            return False
        self.nodes[node.name] = node
        return True

    def remove(self, name: str) -> bool:
        return self.nodes.pop(name, None) is not None

    # --- the audit -----------------------------------------------------------------------------------

    def audit(self, names: Iterable[str], contract: Contract, matrix_tags: frozenset[str]) -> list[Change]:
        """Audit these nodes (gone ones are forgotten); the changes, in name order."""
        changes = []
        for name in sorted(set(names)):
            before = self.findings.get(name)
            node = self.nodes.get(name)
            if node is None:
                self.findings.pop(name, None)
                self.upcoming.pop(name, None)
                changes.append(Change(name, Kind.GONE, None, before))
                continue
            tag, now = check_node(contract, node, matrix_tags)
            if (later := check_node_next(contract, node, matrix_tags)) is not None:
                self.upcoming[name] = later
            else:
                self.upcoming.pop(name, None)
            if now is None:
                self.findings.pop(name, None)
                if before is not None:
                    changes.append(Change(name, Kind.CLEARED, None, before, tag))
                continue
            self.findings[name] = now
            if not same(before, now):
                kind = Kind.MISSING if now.status is Status.MISSING else Kind.INVALID
                changes.append(Change(name, kind, now, before, tag))
        return changes

    def audit_all(self, contract: Contract, matrix_tags: frozenset[str]) -> list[Change]:
        """Every node again (the matrix or the contract changed), and nodes audited before but gone."""
        return self.audit(self.nodes.keys() | self.findings.keys(), contract, matrix_tags)

    def notes(self, contract: Contract) -> tuple[FleetNote, ...]:
        """The fleet's own problems (a ClusterPolicy over several OS versions)."""
        if contract.mode is not Mode.CLUSTER_POLICY:
            return ()
        return mixed_os_notes(contract, sorted(self.nodes.values(), key=lambda node: node.name))

    # --- figures -------------------------------------------------------------------------------------

    def missing(self) -> dict[str, str]:
        """Node name -> the tag it lacks."""
        return {name: f.detail for name, f in self.findings.items() if f.status is Status.MISSING}

    def next_missing(self) -> dict[str, tuple[str, str]]:
        """Node name -> (the kernel it boots next, the tag it lacks on that kernel)."""
        return {name: (f.kernel or "", f.detail) for name, f in self.upcoming.items()}

    def invalid(self) -> dict[str, str]:
        """Node name -> why no tag could be computed."""
        return {name: f.detail for name, f in self.findings.items() if f.status is Status.INVALID}

    def upgrade_states(self, known: Iterable[str] = ()) -> dict[str, int]:
        """GPU nodes per `nvidia.com/gpu-driver-upgrade-state` value; every known state is present."""
        counts = Counter(node.labels.get(UPGRADE_STATE) or NO_STATE for node in self.nodes.values())
        return {state: counts.get(state, 0) for state in [*known, NO_STATE, *counts]}


def _same_labels(old: Node | None, new: Node) -> bool:
    return old is not None and dict(old.labels) == dict(new.labels)


def backoff(attempt: int, base: float = 0.5, cap: float = 30.0, jitter: float = 0.0) -> float:
    """Seconds to wait before retry `attempt` (1, 2, ...): doubling from `base`, never above `cap`;
    `jitter` in [0, 1) spreads replicas apart by up to a fifth of the delay."""
    delay = min(cap, base * float(2 ** max(attempt - 1, 0)))
    return min(cap, delay * (1 + jitter / 5))
