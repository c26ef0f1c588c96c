"""A driver rollout on a GPU Operator fleet, as data: gpudrv stages it, the operator carries it out.

The operator's upgrade controller (k8s-operator-libs pkg/upgrade, configured by the operator's
controllers/upgrade_controller.go) owns `nvidia.com/gpu-driver-upgrade-state`; gpudrv never writes it.
gpudrv's one lever is the operator's own skip label: a node labelled
`nvidia.com/gpu-driver-upgrade.skip=true` stays at upgrade-required (upgrade_state.go,
ProcessUpgradeRequiredNodes). gpudrv holds every moving node but the canary that way, marks the
holds it set with its own annotation (so it only ever removes its own), and releases the rest batch
by batch once the nodes before them are done. Everything here is pure: the facts read from the
cluster and the staging decided on them; core/rollout/staging.py runs the loop, core/rollout/stalls.py
explains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.images.tags import UPGRADE_STATE
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.budget import Pod, Role
from reconciler.core.upgrades.upgrade import SKIP_LABEL, State

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


def first_step(nodes: Sequence[NodeFacts], stages: Stages) -> Step:
    """Before anything moves: every moving node but the canary is held. The same on a rerun, whatever
    write the run before was killed at: the canary is what the operator already has in progress (a
    released batch that it has started, say), topped up to --canary with the first moving nodes gpudrv
    does not hold; every other moving node not held and not started is held again, before the driver
    resources change or anything is released. With nothing left unheld, the nodes before the held
    ones are done: the next batch goes."""
    candidates = moving(nodes)
    free = [node for node in candidates if not node.held]
    if not free and candidates:
        return next_step(nodes, stages)
    started = [node for node in free if node.state not in _IDLE]
    idle = [node for node in free if node.state in _IDLE]
    canary = tuple(node.name for node in [*started, *idle[: max(stages.canary - len(started), 0)]])
    return Step(
        hold=tuple(node.name for node in idle if node.name not in canary),
        in_flight=canary,
        finished=not candidates,
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
