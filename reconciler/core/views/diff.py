"""Drift: the desired state in git against the live cluster.

Only what the manifests declare is compared: a node's declared labels (the others belong to NFD, GFD,
the kubelet and other teams) and a budget's declared spec fields. A GPU node live but not declared is
drift too: the fleet in git is meant to be the whole GPU fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.core.contract.operator import DriverResource
from reconciler.core.images.tags import Node

# The PodDisruptionBudget spec fields a manifest may pin; status and defaults are the cluster's.
BUDGET_FIELDS = ("minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy")


class State(StrEnum):
    CHANGED = "changed"  # declared and live, with different declared values
    ABSENT = "absent"  # declared, not live
    UNDECLARED = "undeclared"  # a live GPU node no manifest declares


@dataclass(frozen=True)
class Change:
    """One declared label or spec field: `live` is None when it is not set live."""

    name: str
    desired: Any
    live: Any


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget: its identity and spec as plain data; `origin` is `file:line` in git."""

    namespace: str
    name: str
    spec: Mapping[str, Any]
    origin: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class NodeDrift:
    node: str
    state: State
    origin: str | None
    labels: tuple[Change, ...] = ()


@dataclass(frozen=True)
class BudgetDrift:
    namespace: str
    name: str
    state: State
    origin: str | None
    fields: tuple[Change, ...] = ()


@dataclass(frozen=True)
class ResourceDrift:
    """A GPU Operator driver resource (ClusterPolicy, NVIDIADriver): its declared spec fields that differ
    live (dotted paths under spec), or that it is absent live, or live but not declared."""

    kind: str
    name: str
    state: State
    origin: str | None
    fields: tuple[Change, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Drift:
    nodes: tuple[NodeDrift, ...]
    budgets: tuple[BudgetDrift, ...]
    resources: tuple[ResourceDrift, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.nodes or self.budgets or self.resources)


def drift(
    desired_nodes: Iterable[Node],
    live_nodes: Iterable[Node],
    desired_budgets: Iterable[Budget] = (),
    live_budgets: Iterable[Budget] = (),
    resources: tuple[Sequence[DriverResource], Sequence[DriverResource]] = ((), ()),
) -> Drift:
    """How the live nodes, budgets and driver resources differ from the desired ones."""
    return Drift(
        tuple(node_drift(desired_nodes, live_nodes)),
        tuple(budget_drift(desired_budgets, live_budgets)),
        tuple(resource_drift(*resources)),
    )


def resource_drift(desired: Sequence[DriverResource], live: Sequence[DriverResource]) -> list[ResourceDrift]:
    """Per driver resource, by kind and name: declared spec fields that differ live, declared but absent
    live, or (when git declares any) live but not declared: the driver contract is all in git or not."""
    found = {(item.kind, item.name): item for item in live}
    wanted = {(item.kind, item.name): item for item in desired}
    drifts = [_resource(item, found.get(key)) for key, item in wanted.items()]
    if wanted:
        drifts += [
            ResourceDrift(str(kind), name, State.UNDECLARED, None)
            for kind, name in found
            if (kind, name) not in wanted
        ]
    return sorted((d for d in drifts if d is not None), key=lambda drift: (drift.kind, drift.name))


def _resource(desired: DriverResource, live: DriverResource | None) -> ResourceDrift | None:
    if live is None:
        return ResourceDrift(str(desired.kind), desired.name, State.ABSENT, desired.origin)
    changes = tuple(
        Change(".".join(path), value, _at(live.spec, path))
        for path, value in _leaves(desired.spec)
        if _at(live.spec, path) != value
    )
    if not changes:
        return None
    return ResourceDrift(
        str(desired.kind), desired.name, State.CHANGED, desired.version_origin or desired.origin, changes
    )


def _leaves(spec: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every declared value under spec with its path (label keys hold dots, so a tuple); lists and
    empty mappings are leaves."""
    leaves: list[tuple[tuple[str, ...], Any]] = []
    for key, value in spec.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            leaves += _leaves(value, path)
        else:
            leaves.append((path, value))
    return leaves


def _at(spec: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = spec
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def node_drift(desired: Iterable[Node], live: Iterable[Node]) -> list[NodeDrift]:
    """Per node in name order: changed declared labels, declared but absent, or live GPU undeclared."""
    wanted = {node.name: node for node in desired}
    found = {node.name: node for node in live}
    drifts = [_node(node, found.get(name)) for name, node in wanted.items()]
    drifts += [
        NodeDrift(name, State.UNDECLARED, None)
        for name, node in found.items()
        if name not in wanted and node.gpu_present
    ]
    return sorted((d for d in drifts if d is not None), key=lambda drift: drift.node)


def label_changes(desired: Node, live: Node) -> tuple[Change, ...]:
    return tuple(
        Change(key, value, live.labels.get(key))
        for key, value in sorted(desired.labels.items())
        if live.labels.get(key) != value
    )


def budget_drift(desired: Iterable[Budget], live: Iterable[Budget]) -> list[BudgetDrift]:
    """Per declared budget, by namespace and name: changed declared spec fields, or absent."""
    found = {(budget.namespace, budget.name): budget for budget in live}
    drifts = [_budget(budget, found.get((budget.namespace, budget.name))) for budget in desired]
    return sorted((d for d in drifts if d is not None), key=lambda drift: (drift.namespace, drift.name))


def field_changes(desired: Budget, live: Budget) -> tuple[Change, ...]:
    declared = [name for name in BUDGET_FIELDS if name in desired.spec]
    return tuple(
        Change(name, desired.spec[name], live.spec.get(name))
        for name in declared
        if desired.spec[name] != live.spec.get(name)
    )


def _node(desired: Node, live: Node | None) -> NodeDrift | None:
    if live is None:
        return NodeDrift(desired.name, State.ABSENT, desired.origin)
    changes = label_changes(desired, live)
    return NodeDrift(desired.name, State.CHANGED, desired.origin, changes) if changes else None


def _budget(desired: Budget, live: Budget | None) -> BudgetDrift | None:
    if live is None:
        return BudgetDrift(desired.namespace, desired.name, State.ABSENT, desired.origin)
    changes = field_changes(desired, live)
    if not changes:
        return None
    return BudgetDrift(desired.namespace, desired.name, State.CHANGED, desired.origin, changes)
