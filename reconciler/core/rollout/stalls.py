"""Why a node of an operator-mode rollout is where it is, in words a person acts on, and the tracker
that says each transition and each stall once.

The states and their meaning are the operator's upgrade controller's (k8s-operator-libs pkg/upgrade);
core/rollout/supervise.py has the facts read from the cluster and the staging.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from reconciler.core.base.duration import show
from reconciler.core.rollout.supervise import (
    VALIDATION_TIMEOUT,
    VALIDATOR_APP,
    NodeFacts,
    Policy,
    budget_refusals,
    evicted,
)
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.upgrade import SKIP_LABEL, State


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
