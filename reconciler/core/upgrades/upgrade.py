"""Driver upgrades as data: which nodes need one, the gates in their way, and the steps left.

States and keys are the GPU Operator's (k8s-operator-libs pkg/upgrade, docs/operator-contract.md cites
each): the label names the step that is due next, so a stalled upgrade says where it stalled, and a run
that was killed resumes from the label. A label value gpudrv does not drive (the maintenance states,
or one it does not know) is never read as "no state": the node is reported and left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from reconciler.core.images import tags
from reconciler.core.images.tags import Node, TagError
from reconciler.core.upgrades import budget


class State(StrEnum):
    """Every value of nvidia.com/gpu-driver-upgrade-state, in the operator's order."""

    REQUIRED = "upgrade-required"
    CORDON = "cordon-required"
    WAIT_FOR_JOBS = "wait-for-jobs-required"
    POD_DELETION = "pod-deletion-required"
    DRAIN = "drain-required"
    NODE_MAINTENANCE = "node-maintenance-required"  # newer libs: an external maintenance operator's
    POST_MAINTENANCE = "post-maintenance-required"  # newer libs: after that operator's maintenance
    POD_RESTART = "pod-restart-required"
    VALIDATION = "validation-required"
    UNCORDON = "uncordon-required"
    DONE = "upgrade-done"
    FAILED = "upgrade-failed"


# The states gpudrv's lab mode drives, in order (the operator's in-place flow, without maintenance).
ORDER = (
    State.REQUIRED,
    State.CORDON,
    State.WAIT_FOR_JOBS,
    State.POD_DELETION,
    State.DRAIN,
    State.POD_RESTART,
    State.VALIDATION,
    State.UNCORDON,
    State.DONE,
)
ALL_STATES = tuple(State)  # for status and report: every state, the failed one last
# Held by an external maintenance operator (requestor mode): gpudrv never drives these.
MAINTENANCE = frozenset({State.NODE_MAINTENANCE, State.POST_MAINTENANCE})
# Until the cordon step has run, gpudrv has changed nothing that a drain refusal would strand.
BEFORE_CORDON = frozenset({State.REQUIRED, State.CORDON})
# The operator's keys beside the state label (k8s-operator-libs consts.go, driver name "gpu").
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"  # "true": the node's upgrade is not started
DRIVER_KEYS = (tags.DRIVER_MAJOR, tags.DRIVER_MINOR, tags.DRIVER_REV)


@dataclass(frozen=True, order=True)
class Driver:
    major: str
    minor: str
    rev: str

    @property
    def version(self) -> str:
        return f"{self.major}.{self.minor}.{self.rev}"

    @property
    def numeric(self) -> bool:
        """Driver versions are digits, like 550.90.07; anything else in a manifest is a typo."""
        return all(part.isascii() and part.isdigit() for part in (self.major, self.minor, self.rev))

    def labels(self) -> dict[str, str]:
        return dict(zip(DRIVER_KEYS, (self.major, self.minor, self.rev), strict=True))


def driver(labels: Mapping[str, str]) -> Driver | None:
    """The driver the labels declare; None unless all three labels are set."""
    parts = [labels.get(key) for key in DRIVER_KEYS]
    if any(not part for part in parts):
        return None
    return Driver(*(str(part) for part in parts))


def state_of(labels: Mapping[str, str]) -> State | None:
    """The node's state; None when there is none (no label, or the libs' empty "unknown" value).
    A value that is no state at all is not None: see unknown_state."""
    value = labels.get(tags.UPGRADE_STATE)
    return State(value) if value in set(State) else None


def unknown_state(labels: Mapping[str, str]) -> str | None:
    """The state label's value when it is set and is none of the operator's states."""
    value = labels.get(tags.UPGRADE_STATE)
    return value if value and value not in set(State) else None


def skipped(labels: Mapping[str, str]) -> bool:
    return labels.get(SKIP_LABEL) == "true"


def remaining(
    state: State | None, *, cordoned_before: bool = False, in_sync: bool = False
) -> tuple[State, ...]:
    """The steps still to run: from the recorded state on; a fresh node starts at upgrade-required. A
    node cordoned before the upgrade skips uncordon-required. A failed node whose driver is in sync
    goes on to uncordon-required (or upgrade-done, if it was cordoned before); otherwise gpudrv
    tries its upgrade again from the start, the node staying cordoned meanwhile."""
    if state is State.FAILED and in_sync:
        return (State.DONE,) if cordoned_before else (State.UNCORDON, State.DONE)
    if state in ORDER and state is not State.DONE:
        steps: tuple[State, ...] = ORDER[ORDER.index(state) :]
    else:
        steps = ORDER
    if cordoned_before and steps[0] is not State.UNCORDON:
        steps = tuple(step for step in steps if step is not State.UNCORDON)
    return steps


@dataclass(frozen=True)
class LiveNode:
    node: Node
    unschedulable: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name


class GateName(StrEnum):
    DRIVER = "driver"  # the desired driver version is well formed
    NODE = "node"  # the declared node exists live
    IMAGE = "image"  # the target image is in the matrix on the merged ref
    STATE = "state"  # the node's state is one gpudrv drives
    SKIP = "skip"  # the node is not marked nvidia.com/gpu-driver-upgrade.skip=true
    BUDGET = "budget"  # the disruption budgets allow the drain now
    PODS = "pods"  # every pod on the node can be evicted
    CORDON = "cordon"  # whether the node is left cordoned afterwards
    CUDA = "cuda"  # every GPU pod's image accepts the target driver (core/cuda/cuda_gate.py)


class RunResult(StrEnum):
    """How one node's run of its upgrade steps ended."""

    DONE = "done"
    FAILED = "failed"
    BLOCKED = "blocked"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Gate:
    name: GateName
    ok: bool
    detail: str


@dataclass(frozen=True)
class Images:
    """The image gate's evidence: the matrix at the merged ref, and in the working tree."""

    ref: str
    path: str
    merged: frozenset[str]
    since: Mapping[str, str] = field(default_factory=dict)  # tag -> commit that added it on `ref`
    working: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NodePlan:
    node: str
    target: Driver
    live_driver: Driver | None = None
    target_tag: str | None = None
    state: State | None = None
    steps: tuple[State, ...] = ORDER
    gates: tuple[Gate, ...] = ()
    cordoned_before: bool = False
    cordoned: bool = False  # unschedulable now

    @property
    def skipped(self) -> bool:
        """Refused only by the operator's skip label: left alone on purpose, not blocked."""
        refused = [gate.name for gate in self.gates if not gate.ok]
        return bool(refused) and all(name is GateName.SKIP for name in refused)

    @property
    def blocked(self) -> bool:
        return any(not gate.ok for gate in self.gates)

    @property
    def in_progress(self) -> bool:
        return self.state in ORDER and self.state is not State.DONE


def needs_upgrade(desired: Node, live: LiveNode) -> Driver | None:
    """The desired driver when the live node runs another, is mid-upgrade, failed one, or carries a
    state gpudrv does not drive (never "nothing to do": the operator may have cordoned it)."""
    target = driver(desired.labels)
    if target is None:
        return None
    state = state_of(live.node.labels)
    unknown = unknown_state(live.node.labels)
    if driver(live.node.labels) != target or state not in (None, State.DONE) or unknown:
        return target
    return None


def left_alone(live: LiveNode, plan: NodePlan) -> Gate | None:
    """Why lab mode must not touch the node: a state it does not drive, or the operator's skip label
    on a node whose upgrade has not started (the libs read it at upgrade-required only)."""
    if (refused := state_gate(live)) is not None:
        return refused
    if plan.steps[0] is State.REQUIRED and skipped(live.node.labels):
        return Gate(GateName.SKIP, False, f"{SKIP_LABEL}=true: skipped, left alone")
    return None


def state_gate(live: LiveNode) -> Gate | None:
    """A refusal when the node's state is not one lab mode drives: left alone, said why."""
    cordoned = "cordoned" if live.unschedulable else "schedulable"
    if (unknown := unknown_state(live.node.labels)) is not None:
        return Gate(
            GateName.STATE,
            False,
            f"{tags.UPGRADE_STATE}={unknown} is no state of the GPU Operator's upgrade controller; "
            f"left alone ({cordoned})",
        )
    state = state_of(live.node.labels)
    if state in MAINTENANCE:
        return Gate(
            GateName.STATE,
            False,
            f"{state}: an external maintenance operator holds the node (requestor mode); "
            f"left alone ({cordoned})",
        )
    return None


def target_tag(live: LiveNode, target: Driver) -> str:
    """The tag the node will need: its live kernel and OS, with the desired driver branch."""
    return tags.tag(replace(live.node, labels={**live.node.labels, **target.labels()}))


def plan_node(
    desired: Node,
    live: LiveNode | None,
    images: Images,
    pods: Sequence[budget.Pod] = (),
    budgets: Sequence[budget.Budget] = (),
    *,
    force: bool = False,
) -> NodePlan | None:
    """The plan for one declared node, or None when it already runs its desired driver."""
    target = driver(desired.labels)
    if target is None:
        return None
    if not target.numeric:
        return NodePlan(
            desired.name,
            target,
            gates=(Gate(GateName.DRIVER, False, f"desired driver {target.version!r} is not numeric"),),
        )
    if live is None:
        return NodePlan(desired.name, target, gates=(Gate(GateName.NODE, False, "not found in the cluster"),))
    if needs_upgrade(desired, live) is None:
        return None
    state = state_of(live.node.labels)
    live_driver = driver(live.node.labels)
    before = cordoned_before(live)
    plan = NodePlan(
        desired.name,
        target,
        live_driver,
        state=state,
        steps=remaining(state, cordoned_before=before, in_sync=live_driver == target),
        cordoned_before=before,
        cordoned=live.unschedulable,
    )
    if (refused := left_alone(live, plan)) is not None:
        return replace(plan, gates=(refused,))
    return _gated(plan, live, images, pods, budgets, force=force)


def _gated(
    plan: NodePlan,
    live: LiveNode,
    images: Images,
    pods: Sequence[budget.Pod],
    budgets: Sequence[budget.Budget],
    *,
    force: bool,
) -> NodePlan:
    try:
        plan = replace(plan, target_tag=target_tag(live, plan.target))
    except TagError as exc:
        return replace(plan, gates=(Gate(GateName.IMAGE, False, f"no target tag: {exc.reason}"),))
    gates = [image_gate(plan.target_tag or "", images)]
    if plan.steps[0] in BEFORE_CORDON:
        gates.extend(drain_gates(pods, budgets, force))
    gates.append(cordon_gate(plan))
    return replace(plan, gates=tuple(gates))


# The operator's annotation: present ("true") only when the node was cordoned before the upgrade began.
INITIAL_UNSCHEDULABLE = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
# gpudrv's own, before it followed the operator ("true"/"false"): still read on nodes an older gpudrv
# left mid-upgrade, and removed when their upgrade ends.
LEGACY_INITIAL_UNSCHEDULABLE = "gpudrv.dev/initial-unschedulable"
# Annotations gpudrv keeps on a node during an upgrade: apply writes them, status reads them.
OWNER = "gpudrv.dev/upgrade-owner"  # the run holding the node, and until when (a lease)
FAILURE = "gpudrv.dev/upgrade-failure"  # why the last upgrade failed, and at which step


def cordoned_before(live: LiveNode) -> bool:
    """Was the node cordoned before its upgrade began? A node that is not mid-upgrade answers with its
    cordon now; once the upgrade has begun (upgrade-required on), the initial-state annotation's
    presence answers, as the operator reads it (or an older gpudrv's annotation, by its value)."""
    legacy = live.annotations.get(LEGACY_INITIAL_UNSCHEDULABLE)
    if legacy is not None:
        return legacy == "true"
    if state_of(live.node.labels) in (None, State.DONE):
        return live.unschedulable
    if INITIAL_UNSCHEDULABLE in live.annotations:
        return True
    # upgrade-required written but not the annotation (the operator writes the annotation first; an
    # older gpudrv wrote its own with cordon-required): gpudrv has not cordoned the node yet.
    return state_of(live.node.labels) is State.REQUIRED and live.unschedulable


def image_gate(tag: str, images: Images) -> Gate:
    where = f"{images.path} on {images.ref}"
    if tag in images.merged:
        since = images.since.get(tag)
        return Gate(GateName.IMAGE, True, f"{tag} is in {where}" + (f" since {since[:12]}" if since else ""))
    hint = " (only in the working tree: merge it first)" if tag in images.working else ""
    return Gate(GateName.IMAGE, False, f"{tag} is not in {where}{hint}")


def drain_gates(pods: Sequence[budget.Pod], budgets: Sequence[budget.Budget], force: bool) -> list[Gate]:
    found = budget.blockers(pods, budgets, force)
    budget_blocks = [b.message for b in found if b.by_budget]
    pod_blocks = [b.message for b in found if not b.by_budget]
    gates = [
        Gate(GateName.BUDGET, not budget_blocks, "; ".join(budget_blocks) or budget_summary(pods, budgets))
    ]
    if pod_blocks:
        gates.append(Gate(GateName.PODS, False, "; ".join(pod_blocks)))
    return gates


def budget_summary(pods: Sequence[budget.Pod], budgets: Sequence[budget.Budget]) -> str:
    needed = budget.evictions_per_budget(pods, budgets)
    if not needed:
        return "no pod on the node is covered by a PDB"
    by_ref = {b.ref: b for b in budgets}
    return "; ".join(
        f"PDB {ref}: {count} pod(s) to evict, {by_ref[ref].numbers()}"
        for ref, count in sorted(needed.items())
    )


def cordon_gate(plan: NodePlan) -> Gate:
    if plan.cordoned_before:
        return Gate(GateName.CORDON, True, "cordoned before the upgrade: it stays cordoned afterwards")
    return Gate(GateName.CORDON, True, "schedulable: cordoned for the upgrade, uncordoned after it")


def batch(
    plans: Iterable[NodePlan],
    max_parallel: int,
    pods_by_node: Mapping[str, Sequence[budget.Pod]],
    budgets: Sequence[budget.Budget],
) -> list[NodePlan]:
    """The next nodes to drive together: resumed ones first, never more than the budgets allow at once."""
    ready = sorted((p for p in plans if not p.blocked), key=lambda p: (not p.in_progress, p.node))
    chosen: list[NodePlan] = []
    spent: dict[str, int] = {}
    allowed = {b.ref: b.disruptions_allowed for b in budgets}
    for plan in ready:
        if len(chosen) == max_parallel:
            break
        needed = budget.evictions_per_budget(pods_by_node.get(plan.node, ()), budgets)
        if chosen and any(spent.get(ref, 0) + count > allowed.get(ref, 0) for ref, count in needed.items()):
            continue  # would need more room than the budget has: it waits for a later batch
        chosen.append(plan)
        for ref, count in needed.items():
            spent[ref] = spent.get(ref, 0) + count
    return chosen
