"""A driver rollout on a GPU Operator fleet, as data: gpudrv stages it, the operator carries it out.

The operator's upgrade controller (k8s-operator-libs pkg/upgrade, configured by the operator's
controllers/upgrade_controller.go) owns `nvidia.com/gpu-driver-upgrade-state`; gpudrv never writes it.
gpudrv's one lever is the operator's own skip label: a node labelled
`nvidia.com/gpu-driver-upgrade.skip=true` stays at upgrade-required (upgrade_state.go,
ProcessUpgradeRequiredNodes). gpudrv holds every moving node but the canary that way, marks the
holds it set with its own annotation (so it only ever removes its own), and releases the rest batch
by batch once the nodes before them are done. Everything here is pure: the command reads the facts,
these functions decide, the command writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core import budget
from reconciler.core.budget import Pod, Role
from reconciler.core.duration import show
from reconciler.core.tags import UPGRADE_STATE
from reconciler.core.upgrade import SKIP_LABEL, State

HELD = "gpudrv.dev/held"  # gpudrv set this node's skip label; the value says why
VALIDATOR_APP = "nvidia-operator-validator"  # main.go: WithValidationEnabled("app=nvidia-operator-validator")
VALIDATION_TIMEOUT = 600  # validation_manager.go: validationTimeoutSeconds, not configurable
EVENT_REASON = "GPUDriverUpgrade"  # util.go GetEventReason: upper(driver name) + "DriverUpgrade"


def state_of(labels: Mapping[str, str]) -> str:
    """The state label as it is: a value gpudrv does not know is shown, never read as no state."""
    return labels.get(UPGRADE_STATE, "")


@dataclass(frozen=True)
class DriverPod:
    """The operator's driver pod on a node: app=nvidia-driver-daemonset with a ClusterPolicy, one
    DaemonSet per NVIDIADriver and pool (app.kubernetes.io/component=nvidia-driver) with the CRD."""

    namespace: str
    name: str
    image: str
    ready: bool
    waiting: str = ""  # the first container's waiting reason (ImagePullBackOff, ...)
    message: str = ""
    owner: str = ""  # the NVIDIADriver whose DaemonSet runs it ("" with a ClusterPolicy, or unknown)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Policy:
    """ClusterPolicy spec.driver.upgradePolicy as the operator reads it (DriverUpgradePolicySpec)."""

    auto_upgrade: bool = False
    max_parallel: int = 1
    max_unavailable: int | str | None = "25%"
    wait_selector: str = ""
    wait_timeout: int = 0
    pod_deletion_timeout: int = 300
    drain_enabled: bool = False
    drain_selector: str = ""
    drain_timeout: int = 300


def policy(spec: Mapping[str, Any]) -> Policy:
    """spec.driver.upgradePolicy of a ClusterPolicy (the operator reads the policy there in both modes)."""
    wait = _section(spec, "waitForCompletion")
    deletion = _section(spec, "podDeletion")
    drain = _section(spec, "drain")
    return Policy(
        auto_upgrade=spec.get("autoUpgrade") is True,
        max_parallel=_int(spec.get("maxParallelUpgrades"), 1),
        max_unavailable=spec.get("maxUnavailable", "25%"),
        wait_selector=str(wait.get("podSelector") or ""),
        wait_timeout=_int(wait.get("timeoutSeconds"), 0),
        pod_deletion_timeout=_int(deletion.get("timeoutSeconds"), 300),
        drain_enabled=drain.get("enable") is True,
        drain_selector=str(drain.get("podSelector") or ""),
        drain_timeout=_int(drain.get("timeoutSeconds"), 300),
    )


def _section(spec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = spec.get(key)
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True)
class NodeFacts:
    """One GPU node the rollout moves, as read from the cluster."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    want_image: str | None  # the image the desired resource gives it
    want_tag: str | None
    driver: DriverPod | None = None
    validator: Pod | None = None
    validator_ready: bool = False
    pods: tuple[Pod, ...] = ()
    events: tuple[str, ...] = ()  # the operator's events on the node, newest last
    want_driver: str | None = None  # the NVIDIADriver that governs it (None with a ClusterPolicy)

    @property
    def state(self) -> str:
        return state_of(self.labels)

    @property
    def skipped(self) -> bool:
        return self.labels.get(SKIP_LABEL) == "true"

    @property
    def held(self) -> bool:
        """Held by gpudrv: its skip label and gpudrv's mark on it."""
        return self.skipped and HELD in self.annotations

    @property
    def skipped_by_someone_else(self) -> bool:
        return self.skipped and HELD not in self.annotations

    @property
    def in_sync(self) -> bool:
        """Its driver pod runs the desired image, Ready, from the desired NVIDIADriver's DaemonSet
        (when the pod's owner is known: a pool another NVIDIADriver still runs has not moved yet)."""
        pod = self.driver
        if pod is None or pod.image != self.want_image or not pod.ready:
            return False
        return not (self.want_driver and pod.owner) or pod.owner == self.want_driver

    @property
    def done(self) -> bool:
        return self.state == State.DONE and self.in_sync


def skipped_line(name: str) -> str:
    """How a node the user holds is named, once per run (lab mode and plan say SKIPPED too)."""
    return f"{name}: SKIPPED ({SKIP_LABEL}=true, not set by gpudrv)"


def user_skipped(nodes: Iterable[NodeFacts]) -> list[NodeFacts]:
    """The nodes someone else holds with the skip label that the desired resources would move."""
    return sorted(
        (node for node in nodes if node.skipped_by_someone_else and not node.done), key=lambda n: n.name
    )


def moving(nodes: Iterable[NodeFacts]) -> list[NodeFacts]:
    """The nodes whose driver pod does not yet run the desired image (or is not Ready), or that the
    operator has not yet called done, in name order. Skipped by someone else: never moving."""
    return sorted(
        (node for node in nodes if not node.done and not node.skipped_by_someone_else),
        key=lambda node: node.name,
    )


# --- staging ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stages:
    canary: int = 1
    batch: int = 0  # 0: every node left at once, after the canary


@dataclass(frozen=True)
class Step:
    """What to do now: hold or release these nodes; `waiting` for the nodes in flight; `finished`."""

    hold: tuple[str, ...] = ()
    release: tuple[str, ...] = ()
    in_flight: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    finished: bool = False
    canary: bool = False


def first_step(nodes: Sequence[NodeFacts], stages: Stages) -> Step:
    """Before the driver resource changes: every moving node but the canary is held."""
    candidates = moving(nodes)
    running = [node for node in candidates if not node.held and node.state not in _IDLE]
    if running or any(node.held for node in candidates):
        return next_step(nodes, stages)  # a rollout under way (a rerun): go on from where it is
    canary = candidates[: stages.canary]
    rest = candidates[stages.canary :]
    return Step(
        hold=tuple(node.name for node in rest),
        in_flight=tuple(node.name for node in canary),
        finished=not candidates,
        canary=True,
    )


_IDLE = frozenset({"", State.DONE, State.REQUIRED})


def next_step(nodes: Sequence[NodeFacts], stages: Stages) -> Step:
    """While the rollout runs: wait for released nodes; when all are done, release the next batch.
    A failed released node stops the releases: the holds stay, so the operator takes no more."""
    candidates = moving(nodes)
    released = [node for node in candidates if not node.held]
    held = [node for node in candidates if node.held]
    failed = tuple(node.name for node in released if node.state == State.FAILED)
    if failed:
        return Step(in_flight=tuple(node.name for node in released), failed=failed)
    if released:
        return Step(in_flight=tuple(node.name for node in released))
    if not held:
        return Step(finished=True)
    # Nothing released is in flight and nodes are still held: the canary (released by the first
    # step, before the resource changed) is done, so the rest go batch by batch.
    batch = held[: stages.batch or len(held)]
    return Step(release=tuple(node.name for node in batch), in_flight=tuple(node.name for node in batch))


# --- budgets before a batch -------------------------------------------------------------------------


def evicted(pods: Iterable[Pod], rules: Policy) -> list[Pod]:
    """The pods the operator will evict from a node: its GPU pods at pod-deletion-required, and with
    drain enabled every other pod but DaemonSet and mirror pods and those labelled drain.skip=true
    (budget.role has the operator's rules, with their sources in docs/operator-contract.md)."""
    taken = {Role.GPU, Role.OTHER, Role.UNMANAGED} if rules.drain_enabled else {Role.GPU}
    return [pod for pod in pods if budget.role(pod) in taken]


def budget_refusals(pods: Iterable[Pod], budgets: Sequence[budget.Budget]) -> list[str]:
    """Each budget that would refuse one of these evictions now, with its numbers: the pods of a whole
    batch count together, as the operator takes the batch's nodes at once."""
    wanted: dict[str, list[Pod]] = {}
    for pod in pods:
        for item in budgets:
            if item.covers(pod):
                wanted.setdefault(item.ref, []).append(pod)
    lines = []
    for item in budgets:
        asked = wanted.get(item.ref, [])
        if asked and len(asked) > item.disruptions_allowed:
            names = ", ".join(pod.ref for pod in asked[:3]) + (" …" if len(asked) > 3 else "")
            lines.append(
                f"PDB {item.ref} allows {item.disruptions_allowed} disruption(s) and the batch needs "
                f"{len(asked)} ({names}); {item.numbers()}"
            )
    return lines


# --- why a node is where it is ----------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    rules: Policy
    budgets: Sequence[budget.Budget] = ()
    tags: frozenset[str] = frozenset()  # the matrix's tags on the merged ref
    matrix: str = "the matrix"
    waited: float = 0.0  # seconds the node has been in its state


def stall(node: NodeFacts, context: Context) -> str:
    """What the node waits for, in words a person acts on."""
    state = node.state
    if node.held:
        return "held by gpudrv (skip label) until the nodes before it are done"
    if node.skipped_by_someone_else:
        return f"{SKIP_LABEL}=true was set by someone else: the operator leaves this node alone"
    if state in ("", State.DONE):
        return _driver_stall(node, context) or "waiting for the operator to mark it upgrade-required"
    if state not in set(State):
        return f"in a state gpudrv does not know ({state!r}): see the operator's log"
    return _BY_STATE.get(State(state), _operator_step)(node, context)


def _slot_stall(node: NodeFacts, context: Context) -> str:
    rules = context.rules
    return (
        f"waiting for an upgrade slot (maxParallelUpgrades {rules.max_parallel}, "
        f"maxUnavailable {rules.max_unavailable})"
    )


def _operator_step(node: NodeFacts, context: Context) -> str:
    return f"waiting for the operator ({node.state})"


def _maintenance(node: NodeFacts, context: Context) -> str:
    return f"in {node.state}: an external maintenance operator holds it (the operator's requestor mode)"


def _restart_stall(node: NodeFacts, context: Context) -> str:
    return _driver_stall(node, context) or "waiting for the operator to restart the driver pod"


def _jobs_stall(node: NodeFacts, context: Context) -> str:
    selector = context.rules.wait_selector
    running = [
        pod for pod in node.pods if budget.role(pod) is not budget.Role.STAYS and pod.phase == "Running"
    ]
    limit = (
        f"the operator waits up to {context.rules.wait_timeout}s"
        if context.rules.wait_timeout
        else ("the operator waits without a timeout (waitForCompletion.timeoutSeconds 0)")
    )
    names = ", ".join(pod.ref for pod in running[:3]) or "none running now"
    return f"waiting for jobs matching {selector!r} to finish ({names}) for {show(context.waited)}; {limit}"


def _eviction_stall(node: NodeFacts, context: Context) -> str:
    state = node.state
    pods = evicted(node.pods, context.rules) if state == State.DRAIN else evicted(node.pods, Policy())
    step = "drain" if state == State.DRAIN else "GPU pod deletion"
    refusals = budget_refusals(pods, context.budgets)
    if refusals:
        return f"{step} refused: " + "; ".join(refusals)
    if pods:
        names = ", ".join(pod.ref for pod in pods[:3])
        return f"{step} under way: {len(pods)} pod(s) left ({names})"
    return f"{step}: no pod left; waiting for the operator to move on"


def _driver_stall(node: NodeFacts, context: Context) -> str | None:
    pod = node.driver
    if pod is None:
        return "no driver pod on the node yet"
    if pod.waiting in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
        tag = node.want_tag
        where = (
            f"{context.matrix} has no row for {tag}"
            if tag is not None and tag not in context.tags
            else f"{context.matrix} lists {tag}: check that the registry really has it"
        )
        return f"driver pod {pod.ref} cannot pull {pod.image} ({pod.waiting}): {where}"
    if pod.image != node.want_image:
        return (
            f"driver pod {pod.ref} still runs {pod.image}; the operator restarts it at pod-restart-required"
        )
    if not pod.ready:
        reason = f" ({pod.waiting})" if pod.waiting else ""
        return f"driver pod {pod.ref} runs {pod.image} but is not Ready{reason}"
    return None


def _validator_stall(node: NodeFacts, context: Context) -> str:
    if node.validator is None:
        return f"no validator pod (app={VALIDATOR_APP}) on the node"
    if not node.validator_ready:
        return (
            f"validator pod {node.validator.ref} is not Ready; the operator fails the node after "
            f"{VALIDATION_TIMEOUT}s of this"
        )
    return "validator pod Ready; waiting for the operator to move on"


def _failed(node: NodeFacts, context: Context) -> str:
    why = node.events[-1] if node.events else "the operator gave no reason in an event"
    extra = ""
    refusals = budget_refusals(evicted(node.pods, context.rules), context.budgets)
    if refusals:
        extra = "; " + "; ".join(refusals)
    driver = _driver_stall(node, context)
    if driver and node.driver is not None and node.driver.waiting:
        extra += f"; {driver}"
    return f"upgrade failed: {why}{extra}"


_BY_STATE = {
    State.REQUIRED: _slot_stall,
    State.WAIT_FOR_JOBS: _jobs_stall,
    State.POD_DELETION: _eviction_stall,
    State.DRAIN: _eviction_stall,
    State.POD_RESTART: _restart_stall,
    State.VALIDATION: _validator_stall,
    State.FAILED: _failed,
    State.NODE_MAINTENANCE: _maintenance,
    State.POST_MAINTENANCE: _maintenance,
}


# --- what the command prints -------------------------------------------------------------------------


@dataclass
class Tracker:
    """Per node, the last state seen and since when; the last stall said, so it is said once."""

    states: dict[str, tuple[str, float]] = field(default_factory=dict)
    said: dict[str, str] = field(default_factory=dict)

    def observe(self, name: str, state: str, now: float) -> str | None:
        """A node's state as seen now (a watch event or a read): the line for a transition, if any.
        The first sight of a node is no transition: it is where the rollout found it."""
        before = self.states.get(name)
        if before is not None and before[0] == state:
            return None
        self.states[name] = (state, now)
        if before is None:
            return None
        return f"{name}: {before[0] or '(none)'} -> {state or '(none)'}"

    def transitions(self, nodes: Iterable[NodeFacts], now: float) -> list[str]:
        return [line for node in nodes if (line := self.observe(node.name, node.state, now))]

    def waited(self, name: str, now: float) -> float:
        state = self.states.get(name)
        return now - state[1] if state else 0.0

    def stalls(self, nodes: Iterable[NodeFacts], context: Context, now: float, after: float) -> list[str]:
        """The stall of each node that has been in its state longer than `after`, once per reason."""
        lines = []
        for node in nodes:
            waited = self.waited(node.name, now)
            if waited < after or node.done:
                continue
            text = stall(node, Context(context.rules, context.budgets, context.tags, context.matrix, waited))
            if self.said.get(node.name) != text:
                self.said[node.name] = text
                how_long = f" for {show(waited)}" if waited >= 1 else ""
                lines.append(f"{node.name}: {node.state or '(no state)'}{how_long}: {text}")
        return lines
