"""The operator-mode rollout's loop (`gpudrv apply` on a GPU Operator fleet), behind ports.

In order: the image gate for every node the desired resources would move, the budget preflight for
the canary, the holds (the operator's skip label, marked as gpudrv's), the driver resources applied
(or awaited from the GitOps engine that owns them), then the operator's states followed node by node,
each stall explained, the held nodes released batch by batch, and a final audit. Killed after any
write and run again, it goes on from the live states and its own holds: the holds come before the
driver resources change, and a rerun holds every moving node that is neither the canary nor started
before it writes anything else (supervise.first_step), so the operator never has more nodes than the
canary or the current batch. Its ports are staging_ports.py's: adapters/cluster/staging.py's on a
cluster, tests/unit/memory_operator.py's in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from reconciler.core.images.tags import Node
from reconciler.core.rollout import supervise
from reconciler.core.rollout.staging_ports import Clock, Inbox, Output, StagingFleet, StagingSettings
from reconciler.core.rollout.stalls import Context, Tracker
from reconciler.core.rollout.supervise import NodeFacts, Step
from reconciler.core.upgrades.budget import Budget
from reconciler.core.upgrades.upgrade import SKIP_LABEL, Images, State, image_gate

POLL_SECONDS = 2.0
STALL_SECONDS = 15.0  # a node this long in one state gets its stall explained
LIST_SECONDS = 30.0  # how long the driver resources wait for the node watch's first list
EVICTING = frozenset({State.POD_DELETION, State.DRAIN, State.FAILED})


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Staging:
    """One operator-mode rollout: `start` reads where the nodes are, `run` stages and follows it.
    Its result is whether it finished clean (exit 0) or stopped at a finding (exit 1)."""

    def __init__(
        self,
        fleet: StagingFleet,
        clock: Clock,
        output: Output,
        settings: StagingSettings,
        *,
        rules: supervise.Policy,
        images: Images,
    ) -> None:
        self.fleet, self.clock, self.output, self.settings = fleet, clock, output, settings
        self.rules, self.images = rules, images
        self.tracker = Tracker()
        self.named: frozenset[str] = frozenset()  # the rollout's nodes: moving or held by someone else
        self.first: list[NodeFacts] = []  # start()'s read: where the rollout found the nodes
        self.budgets: list[Budget] = []

    def start(self) -> list[NodeFacts]:
        """The first read, which decides the rollout's nodes: those that move, and those someone else
        holds (named once, left alone); a pool that keeps its driver is none of them."""
        facts = self.first = self.fleet.read()
        moving = [*supervise.moving(facts), *supervise.user_skipped(facts)]
        self.named = frozenset(node.name for node in moving)
        self._note(facts)
        return facts

    def read(self) -> list[NodeFacts]:
        facts = self.fleet.read()
        self._note(facts)
        return facts

    def run(self) -> bool:
        """After `start`: the gates, then the changes in order, then the operator's upgrade followed."""
        facts, settings = self.first, self.settings
        for node in supervise.user_skipped(facts):
            self.output.say(supervise.skipped_line(node.name))
        if not self._gate(facts):
            self.output.say("nothing was changed")
            return False
        self.fleet.compare_resources(settings.applies)  # before any node is touched
        step = supervise.first_step(facts, settings.stages)
        if step.finished:
            self.output.say(
                f"every node the driver resources select already runs its image ({len(facts)} node(s))"
            )
            if not settings.dry_run and settings.applies:
                self.fleet.apply_resources()
            return self.final_audit()
        refusals = self.preflight(step.in_flight)
        if refusals:
            for line in refusals:
                self.output.say(f"budget: {line}")
            self.output.say("the canary's drain would be refused: nothing was changed")
            return False
        if settings.dry_run:
            self._show_plan(step, facts)
            return True
        return self._stage(step)

    def _gate(self, facts: list[NodeFacts]) -> bool:
        ok = True
        for node in supervise.moving(facts):
            if node.want_tag is None:
                self.output.say(f"{node.name}: image gate: no image tag for the node")
                ok = False
                continue
            gate = image_gate(node.want_tag, self.images)
            if not gate.ok:
                self.output.say(f"{node.name}: image gate: {gate.detail}")
                ok = False
        return ok

    def _show_plan(self, step: Step, facts: list[NodeFacts]) -> None:
        for line in self.fleet.planned_resources(self.settings.applies):
            self.output.say(line)
        by_name = {node.name: node for node in facts}
        for name in step.in_flight:
            self.output.say(f"canary: {name} -> {by_name[name].want_image}")
        for name in step.hold:
            self.output.say(
                f"would hold: {name} -> {by_name[name].want_image} (skip label until the canary is done)"
            )
        for node in supervise.moving(facts):
            self.output.note(node.name, "planned", node.want_image)
        self.output.say("dry run: nothing was changed")

    def _stage(self, step: Step) -> bool:
        """The changes, in order: the holds, the driver resources (applied, or awaited from the engine
        that owns them), then the operator's upgrade followed to the end."""
        self.fleet.writing()
        self.hold(step.hold)
        if self.settings.hold:
            wants = {node.name: node.want_image for node in self.first}
            for name in step.in_flight:  # the canary: the operator takes it once the engine has synced
                self.output.note(name, "planned", wants.get(name))
            self.output.say(
                "the driver resources are left to their GitOps engine: once it has applied them, "
                "gpudrv apply --await-sync stages the rest of the rollout"
            )
            return True
        return self.watch(self._change)

    def _change(self) -> bool:
        settings = self.settings
        if not settings.await_sync:
            self.fleet.apply_resources()  # gpudrv's own; those Helm renders are awaited below
            if not self.fleet.others_apply():
                return True
        if self.fleet.await_sync(settings.timeout):
            return True
        self.output.say(
            f"timed out after {settings.timeout:.0f}s waiting for the GitOps engine to apply the driver "
            "resources; gpudrv's holds stay: run gpudrv apply --await-sync again to go on"
        )
        return False

    def preflight(self, names: tuple[str, ...]) -> list[str]:
        """The budgets that would refuse the evictions of these nodes' pods, all together, now."""
        if not names:
            return []
        pods = [pod for found in self.fleet.pods_on_nodes(names).values() for pod in found]
        evicted = supervise.evicted(pods, self.rules)
        if not evicted:
            return []
        return supervise.budget_refusals(evicted, self.fleet.budgets())

    def hold(self, names: tuple[str, ...]) -> None:
        why = f"rollout since {stamp(self.clock.now())}"
        wants = {node.name: node.want_image for node in self.first}
        for name in names:
            self.fleet.hold(name, why)
            self.output.note(name, "held", wants.get(name))  # as of now; a later read says more
        if names:
            until = f"{SKIP_LABEL}=true until the canary is done"
            self.output.say(f"held {len(names)} node(s) with {until}: {', '.join(names)}")

    def release(self, names: tuple[str, ...]) -> None:
        for name in names:
            self.fleet.release(name)
        self.output.say(f"released {len(names)} node(s) to the operator: {', '.join(names)}")

    def watch(self, change: Callable[[], bool]) -> bool:
        """`change` (apply the driver resources, or wait for the engine that does), then until every
        moving node is done, one failed, or a batch times out. The node watch starts first and alone
        reports transitions, in the order the API server made them (the operator can pass a state in
        less than a poll, and a read may be older than the last event); a read every POLL_SECONDS
        decides releases and stalls."""
        with self.fleet.node_watch() as inbox:
            self._found(self.first)  # where the nodes were before anything changed (the holds move none)
            self._drain(inbox, wait=LIST_SECONDS, until_listed=True)  # the watch sees every change
            if not change():
                return False
            return self._follow(inbox)

    def _follow(self, inbox: Inbox) -> bool:
        started = self.clock.monotonic()
        refused_said: list[str] = []
        facts = self.read()
        while True:
            self._drain(inbox)
            now = self.clock.monotonic()
            step = supervise.next_step(facts, self.settings.stages)
            if step.finished:
                return self.final_audit()
            if step.failed:
                self._say_stalls(facts, now, after=0.0)
                self._say_failed(step, facts)
                return False
            if step.release:
                refusals = self.preflight(step.release)
                if not refusals:
                    self.release(step.release)
                    started, refused_said = self.clock.monotonic(), []
                    facts = self.read()
                    continue
                if refusals != refused_said:
                    refused_said = refusals
                    for line in refusals:
                        self.output.say(f"next batch waits: {line}")
            self._say_stalls(facts, now, after=STALL_SECONDS)
            if now - started > self.settings.timeout:
                self._say_stalls(facts, now, after=0.0)
                waited_for = ", ".join(step.in_flight) or "the next batch"
                self.output.say(
                    f"timed out after {self.settings.timeout:.0f}s waiting for {waited_for}; "
                    "gpudrv's holds stay: run gpudrv apply again to go on"
                )
                return False
            self._drain(inbox, wait=POLL_SECONDS)
            facts = self.read()

    def _say_failed(self, step: Step, facts: list[NodeFacts]) -> None:
        held = [node.name for node in facts if node.held]
        self.output.say(
            f"upgrade failed on {', '.join(step.failed)}; {len(held)} node(s) stay held by gpudrv so "
            "the operator takes no more: fix the cause and run gpudrv apply again, or "
            "gpudrv apply --release to hand them to the operator"
        )

    def _found(self, facts: list[NodeFacts]) -> None:
        """Where the rollout finds the nodes: said for those an upgrade is under way on."""
        now = self.clock.monotonic()
        for node in supervise.moving(facts):  # nodes that keep their driver are not the rollout's
            self.tracker.observe(node.name, node.state, now)
            if node.state not in ("", State.DONE, State.REQUIRED):
                self.output.say(f"{node.name}: at {node.state}")

    def _drain(self, inbox: Inbox, wait: float = 0.0, until_listed: bool = False) -> None:
        """Say the transitions the watch has seen; with `wait`, for that long (`until_listed`: or until
        the watch's list has come, so that nothing changes before the watch sees it)."""
        deadline = self.clock.monotonic() + wait
        while True:
            event = inbox.get(max(deadline - self.clock.monotonic(), 0.0))
            if event is None:
                return
            self._show(event.nodes)
            if until_listed and event.listed:
                return

    def _show(self, nodes: Iterable[Node]) -> None:
        """The transitions of the rollout's nodes in one watch event."""
        for item in nodes:
            if item.name in self.tracker.states:
                state = supervise.state_of(item.labels)
                line = self.tracker.observe(item.name, state, self.clock.monotonic())
                if line:
                    self.output.say(line)

    def _say_stalls(self, facts: list[NodeFacts], now: float, after: float) -> None:
        waiting = [
            node for node in facts if not node.done and not node.held and not node.skipped_by_someone_else
        ]
        if not waiting:
            return
        if any(node.state in EVICTING for node in waiting):
            self.budgets = self.fleet.budgets()
        context = Context(self.rules, self.budgets, self.images.merged, self.images.path)
        for line in self.tracker.stalls(waiting, context, now, after):
            self.output.say(line)

    def _note(self, facts: list[NodeFacts]) -> None:
        """Each of the rollout's nodes as of this read, for -o json (the last read is the answer)."""
        for node in facts:
            if node.name not in self.named:
                continue
            if node.skipped_by_someone_else and not node.done:
                self.output.note(node.name, "skipped", f"{SKIP_LABEL}=true, not set by gpudrv")
            elif node.done:
                self.output.note(node.name, "done", node.want_image)
            elif node.state == State.FAILED:
                self.output.note(node.name, "failed", node.want_image)
            elif node.held:
                self.output.note(node.name, "held", node.want_image)
            else:
                self.output.note(node.name, "in-progress", node.state or None)

    def final_audit(self) -> bool:
        result = self.fleet.audit()
        self.output.audited(result)
        self.output.say("audit: " + ("OK" if result.ok else "; ".join(f.line() for f in result.findings)))
        return result.ok
