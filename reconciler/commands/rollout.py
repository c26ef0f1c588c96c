"""`gpudrv apply --from DIR` on a GPU Operator fleet: gate, stage and watch the operator's own upgrade.

gpudrv never writes the upgrade-state label here: the operator's upgrade controller owns it. In order:
the image gate on the merged ref for every node the desired resources would move, the budget
preflight for the canary, the holds (the operator's skip label, marked as gpudrv's), the driver
resources applied from git (server-side apply, field manager gpudrv), then the operator's states
watched node by node, each stall explained, the held nodes released batch by batch, and a final
audit. Killed at any moment and run again, it goes on from the live states and its own holds.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.adapters import kube
from reconciler.adapters.cluster import gpu_operator, label_selector, node_watch, operator_fleet
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.files import operator_contract
from reconciler.adapters.sources import no_gpu_node
from reconciler.commands import FINDINGS, OK, driver_resources
from reconciler.commands import upgrades as up
from reconciler.core import audit, budget, supervise
from reconciler.core.label_selector import LabelSelector
from reconciler.core.operator import Contract, DriverResource, Kind, Mode
from reconciler.core.supervise import HELD, NodeFacts, Stages, Step
from reconciler.core.tags import GPU_PRESENT
from reconciler.core.upgrade import SKIP_LABEL as SKIP
from reconciler.core.upgrade import Images, State, image_gate
from reconciler.errors import GpudrvError

POLL_SECONDS = 2.0
STALL_SECONDS = 15.0  # a node this long in one state gets its stall explained
RECONNECT_SECONDS = 180.0
LIST_SECONDS = 30.0  # how long the driver resources wait for the node watch's first list


@dataclass(frozen=True)
class Settings:
    from_dir: Path
    matrix: Path
    merged_ref: str | None = None
    dry_run: bool = False
    stages: Stages = field(default_factory=Stages)
    timeout: float = 600.0  # per batch
    selector: LabelSelector | None = None
    operator_version: str | None = None
    release: bool = False
    allow_empty: bool = False  # --allow-empty: no GPU node the resources select is not an error
    hold_only: bool = False  # --hold: gates and holds, then leave the resources to their GitOps engine
    await_sync: bool = False  # --await-sync: never apply; wait for the engine to, then stage the rollout

    @property
    def applies(self) -> bool:
        """Does gpudrv write the driver resources itself (not when a GitOps engine does)?"""
        return not (self.hold_only or self.await_sync)


def wanted(from_dir: Path) -> bool:
    """Does DIR declare the GPU Operator's driver resources (operator mode)?"""
    return bool(operator_contract.load_resources(from_dir))


def run(settings: Settings, options: kube.Options, record: up.Record | None = None) -> int:
    """The staged rollout; `record` (-o json, yaml, github) gets the outcome of each node it moves."""
    record = record or up.Record()
    declared = operator_contract.load_resources(settings.from_dir)
    images = up.load_images(settings.matrix, settings.merged_ref)
    fleet = up.connect(options)
    if settings.release:
        return _release_all(fleet, settings, record)
    version = settings.operator_version or gpu_operator.live_operator_version(fleet.gateway)
    contract = operator_contract.offline_contract(settings.from_dir, version)
    record.mode = str(contract.mode)
    rules = _policy(fleet, contract)
    rollout = Rollout(fleet, contract, images, rules, settings, declared=declared, record=record)
    facts = rollout.start()
    if not facts and not settings.allow_empty:
        matching = f" matching -l {settings.selector.text()}" if settings.selector else ""
        where = f"in the cluster at {fleet.host}{matching} is selected by the driver resources in"
        raise no_gpu_node(f"no GPU node {where} {settings.from_dir}")
    for node in supervise.user_skipped(facts):
        print(supervise.skipped_line(node.name), flush=True)
    if not _gate(facts, images):
        print("nothing was changed")
        return FINDINGS
    found = driver_resources.changes(fleet.gateway, declared)
    if settings.applies:
        driver_resources.refuse_owned(found)  # before any node is touched
    step = supervise.first_step(facts, settings.stages)
    if step.finished:
        print(f"every node the driver resources select already runs its image ({len(facts)} node(s))")
        if not settings.dry_run and settings.applies:
            driver_resources.apply_needed(fleet.gateway, found, _say)
        return rollout.final_audit()
    refusals = rollout.preflight(step.in_flight)
    if refusals:
        for line in refusals:
            print(f"budget: {line}")
        print("the canary's drain would be refused: nothing was changed")
        return FINDINGS
    if settings.dry_run:
        _show_plan(step, facts, found, settings)
        for node in supervise.moving(facts):
            record.note(node.name, "planned", node.want_image)
        print("dry run: nothing was changed")
        return OK
    return _stage(rollout, step, found)


def _stage(rollout: Rollout, step: Step, found: list[driver_resources.Change]) -> int:
    """The changes, in order: the holds, the driver resources (applied, or awaited from the engine that
    owns them), then the operator's upgrade watched to the end."""
    settings, gateway = rollout.settings, rollout.fleet.gateway
    gateway.patience = RECONNECT_SECONDS
    gateway.notice = lambda text: print(f"waiting for the cluster: {text}", flush=True)
    rollout.hold(step.hold)
    if settings.hold_only:
        print(
            "the driver resources are left to their GitOps engine: once it has applied them, "
            "gpudrv apply --await-sync stages the rest of the rollout"
        )
        return OK

    def change() -> bool:
        if not settings.await_sync:
            driver_resources.apply_needed(gateway, found, _say)
            return True
        if driver_resources.await_sync(gateway, rollout.declared, settings.timeout, _say):
            return True
        print(
            f"timed out after {settings.timeout:.0f}s waiting for the GitOps engine to apply the driver "
            "resources; gpudrv's holds stay: run gpudrv apply --await-sync again to go on"
        )
        return False

    return rollout.watch(change)


def _say(line: str) -> None:
    print(line, flush=True)


def _policy(fleet: Fleet, contract: Contract) -> supervise.Policy:
    """The upgrade policy the operator will follow: the ClusterPolicy in git, else the live one."""
    policies = [item for item in contract.resources if item.kind is Kind.CLUSTER_POLICY]
    if not policies:
        policies = [
            item for item in gpu_operator.live_resources(fleet.gateway) if item.kind is Kind.CLUSTER_POLICY
        ]
    if not policies:
        raise GpudrvError("no ClusterPolicy in DIR or in the cluster: the operator has no upgrade policy")
    rules = supervise.policy(policies[0].upgrade_policy)
    if not rules.auto_upgrade:
        raise GpudrvError(
            f"{policies[0].where}: spec.driver.upgradePolicy.autoUpgrade is not true, so the operator's "
            "upgrade controller rolls nothing out (it removes the state labels); set it to stage a rollout"
        )
    return rules


def _gate(facts: list[NodeFacts], images: Images) -> bool:
    ok = True
    for node in supervise.moving(facts):
        if node.want_tag is None:
            print(f"{node.name}: image gate: no image tag for the node")
            ok = False
            continue
        gate = image_gate(node.want_tag, images)
        if not gate.ok:
            print(f"{node.name}: image gate: {gate.detail}")
            ok = False
    return ok


def _show_plan(
    step: Step, facts: list[NodeFacts], found: list[driver_resources.Change], settings: Settings
) -> None:
    for change in found:
        version = change.item.version or "-"
        if not change.needed:
            print(f"{change.item.ref}: as declared, nothing to apply")
        elif settings.applies:
            print(f"would apply {change.item.ref} (version {version}: {change.what()})")
        else:
            print(f"would wait for the GitOps engine to apply {change.item.ref} (version {version})")
    by_name = {node.name: node for node in facts}
    for name in step.in_flight:
        print(f"canary: {name} -> {by_name[name].want_image}")
    for name in step.hold:
        print(f"would hold: {name} -> {by_name[name].want_image} (skip label until the canary is done)")


def _release_all(fleet: Fleet, settings: Settings, record: up.Record) -> int:
    held = [
        live.node.name
        for live in fleet.gpu_nodes(settings.selector)
        if live.node.labels.get(SKIP) == "true" and HELD in live.annotations
    ]
    for name in held:
        fleet.patch_node(name, labels={SKIP: None}, annotations={HELD: None})
        print(f"{name}: released (gpudrv's skip label removed)")
        record.note(name, "released")
    print(f"released {len(held)} node(s) gpudrv held; the operator upgrades them now")
    return OK


class Rollout:
    def __init__(
        self,
        fleet: Fleet,
        contract: Contract,
        images: Images,
        rules: supervise.Policy,
        settings: Settings,
        *,
        declared: list[DriverResource],
        record: up.Record,
    ) -> None:
        self.fleet, self.contract, self.images, self.rules = fleet, contract, images, rules
        self.settings, self.declared, self.record = settings, declared, record
        self.tracker = supervise.Tracker()
        self.named: frozenset[str] = frozenset()  # the rollout's nodes: moving or held by someone else
        self.first: list[NodeFacts] = []  # start()'s read: where the rollout found the nodes
        self.budgets: list[budget.Budget] = []

    def read(self) -> list[NodeFacts]:
        """One consistent look at every GPU node the desired resources select."""
        gateway = self.fleet.gateway
        live = self.fleet.gpu_nodes(self.settings.selector)
        found = operator_contract.wants(self.contract, [item.node for item in live])
        by_name = {item.node.name: item for item in live}
        drivers = operator_fleet.driver_pods(gateway, self.contract.mode)
        validators = operator_fleet.validator_pods(gateway)
        selected = [want for want in found.wants if want.resource is not None]
        busy = [
            want.node.name
            for want in selected
            if supervise.state_of(want.node.labels) not in ("", State.DONE)
        ]
        events = operator_fleet.upgrade_events(gateway) if busy else {}
        pods = self.fleet.pods_on_nodes(busy)  # one pod list for them all, not a request per node
        facts = []
        for want in selected:
            name = want.node.name
            validator = validators.get(name)
            facts.append(
                NodeFacts(
                    name=name,
                    labels=want.node.labels,
                    annotations=by_name[name].annotations,
                    unschedulable=by_name[name].unschedulable,
                    want_image=want.image,
                    want_tag=want.tag,
                    want_driver=(
                        want.resource.name
                        if want.resource is not None and self.contract.mode is Mode.NVIDIA_DRIVER
                        else None
                    ),
                    driver=drivers.get(name),
                    validator=validator[0] if validator else None,
                    validator_ready=validator[1] if validator else False,
                    pods=tuple(pods.get(name, ())),
                    events=tuple(events.get(name, ())),
                )
            )
        self._note(facts)
        return facts

    def start(self) -> list[NodeFacts]:
        """The first read, which decides the rollout's nodes: those that move, and those someone else
        holds (named once, left alone); a pool that keeps its driver is none of them."""
        facts = self.first = self.read()
        self.named = frozenset(n.name for n in [*supervise.moving(facts), *supervise.user_skipped(facts)])
        self._note(facts)
        return facts

    def _note(self, facts: list[NodeFacts]) -> None:
        """Each of the rollout's nodes as of this read, for -o json (the last read is the answer)."""
        for node in facts:
            if node.name not in self.named:
                continue
            if node.skipped_by_someone_else and not node.done:
                self.record.note(node.name, "skipped", f"{SKIP}=true, not set by gpudrv")
            elif node.done:
                self.record.note(node.name, "done", node.want_image)
            elif node.state == State.FAILED:
                self.record.note(node.name, "failed", node.want_image)
            elif node.held:
                self.record.note(node.name, "held", node.want_image)
            else:
                self.record.note(node.name, "in-progress", node.state or None)

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
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for name in names:
            self.fleet.patch_node(name, labels={SKIP: "true"}, annotations={HELD: f"rollout since {stamp}"})
        if names:
            print(f"held {len(names)} node(s) with {SKIP}=true until the canary is done: {', '.join(names)}")

    def release(self, names: tuple[str, ...]) -> None:
        for name in names:
            self.fleet.patch_node(name, labels={SKIP: None}, annotations={HELD: None})
        print(f"released {len(names)} node(s) to the operator: {', '.join(names)}", flush=True)

    def watch(self, change: Callable[[], bool]) -> int:
        """`change` (apply the driver resources, or wait for the engine that does), then until every
        moving node is done, one failed, or a batch times out. The node watch starts first and alone
        reports transitions, in the order the API server made them (the operator can pass a state in
        less than a poll, and a read may be older than the last event); a read every POLL_SECONDS
        decides releases and stalls."""
        events: queue.Queue[node_watch.Listed | node_watch.Changed | node_watch.Deleted] = queue.Queue()
        selector = label_selector(f"{GPU_PRESENT}=true", self.settings.selector)
        watcher = node_watch.NodeWatch(self.fleet.gateway, events.put, selector=selector).start()
        try:
            self._found(self.first)  # where the nodes were before anything changed (the holds move none)
            self._drain(events, wait=LIST_SECONDS, until_listed=True)  # the watch sees every change
            if not change():
                return FINDINGS
            return self._follow(events)
        finally:
            watcher.stop()

    def _follow(
        self, events: queue.Queue[node_watch.Listed | node_watch.Changed | node_watch.Deleted]
    ) -> int:
        started = time.monotonic()
        refused_said: list[str] = []
        facts = self.read()
        while True:
            self._drain(events)
            now = time.monotonic()
            step = supervise.next_step(facts, self.settings.stages)
            if step.finished:
                return self.final_audit()
            if step.failed:
                self._say_stalls(facts, now, after=0.0)
                held = [node.name for node in facts if node.held]
                print(
                    f"upgrade failed on {', '.join(step.failed)}; {len(held)} node(s) stay held by gpudrv so "
                    "the operator takes no more: fix the cause and run gpudrv apply again, or "
                    "gpudrv apply --release to hand them to the operator"
                )
                return FINDINGS
            if step.release:
                refusals = self.preflight(step.release)
                if not refusals:
                    self.release(step.release)
                    started, refused_said = time.monotonic(), []
                    facts = self.read()
                    continue
                if refusals != refused_said:
                    refused_said = refusals
                    for line in refusals:
                        print(f"next batch waits: {line}", flush=True)
            self._say_stalls(facts, now, after=STALL_SECONDS)
            if now - started > self.settings.timeout:
                self._say_stalls(facts, now, after=0.0)
                waited_for = ", ".join(step.in_flight) or "the next batch"
                print(
                    f"timed out after {self.settings.timeout:.0f}s waiting for {waited_for}; "
                    "gpudrv's holds stay: run gpudrv apply again to go on"
                )
                return FINDINGS
            self._drain(events, wait=POLL_SECONDS)
            facts = self.read()

    def _found(self, facts: list[NodeFacts]) -> None:
        """Where the rollout finds the nodes: said for those an upgrade is under way on."""
        now = time.monotonic()
        for node in supervise.moving(facts):  # nodes that keep their driver are not the rollout's
            self.tracker.observe(node.name, node.state, now)
            if node.state not in ("", State.DONE, State.REQUIRED):
                print(f"{node.name}: at {node.state}", flush=True)

    def _drain(
        self,
        events: queue.Queue[node_watch.Listed | node_watch.Changed | node_watch.Deleted],
        wait: float = 0.0,
        until_listed: bool = False,
    ) -> None:
        """Print the transitions the watch has seen; with `wait`, for that long (`until_listed`: or until
        the watch's list has come, so that nothing changes before the watch sees it)."""
        deadline = time.monotonic() + wait
        while True:
            timeout = deadline - time.monotonic()
            try:
                event = events.get(timeout=timeout) if timeout > 0 else events.get_nowait()
            except queue.Empty:
                return
            self._show(event)
            if until_listed and isinstance(event, node_watch.Listed):
                return

    def _show(self, event: node_watch.Listed | node_watch.Changed | node_watch.Deleted) -> None:
        """The transitions of the rollout's nodes in one watch event."""
        nodes = [event.node] if isinstance(event, node_watch.Changed) else []
        if isinstance(event, node_watch.Listed):
            nodes = event.nodes
        for item in nodes:
            if item.name in self.tracker.states:
                line = self.tracker.observe(item.name, supervise.state_of(item.labels), time.monotonic())
                if line:
                    print(line, flush=True)

    def _say_stalls(self, facts: list[NodeFacts], now: float, after: float) -> None:
        waiting = [
            node for node in facts if not node.done and not node.held and not node.skipped_by_someone_else
        ]
        if not waiting:
            return
        if any(node.state in _EVICTING for node in waiting):
            self.budgets = self.fleet.budgets()
        context = supervise.Context(self.rules, self.budgets, self.images.merged, self.images.path)
        for line in self.tracker.stalls(waiting, context, now, after):
            print(line, flush=True)

    def final_audit(self) -> int:
        live = [item.node for item in self.fleet.gpu_nodes(self.settings.selector)]
        found = operator_contract.wants(self.contract, live)
        result = audit.audit_wants(found, self.images.working)
        self.record.audit = result
        print("audit: " + ("OK" if result.ok else "; ".join(f.line() for f in result.findings)))
        return OK if result.ok else FINDINGS


_EVICTING = frozenset(
    {
        State.POD_DELETION,
        State.DRAIN,
        State.FAILED,
    }
)
