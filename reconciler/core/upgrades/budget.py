"""PodDisruptionBudgets and the pods a drain would evict: will the eviction API say yes right now?

Mirrors `kubectl drain --ignore-daemonsets --delete-emptydir-data`: DaemonSet and mirror pods stay,
finished pods go without a budget check, pods with no controller need --force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconciler.core.base import selectors
from reconciler.core.base.selectors import Requirement

GPU_RESOURCE = "nvidia.com/gpu"
# The GPU Operator's GPU pods: a container requests a resource named with one of these prefixes
# (gpu-operator cmd/gpu-operator/main.go gpuPodSpecFilter).
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")
# Pods the operator's drain leaves on the node (controllers/upgrade_controller.go
# UpgradeSkipDrainLabelSelector); its GPU pod deletion still removes GPU pods that carry it.
DRAIN_SKIP_LABEL = "nvidia.com/gpu-driver-upgrade-drain.skip"
FINISHED = frozenset({"Succeeded", "Failed"})


def gpu_resource(name: str) -> bool:
    return name.startswith(GPU_RESOURCE_PREFIXES)


def gpu_container(container: Mapping[str, Any]) -> bool:
    """Does a container's limits or requests name a GPU resource?"""
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return False
    names = [name for kind in ("limits", "requests") for name in (resources.get(kind) or {})]
    return any(gpu_resource(str(name)) for name in names)


def gpu_images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The images of a pod spec's GPU containers (not init containers), once each, in order: the ones
    the device plugin gives GPUs to, whose requirements the NVIDIA Container Toolkit checks."""
    containers = spec.get("containers") or []
    found = [str(c.get("image") or "") for c in containers if isinstance(c, Mapping) and gpu_container(c)]
    return tuple(dict.fromkeys(image for image in found if image))


@dataclass(frozen=True)
class Selector:
    """A metav1.LabelSelector: every matchLabels pair and every expression must hold, so an empty one
    selects every pod. Expressions are evaluated as node affinity's are (selectors.py), without Gt/Lt."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        pairs = all(labels.get(key) == value for key, value in self.match_labels.items())
        return pairs and all(
            selectors.holds(requirement, labels, selectors.SELECTOR_OPERATORS)
            for requirement in self.expressions
        )


def selector(spec: Mapping[str, Any] | None) -> Selector | None:
    """None for a null selector (a policy/v1 PDB then selects no pod); {} selects every pod."""
    if spec is None:
        return None
    expressions = tuple(
        Requirement(str(item["key"]), str(item["operator"]), tuple(str(v) for v in item.get("values") or ()))
        for item in spec.get("matchExpressions") or ()
    )
    return Selector(dict(spec.get("matchLabels") or {}), expressions)


@dataclass(frozen=True)
class Budget:
    namespace: str
    name: str
    selector: Selector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    current_healthy: int = 0
    desired_healthy: int = 0
    disruptions_allowed: int = 0
    fresh: bool = True  # status.observedGeneration caught up with the spec

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        return (
            self.selector is not None
            and pod.namespace == self.namespace
            and self.selector.matches(pod.labels)
        )

    def rule(self) -> str:
        if self.min_available is not None:
            return f"minAvailable {self.min_available}"
        if self.max_unavailable is not None:
            return f"maxUnavailable {self.max_unavailable}"
        return "no limit"

    def numbers(self) -> str:
        return (
            f"{self.rule()}, currentHealthy {self.current_healthy}, desiredHealthy {self.desired_healthy}, "
            f"disruptionsAllowed {self.disruptions_allowed}"
        )


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    owner_kind: str | None = None
    mirror: bool = False
    phase: str = "Running"
    gpu: bool = False  # a container requests nvidia.com/gpu* or nvidia.com/mig-*
    terminating: bool = False
    ready: bool = True
    gpu_images: tuple[str, ...] = ()  # the images of the containers that request a GPU (the CUDA gate's)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


class Role(StrEnum):
    GPU = "gpu"  # evicted at pod-deletion-required
    OTHER = "other"  # evicted at drain-required
    FINISHED = "finished"  # evicted without a budget check
    UNMANAGED = "unmanaged"  # no controller: only with --force, by DELETE
    STAYS = "stays"  # DaemonSet and mirror pods, and pods labelled drain.skip=true that are no GPU pods


def role(pod: Pod) -> Role:
    if pod.mirror or pod.owner_kind == "DaemonSet":
        return Role.STAYS
    if pod.labels.get(DRAIN_SKIP_LABEL) == "true" and not (pod.gpu and pod.phase not in FINISHED):
        return Role.STAYS  # the drain's selector leaves it; only GPU pod deletion would take it
    if pod.phase in FINISHED:
        return Role.FINISHED
    if pod.owner_kind is None:
        return Role.UNMANAGED
    return Role.GPU if pod.gpu else Role.OTHER


class BlockerKind(StrEnum):
    BUDGET = "budget"  # a budget allows no disruption now
    MULTIPLE_BUDGETS = "multiple-budgets"  # the eviction API refuses a pod that several budgets select
    UNMANAGED = "unmanaged"  # a pod with no controller: no eviction moves it


@dataclass(frozen=True)
class Blocker:
    """Why draining a node would be refused right now."""

    kind: BlockerKind
    message: str

    @property
    def by_budget(self) -> bool:
        """A budget's refusal, which waits can cure, unlike a pod with no controller."""
        return self.kind is not BlockerKind.UNMANAGED


def blockers(pods: Iterable[Pod], budgets: Sequence[Budget], force: bool = False) -> list[Blocker]:
    """What would refuse this node's drain now: budgets with no room, pods no eviction can move."""
    found: dict[str, Blocker] = {}
    for pod in pods:
        kind = role(pod)
        if kind is Role.UNMANAGED and not force:
            found[f"u:{pod.ref}"] = Blocker(
                BlockerKind.UNMANAGED, f"pod {pod.ref} has no controller (use --force to delete it)"
            )
        if kind not in (Role.GPU, Role.OTHER) or pod.terminating:
            continue
        for blocker in _budget_blockers(pod, [b for b in budgets if b.covers(pod)]):
            found.setdefault(blocker.message, blocker)
    return list(found.values())


def _budget_blockers(pod: Pod, covering: list[Budget]) -> list[Blocker]:
    if len(covering) > 1:
        names = ", ".join(b.ref for b in covering)
        return [
            Blocker(
                BlockerKind.MULTIPLE_BUDGETS,
                f"pod {pod.ref} is selected by several PDBs ({names}); eviction refuses it",
            )
        ]
    if covering and covering[0].disruptions_allowed < 1:
        budget = covering[0]
        stale = "" if budget.fresh else " (its status is not yet recomputed)"
        return [
            Blocker(BlockerKind.BUDGET, f"PDB {budget.ref} allows 0 disruptions{stale} ({budget.numbers()})")
        ]
    return []


def evictions_per_budget(pods: Iterable[Pod], budgets: Sequence[Budget]) -> dict[str, int]:
    """How many disruptions each budget must allow for these pods to be evicted."""
    needed: dict[str, int] = {}
    for pod in pods:
        if role(pod) in (Role.GPU, Role.OTHER) and not pod.terminating:
            for budget in budgets:
                if budget.covers(pod):
                    needed[budget.ref] = needed.get(budget.ref, 0) + 1
    return needed
