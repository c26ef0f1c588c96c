"""The operator rollout's ports (core/rollout/staging_ports.py) on a cluster and stdout.

ClusterStaging (StagingFleet) reads the nodes and writes the holds and the driver resources
(server-side apply, field manager gpudrv: driver_resources.py), WatchInbox (Inbox) is the node
watch's events as the rollout sees them, and Printed (Output) sends its lines to stdout and its
outcomes to the -o json record. commands/rollout.py builds them and runs the loop.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.adapters import desired
from reconciler.adapters.cluster import driver_resources, label_selector, node_watch, operator_fleet
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.core.audit import audit
from reconciler.core.audit.audit import AuditResult
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.core.contract.operator import Mode
from reconciler.core.images.tags import GPU_PRESENT
from reconciler.core.rollout import supervise
from reconciler.core.rollout.staging_ports import Sighting
from reconciler.core.rollout.supervise import HELD, NodeFacts
from reconciler.core.upgrades.budget import Budget, Pod
from reconciler.core.upgrades.upgrade import SKIP_LABEL, State

RECONNECT_SECONDS = 180.0


def say(line: str) -> None:
    """One of the rollout's lines, on stdout at once."""
    print(line, flush=True)


class Outcomes(Protocol):
    """Where each node's outcome and the final audit go: commands/upgrades.py's Record (-o json, yaml,
    github)."""

    audit: AuditResult | None

    def note(self, name: str, outcome: str, detail: str | None = None) -> None: ...


@dataclass
class Printed:
    """The rollout's lines on stdout (stderr under -o json, upgrades.as_data), its outcomes in `record`."""

    record: Outcomes

    def say(self, line: str) -> None:
        say(line)

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
    """The rollout's reads and writes on a cluster (core/rollout/staging_ports.py's StagingFleet)."""

    def __init__(
        self, fleet: Fleet, state: Desired, selector: LabelSelector | None, working: frozenset[str]
    ) -> None:
        self.fleet, self.gateway, self.state, self.contract = fleet, fleet.gateway, state, state.contract
        # What gpudrv compares with the cluster: the declared resources and the rendered ones (those
        # only awaited, never applied: see commands/rollout.py's _helm_owned).
        self.declared = [*state.declared, *state.rendered]
        self.rendered = {item.ref for item in state.rendered}  # Helm's, to be awaited, never written
        self.selector, self.working = selector, working  # the matrix's tags in the working tree
        self.found: list[driver_resources.Change] = []

    def _ours(self) -> list[driver_resources.Change]:
        return [change for change in self.found if change.item.ref not in self.rendered]

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
            driver_resources.refuse_owned(self._ours())

    def planned_resources(self, applies: bool) -> list[str]:
        lines = []
        for change in self.found:
            version = change.item.version or "-"
            if not change.needed:
                lines.append(f"{change.item.ref}: as declared, nothing to apply")
            elif change.item.ref in self.rendered:
                lines.append(
                    f"would wait for Helm or its GitOps engine to apply {change.item.ref} "
                    f"(version {version}, rendered from Helm values)"
                )
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
        driver_resources.apply_needed(self.gateway, self._ours(), say)

    def others_apply(self) -> bool:
        return any(change.needed and change.item.ref in self.rendered for change in self.found)

    def await_sync(self, timeout: float) -> bool:
        return driver_resources.await_sync(self.gateway, self.declared, timeout, say)

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
