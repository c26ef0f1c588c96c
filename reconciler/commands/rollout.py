"""`gpudrv apply --from DIR` on a GPU Operator fleet: gate, stage and watch the operator's own upgrade.

gpudrv never writes the upgrade-state label here: the operator's upgrade controller owns it. The
rollout's order and decisions are core/rollout/staging.py's (Staging); this module wires it to the cluster:
ClusterStaging reads the nodes and writes the holds and the driver resources (server-side apply,
field manager gpudrv), the node watch feeds its inbox, and its lines and outcomes go to stdout and
the -o json record.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, replace

from reconciler.adapters import desired, kube
from reconciler.adapters.cluster import gpu_operator, label_selector, node_watch, operator_fleet
from reconciler.adapters.cluster.fleet import Fleet, SystemHost
from reconciler.adapters.sources import no_gpu_node
from reconciler.commands import FINDINGS, OK, cuda_gates, driver_resources, upgrades
from reconciler.commands.settings import ApplySettings
from reconciler.core.audit import audit
from reconciler.core.audit.audit import AuditResult
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import HELM_KINDS, Desired
from reconciler.core.contract.operator import Kind, Mode
from reconciler.core.images.tags import GPU_PRESENT
from reconciler.core.rollout import supervise
from reconciler.core.rollout.staging import Sighting, Staging
from reconciler.core.rollout.supervise import HELD, NodeFacts
from reconciler.core.upgrades.budget import Budget, Pod
from reconciler.core.upgrades.upgrade import SKIP_LABEL, State
from reconciler.errors import GpudrvError

RECONNECT_SECONDS = 180.0


def run(
    settings: ApplySettings, state: Desired, options: kube.Options, record: upgrades.Record | None = None
) -> int:
    """The staged rollout of `state` (adapters/desired.py: operator mode); `record` (-o json, yaml,
    github) gets the outcome of each node it moves."""
    record = record or upgrades.Record()
    images = upgrades.load_images(settings.matrix, settings.merged_ref)
    fleet = upgrades.connect(options)
    if settings.release:
        return _release_all(fleet, settings, record)
    state = desired.on_cluster(state, fleet.gateway)
    record.mode, record.desired = str(state.mode), state.as_json()
    settings = _helm_owned(settings, state)
    rules = _policy(fleet, state)
    cluster = ClusterStaging(fleet, state, settings.selector, images.working)
    staging = Staging(cluster, SystemHost(), Printed(record), settings, rules=rules, images=images)
    facts = staging.start()
    if not facts and not settings.allow_empty:
        matching = f" matching -l {settings.selector.text()}" if settings.selector else ""
        where = f"in the cluster at {fleet.host}{matching} is selected by the driver resources in"
        raise no_gpu_node(f"no GPU node {where} {settings.from_dir}")
    refused = cuda_gates.operator_refusals(fleet, state, settings.selector, settings.registry_images == "on")
    for name, detail in refused:
        _say(f"{name}: cuda gate: {detail}")
        record.note(name, "blocked", detail)
    if refused:
        _say("nothing was changed")
        return FINDINGS
    return OK if staging.run() else FINDINGS


def _helm_owned(settings: ApplySettings, state: Desired) -> ApplySettings:
    """Resources a Helm installation renders are Helm's (or its GitOps engine's) to write, never
    gpudrv's: without --hold, apply waits for that sync (--await-sync) and says so."""
    if not state.helm_owned or not settings.applies:
        return settings
    owners = ", ".join(dict.fromkeys(source.where for source in state.sources if source.kind in HELM_KINDS))
    _say(
        f"the driver resources are rendered from Helm values ({owners}): gpudrv never applies them; it "
        "holds the moving nodes and waits for Helm or the GitOps engine to apply them (--await-sync)"
    )
    return replace(settings, await_sync=True)


def _say(line: str) -> None:
    print(line, flush=True)


def _policy(fleet: Fleet, state: Desired) -> supervise.Policy:
    """The upgrade policy the operator will follow: the ClusterPolicy in git (the one that hands over to
    NVIDIADrivers too), else the live one."""
    policies = [item for item in (*state.declared, *state.rendered) if item.kind is Kind.CLUSTER_POLICY]
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


def _release_all(fleet: Fleet, settings: ApplySettings, record: upgrades.Record) -> int:
    held = [
        live.node.name
        for live in fleet.gpu_nodes(settings.selector)
        if live.node.labels.get(SKIP_LABEL) == "true" and HELD in live.annotations
    ]
    for name in held:
        fleet.patch_node(name, labels={SKIP_LABEL: None}, annotations={HELD: None})
        print(f"{name}: released (gpudrv's skip label removed)")
        record.note(name, "released")
    print(f"released {len(held)} node(s) gpudrv held; the operator upgrades them now")
    return OK


@dataclass
class Printed:
    """The rollout's lines on stdout (stderr under -o json, upgrades.as_data), its outcomes in `record`."""

    record: upgrades.Record

    def say(self, line: str) -> None:
        _say(line)

    def note(self, name: str, outcome: str, detail: str | None = None) -> None:
        self.record.note(name, outcome, detail)

    def audited(self, result: AuditResult) -> None:
        self.record.audit = result


WatchEvent = node_watch.Listed | node_watch.Changed | node_watch.Deleted


@dataclass
class WatchInbox:
    """The node watch's events, as the rollout sees them."""

    events: queue.Queue[WatchEvent] = field(default_factory=queue.Queue)

    def get(self, timeout: float) -> Sighting | None:
        try:
            event = self.events.get(timeout=timeout) if timeout > 0 else self.events.get_nowait()
        except queue.Empty:
            return None
        if isinstance(event, node_watch.Listed):
            return Sighting(tuple(event.nodes), listed=True)
        if isinstance(event, node_watch.Changed):
            return Sighting((event.node,))
        return Sighting(())


class ClusterStaging:
    """The rollout's reads and writes on a cluster (core.staging.StagingFleet)."""

    def __init__(
        self, fleet: Fleet, state: Desired, selector: LabelSelector | None, working: frozenset[str]
    ) -> None:
        self.fleet, self.gateway, self.state, self.contract = fleet, fleet.gateway, state, state.contract
        # What gpudrv compares with the cluster: the declared resources and the rendered ones (those
        # only awaited, never applied: see _helm_owned).
        self.declared = [*state.declared, *state.rendered]
        self.selector, self.working = selector, working  # the matrix's tags in the working tree
        self.found: list[driver_resources.Change] = []

    def read(self) -> list[NodeFacts]:
        """One consistent look at every GPU node the desired resources select."""
        gateway = self.gateway
        live = self.fleet.gpu_nodes(self.selector)
        found = desired.wants(self.state, [item.node for item in live])
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
        return facts

    def pods_on_nodes(self, names: Collection[str]) -> dict[str, list[Pod]]:
        return self.fleet.pods_on_nodes(names)

    def budgets(self) -> list[Budget]:
        return self.fleet.budgets()

    def compare_resources(self, applies: bool) -> None:
        self.found = driver_resources.changes(self.gateway, self.declared)
        if applies:
            driver_resources.refuse_owned(self.found)

    def planned_resources(self, applies: bool) -> list[str]:
        lines = []
        for change in self.found:
            version = change.item.version or "-"
            if not change.needed:
                lines.append(f"{change.item.ref}: as declared, nothing to apply")
            elif applies:
                lines.append(f"would apply {change.item.ref} (version {version}: {change.what()})")
            else:
                lines.append(
                    f"would wait for the GitOps engine to apply {change.item.ref} (version {version})"
                )
        return lines

    def writing(self) -> None:
        self.gateway.patience = RECONNECT_SECONDS
        self.gateway.notice = lambda text: print(f"waiting for the cluster: {text}", flush=True)

    def hold(self, name: str, why: str) -> None:
        self.fleet.patch_node(name, labels={SKIP_LABEL: "true"}, annotations={HELD: why})

    def release(self, name: str) -> None:
        self.fleet.patch_node(name, labels={SKIP_LABEL: None}, annotations={HELD: None})

    def apply_resources(self) -> None:
        driver_resources.apply_needed(self.gateway, self.found, _say)

    def await_sync(self, timeout: float) -> bool:
        return driver_resources.await_sync(self.gateway, self.declared, timeout, _say)

    @contextlib.contextmanager
    def node_watch(self) -> Iterator[WatchInbox]:
        inbox = WatchInbox()
        selector = label_selector(f"{GPU_PRESENT}=true", self.selector)
        watcher = node_watch.NodeWatch(self.gateway, inbox.events.put, selector=selector).start()
        try:
            yield inbox
        finally:
            watcher.stop()

    def audit(self) -> AuditResult:
        live = [item.node for item in self.fleet.gpu_nodes(self.selector)]
        return audit.audit_wants(desired.wants(self.state, live), self.working)
