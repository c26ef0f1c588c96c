"""An in-memory cluster and GPU Operator for the operator-mode rollout (core/rollout/staging.py), used by
tests/unit/test_staging.py.

The world is plain Python: nodes with the operator's state label, gpudrv's skip label and mark, the
driver pod's image; an upgrade controller that moves every node it may take one state per tick (as
k8s-operator-libs does: out of sync -> upgrade-required; not skipped -> cordon-required and on to
upgrade-done); a clock that ticks only when the rollout waits for the node watch. Every state change
is recorded, so the invariant of a staged rollout is checked on the whole history, across kills.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from reconciler.core.audit.audit import AuditResult, Finding, Status
from reconciler.core.images.tags import UPGRADE_STATE, Node
from reconciler.core.rollout.staging import Staging
from reconciler.core.rollout.staging_ports import Sighting
from reconciler.core.rollout.supervise import HELD, DriverPod, NodeFacts, Policy, Stages
from reconciler.core.upgrades.budget import Budget, Pod
from reconciler.core.upgrades.upgrade import SKIP_LABEL, Images, State

TAG = "570-5.15.0-119-generic-ubuntu22.04"
OLD = "nvcr.io/nvidia/driver:550-5.15.0-119-generic-ubuntu22.04"
NEW = f"nvcr.io/nvidia/driver:{TAG}"
IMAGES = Images(ref="main", path="matrix/support-matrix.csv", merged=frozenset({TAG}))
# The operator's in-place flow after upgrade-required, one state per tick.
PATH = (
    State.CORDON,
    State.WAIT_FOR_JOBS,
    State.POD_DELETION,
    State.POD_RESTART,
    State.VALIDATION,
    State.UNCORDON,
    State.DONE,
)
IN_PROGRESS = frozenset(PATH[:-1]) | {State.FAILED}


class Killed(Exception):
    """The process died right after this write: nothing after it happens."""


@dataclass
class MemNode:
    state: str = State.DONE
    image: str = OLD
    skip: bool = False
    held: str | None = None  # gpudrv's mark
    stuck: bool = False  # the operator never moves it past cordon-required
    fails: bool = False  # the operator fails it at pod-deletion-required

    def labels(self) -> dict[str, str]:
        labels = {UPGRADE_STATE: self.state} if self.state else {}
        return labels | ({SKIP_LABEL: "true"} if self.skip else {})


@dataclass
class World:
    """The cluster, its GPU Operator and the clock; also the rollout's StagingFleet, Clock and Inbox."""

    nodes: dict[str, MemNode]
    applied: bool = False  # the driver resources as git declares them are live
    max_parallel: int = 100  # the operator's maxParallelUpgrades
    kill_after: int | None = None
    time: float = 1_700_000_000.0
    writes: list[str] = field(default_factory=list)
    history: list[frozenset[str]] = field(default_factory=list)  # the nodes in progress, at each change
    events: list[Sighting] | None = None  # the node watch's, while it runs
    synced_by_engine_after: float | None = None  # --await-sync: the engine applies them this much later
    helm_renders: bool = False  # a mixed fleet: some resources are Helm's, gpudrv applies only its own
    pods: dict[str, list[Pod]] = field(default_factory=dict)
    pdbs: list[Budget] = field(default_factory=list)

    @classmethod
    def of(cls, count: int, **extra: object) -> World:
        return cls({f"n{i}": MemNode() for i in range(count)}, **extra)  # type: ignore[arg-type]

    # --- the operator ------------------------------------------------------------------------------

    def tick(self) -> None:
        want = NEW if self.applied else OLD
        changed = []
        for name, node in sorted(self.nodes.items()):
            before = node.state
            if node.state in ("", State.DONE) and node.image != want:
                node.state = State.REQUIRED
            elif node.state == State.REQUIRED and not node.skip and self._slot():
                node.state = State.CORDON
            elif node.state in PATH[:-1] and not node.stuck:
                if node.fails and node.state == State.POD_DELETION:
                    node.state = State.FAILED
                else:
                    node.state = PATH[PATH.index(State(node.state)) + 1]
                    node.image = want if node.state == State.VALIDATION else node.image
            if node.state != before:
                changed.append(name)
        self._changed(changed)

    def _slot(self) -> bool:
        return len(self.in_progress()) < self.max_parallel

    def in_progress(self) -> frozenset[str]:
        return frozenset(name for name, node in self.nodes.items() if node.state in IN_PROGRESS)

    def idle(self, ticks: int) -> None:
        """Time passes with no gpudrv running: the operator goes on."""
        for _ in range(ticks):
            self.time += 2.0
            self.tick()

    def _changed(self, names: list[str]) -> None:
        self.history.append(self.in_progress())
        if self.events is not None:
            self.events.extend(Sighting((self._node(name),)) for name in names)

    def _node(self, name: str) -> Node:
        return Node(name, self.nodes[name].labels())

    def _wrote(self, what: str, name: str | None = None) -> None:
        self.writes.append(what)
        if name is not None:
            self._changed([name])
        if self.kill_after is not None and len(self.writes) >= self.kill_after:
            raise Killed(what)

    # --- Clock and Inbox ----------------------------------------------------------------------------

    def now(self) -> float:
        return self.time

    def monotonic(self) -> float:
        return self.time

    def get(self, timeout: float) -> Sighting | None:
        assert self.events is not None, "the inbox is read only while the node watch runs"
        if not self.events and timeout > 0:
            self.time += timeout
            self.tick()
        return self.events.pop(0) if self.events else None

    # --- StagingFleet -------------------------------------------------------------------------------

    def read(self) -> list[NodeFacts]:
        return [
            NodeFacts(
                name=name,
                labels=node.labels(),
                annotations={HELD: node.held} if node.held else {},
                unschedulable=node.state in IN_PROGRESS,
                want_image=NEW,
                want_tag=TAG,
                driver=DriverPod("gpu-operator", f"driver-{name}", node.image, True),
            )
            for name, node in sorted(self.nodes.items())
        ]

    def pods_on_nodes(self, names: Collection[str]) -> dict[str, list[Pod]]:
        return {name: list(self.pods.get(name, [])) for name in names}

    def budgets(self) -> list[Budget]:
        return list(self.pdbs)

    def compare_resources(self, applies: bool) -> None:
        pass

    def planned_resources(self, applies: bool) -> list[str]:
        return ["ClusterPolicy/gpu-cluster-policy: as declared, nothing to apply"] if self.applied else []

    def writing(self) -> None:
        pass

    def hold(self, name: str, why: str) -> None:
        self.nodes[name].skip, self.nodes[name].held = True, why
        self._wrote(f"hold {name}", name)

    def release(self, name: str) -> None:
        self.nodes[name].skip, self.nodes[name].held = False, None
        self._wrote(f"release {name}", name)

    def apply_resources(self) -> None:
        if not self.applied:  # as apply_needed: a resource already as declared gets no request
            self.applied = not self.helm_renders  # Helm's part waits for its engine
            self._wrote("apply")

    def others_apply(self) -> bool:
        return self.helm_renders and not self.applied

    def await_sync(self, timeout: float) -> bool:
        if self.synced_by_engine_after is None or self.synced_by_engine_after > timeout:
            self.time += timeout
            return False
        self.time += self.synced_by_engine_after
        self.applied = True
        return True

    @contextlib.contextmanager
    def node_watch(self) -> Iterator[World]:
        self.events = [Sighting(tuple(self._node(name) for name in sorted(self.nodes)), listed=True)]
        try:
            yield self
        finally:
            self.events = None

    def audit(self) -> AuditResult:
        behind = [name for name, node in sorted(self.nodes.items()) if node.image != NEW and not node.skip]
        findings = tuple(Finding(name, Status.MISSING, f"{name} runs {OLD}") for name in behind)
        return AuditResult(audited=tuple(sorted(self.nodes)), findings=findings)


@dataclass(frozen=True)
class Settings:
    stages: Stages = field(default_factory=Stages)
    timeout: float = 600.0
    dry_run: bool = False
    hold: bool = False
    await_sync: bool = False

    @property
    def applies(self) -> bool:
        return not (self.hold or self.await_sync)


@dataclass
class Said:
    lines: list[str] = field(default_factory=list)
    notes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    result: AuditResult | None = None

    def say(self, line: str) -> None:
        self.lines.append(line)

    def note(self, name: str, outcome: str, detail: str | None = None) -> None:
        self.notes[name] = (outcome, detail)

    def audited(self, result: AuditResult) -> None:
        self.result = result


def rollout(world: World, settings: Settings | None = None) -> tuple[bool, Said]:
    said = Said()
    staging = Staging(
        world, world, said, settings or Settings(), rules=Policy(auto_upgrade=True), images=IMAGES
    )
    staging.start()
    return staging.run(), said


def finished_clean(world: World) -> bool:
    return all(
        node.state == State.DONE and node.image == NEW and not node.skip for node in world.nodes.values()
    )
