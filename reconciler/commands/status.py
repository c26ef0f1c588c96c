"""`gpudrv status` and `gpudrv report`: where every GPU node stands, computed now from the cluster
(report: or from the manifests under --from; -o html is the fleet page, commands/fleet_page.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.adapters import desired
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.files import declared_nodes, manifests
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import ERROR, OK, Output, clusters, cuda_gates, fleet_page
from reconciler.commands.clusters import Target
from reconciler.core.audit import audit, cluster_names
from reconciler.core.contract.desired import Desired
from reconciler.core.contract.driver_images import Want, Wants, kernel_next
from reconciler.core.cuda import cuda_workloads
from reconciler.core.images import tags
from reconciler.core.images.matrix import Matrix
from reconciler.core.images.tags import Node
from reconciler.core.rollout import rollout, supervise
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.upgrade import FAILURE, LiveNode, State
from reconciler.core.views import reads
from reconciler.core.views.fleet_page import reasons_by_node
from reconciler.render import document
from reconciler.render.clusters import with_clusters
from reconciler.render.upgrades import (
    Row,
    Upcoming,
    next_json,
    report_json,
    report_text,
    status_json,
    status_table,
)


def run_status(from_dir: Path | None, matrix_path: Path, source: NodeSource, output: Output) -> int:
    rows = status_rows(from_dir, matrix_path, source)
    if output.structured:
        print(document.text({**status_json(rows), "desired": source.desired.as_json()}, output))
    else:
        print(status_table(rows))
    return OK


def status_rows(from_dir: Path | None, matrix_path: Path, source: NodeSource) -> list[Row]:
    in_matrix = valid_matrix(matrix_path).tags()
    declared = {node.name: node for node in manifests.load_nodes(from_dir)} if from_dir else {}
    contract = source.contract()
    fleet = Fleet(source.live.gateway)
    live = sorted(fleet.gpu_nodes(source.selector, reads.for_contract(contract)), key=lambda node: node.name)
    source.require(len(live))
    budgets = fleet.budgets() if live else []
    state = source.desired
    found = desired.wants(
        state, [_declared_driver(node.node, declared.get(node.name), state) for node in live]
    )
    wants = {want.node.name: want for want in found.wants}
    upcoming = upcoming_by_node(found, in_matrix)
    # One pod list for every node a budget may hold, not a request per node.
    held = [node.name for node in live if _drain_ahead(node, declared.get(node.name))]
    pods = fleet.pods_on_nodes(held)
    return [
        replace(
            _row(
                node,
                declared.get(node.name),
                wants[node.name],
                in_matrix=in_matrix,
                budgets=budgets,
                pods=pods,
            ),
            upcoming=upcoming.get(node.name),
        )
        for node in live
    ]


def upcoming_by_node(found: Wants, in_matrix: frozenset[str]) -> dict[str, Upcoming]:
    """Each node's next kernel (when it is not the running one) and its image's status there."""
    found_next = {}
    for want in found.next_wants:
        finding = audit.check_next(want, in_matrix)
        status = "OK" if finding is None else str(finding.status)
        found_next[want.node.name] = Upcoming(kernel_next(want), want.tag, status)
    return found_next


def _declared_driver(live: Node, declared: Node | None, state: Desired) -> Node:
    """Lab mode's desired image: the node's live facts (kernel, OS) with the driver its manifest
    declares, as the operator's resources give theirs; the live node as it is where nothing is declared."""
    if state.operator or declared is None:
        return live
    driver = {key: declared.labels[key] for key in upgrade.DRIVER_KEYS if key in declared.labels}
    return Node(live.name, {**live.labels, **driver}, live.origin)


def _row(
    live: LiveNode,
    desired: Node | None,
    want: Want,
    *,
    in_matrix: frozenset[str],
    budgets: list[budget.Budget],
    pods: Mapping[str, list[budget.Pod]],
) -> Row:
    running = upgrade.driver(live.node.labels)
    wanted = upgrade.driver(desired.labels) if desired else None
    tag = want.tag
    return Row(
        node=live.name,
        driver=running.version if running else rollout.running_branch(live.node.labels),
        desired=wanted.version if wanted else (want.resource.version if want.resource else None),
        tag=tag,
        in_matrix=tag in in_matrix if tag else False,
        state=live.node.labels.get(tags.UPGRADE_STATE),
        schedulable=not live.unschedulable,
        blocker=_blocker(live, desired, budgets, pods),
    )


def _blocker(
    live: LiveNode, desired: Node | None, budgets: list[budget.Budget], pods: Mapping[str, list[budget.Pod]]
) -> str | None:
    """What holds the node: a recorded failure, a state lab mode does not drive, the operator's skip
    label, or a budget that refuses its drain now."""
    if failure := live.annotations.get(FAILURE):
        return failure
    if (refused := upgrade.state_gate(live)) is not None:
        return refused.detail
    state = upgrade.state_of(live.node.labels)
    if upgrade.skipped(live.node.labels) and state in (None, State.DONE, State.REQUIRED):
        return _skip_blocker(live, desired, state)
    if not _drain_ahead(live, desired):
        return None
    found = budget.blockers(pods.get(live.name, []), budgets)
    return "; ".join(b.message for b in found) or None


def _skip_blocker(live: LiveNode, desired: Node | None, state: State | None) -> str | None:
    """The skip label on a node with an upgrade ahead: gpudrv's hold (a staged operator rollout) or
    someone else's."""
    pending = desired is not None and upgrade.needs_upgrade(desired, live) is not None
    if not (pending or state is State.REQUIRED):
        return None
    if held := live.annotations.get(supervise.HELD):
        return f"held by gpudrv ({upgrade.SKIP_LABEL}=true, {held})"
    return f"{upgrade.SKIP_LABEL}=true: skipped (not set by gpudrv)"


def _drain_ahead(live: LiveNode, desired: Node | None) -> bool:
    """A drain is due or under way on the node, and no failure is recorded: a budget may hold it."""
    if live.annotations.get(FAILURE) or upgrade.state_gate(live) is not None:
        return False
    state = upgrade.state_of(live.node.labels)
    if upgrade.skipped(live.node.labels) and state in (None, State.DONE, State.REQUIRED):
        return False
    pending = desired is not None and upgrade.needs_upgrade(desired, live) is not None
    if not pending and state in (None, State.DONE, State.FAILED):
        return False
    return state in (None, *upgrade.BEFORE_CORDON, State.WAIT_FOR_JOBS, State.POD_DELETION, State.DRAIN)


def run_report(matrix_path: Path, source: NodeSource, output: Output, registry_images: bool = True) -> int:
    parsed = valid_matrix(matrix_path)
    if output is Output.HTML:
        return fleet_page.run(matrix_path, parsed, page_parts(source, registry_images), source=source)
    facts = report_facts(source, parsed.tags())
    data = report_json(facts.nodes, facts.skew, len(parsed.rows), facts.next_skew)
    if output.structured:
        print(document.text({**data, "desired": source.desired.as_json()}, output))
    else:
        print(report_text(data))
    return OK


@dataclass(frozen=True)
class ReportFacts:
    """report's figures for one place: the per-node facts, SKEW and NEXT_SKEW."""

    nodes: list[dict[str, Any]]
    skew: int
    next_skew: int


def report_facts(source: NodeSource, in_matrix: frozenset[str], cluster: str | None = None) -> ReportFacts:
    """Text and JSON need the labels alone: one list, each node keeping what the contract reads.
    `cluster`: one of many clusters, its nodes named CLUSTER/NODE."""
    contract = source.contract()
    nodes = sorted(source.gpu_nodes(reads.for_contract(contract)), key=lambda node: node.name)
    source.require(len(nodes))
    found = desired.wants(source.desired, nodes)
    result = audit.audit_wants(found, in_matrix)
    upcoming = upcoming_by_node(found, in_matrix)
    per_node = [
        {
            "node": f"{cluster}/{want.node.name}" if cluster else want.node.name,
            "tag": want.tag,
            "upgrade_state": want.node.labels.get(tags.UPGRADE_STATE),
            **next_json(upcoming.get(want.node.name)),
        }
        for want in found.wants
    ]
    skew = sum(f.status is audit.Status.MISSING for f in result.findings)
    next_skew = sum(f.status is audit.Status.NEXT_MISSING for f in result.findings)
    return ReportFacts(per_node, skew, next_skew)


def page_parts(source: NodeSource, registry_images: bool) -> fleet_page.Parts:
    """What the fleet page shows of one place: its GPU nodes and their images, what holds them, and
    (live) the CUDA workloads on them."""
    state = source.desired  # the resources first: a broken one is said before any node is read
    live = sorted(_report_nodes(source), key=lambda node: node.name)
    source.require(len(live))
    found = desired.wants(state, [n.node for n in live])
    if source.from_dir is not None:
        return fleet_page.Parts(found, live, reasons_by_node({node.name: node.annotations for node in live}))
    fleet = Fleet(source.live.gateway)
    pods = fleet.pods_on_nodes([node.name for node in live])  # one list for both
    moving = rollout.moving(found.wants)
    workloads = cuda_gates.fleet_rows([node.node for node in live], pods, moving, registry_images)
    return fleet_page.Parts(found, live, _holds(fleet, live, pods), workloads)


def _report_nodes(source: NodeSource) -> list[LiveNode]:
    """The GPU nodes: live, or as the manifests under --from declare them."""
    if source.from_dir is not None:
        return [node for node in declared_nodes.gpu_nodes(source.from_dir) if source.selects(node.node)]
    return Fleet(source.live.gateway).gpu_nodes(source.selector)


def _holds(fleet: Fleet, nodes: list[LiveNode], pods: Mapping[str, list[budget.Pod]]) -> dict[str, str]:
    """What holds each live node, as status's BLOCKER says it."""
    budgets = fleet.budgets() if nodes else []
    return {node.name: held for node in nodes if (held := _blocker(node, None, budgets, pods))}


# --- many clusters (--cluster, --all-clusters): each read on its own thread, put together -----------
# -o json: each entry of `clusters` carries the desired state its rows were computed under (read_each).


def report_many(targets: Sequence[Target], matrix_path: Path, output: Output, registry_images: bool) -> int:
    parsed = valid_matrix(matrix_path)
    if output is Output.HTML:
        return _page(targets, matrix_path, parsed, registry_images)
    in_matrix = parsed.tags()
    outcomes = clusters.read_each(targets, lambda t, source: report_facts(source, in_matrix, t.name))
    done = [outcome.result for outcome in outcomes if outcome.result is not None]
    data = report_json(
        [node for facts in done for node in facts.nodes],
        sum(facts.skew for facts in done),
        len(parsed.rows),
        sum(facts.next_skew for facts in done),
    )
    # report's own ok is always true: a cluster that was read is listed as ok
    read = [clusters.listed(o, lambda facts: (True, len(facts.nodes))) for o in outcomes]
    if output.structured:
        print(document.text(with_clusters(data, read), output))
    elif done:
        print(f"CLUSTERS={','.join(o.target.name for o in outcomes if o.result is not None)}")
        print(report_text(data))
    return ERROR if clusters.report_errors(outcomes) else OK


def status_many(targets: Sequence[Target], matrix_path: Path, output: Output) -> int:
    def one(target: Target, source: NodeSource) -> list[Row]:
        rows = status_rows(target.fleet, matrix_path, source)
        return [_in_cluster(row, target.name) for row in rows]

    outcomes = clusters.read_each(targets, one, desired=True)  # git's desired state, as status --from
    rows = [row for outcome in outcomes for row in outcome.result or ()]
    read = [clusters.listed(o, lambda found: (True, len(found))) for o in outcomes]  # status's ok: always
    if output.structured:
        print(document.text(with_clusters(status_json(rows), read), output))
    elif rows or all(outcome.error is None for outcome in outcomes):
        print(status_table(rows))
    return ERROR if clusters.report_errors(outcomes) else OK


def _in_cluster(row: Row, cluster: str) -> Row:
    return replace(row, node=cluster_names.qualified(cluster, row.node))


def _page(targets: Sequence[Target], matrix_path: Path, parsed: Matrix, registry_images: bool) -> int:
    def one(target: Target) -> tuple[fleet_page.Parts, str]:
        source = target.source()
        parts = page_parts(source, registry_images)
        return _qualified(parts, target.name), fleet_page.describe_contract(parts.found)

    outcomes = clusters.fan_out(targets, one)
    done = [(o.target.name, o.result) for o in outcomes if o.result is not None]
    if done:
        parts = [part for _, (part, _) in done]
        merged = fleet_page.Parts(
            cluster_names.combined([part.found for part in parts]),
            [node for part in parts for node in part.nodes],
            {name: why for part in parts for name, why in part.reasons.items()},
            cuda_workloads.ordered(row for part in parts for row in part.workloads or ()),
        )
        names = [name for name, _ in done]
        failed = [o.target.name for o in outcomes if o.result is None]
        source = f"the cluster{'s' * (len(names) > 1)} {', '.join(names)} (live)"
        source += f"; not read: {', '.join(failed)}" if failed else ""
        mode = "; ".join(f"{name}: {contract}" for name, (_, contract) in done)
        fleet_page.show(matrix_path, parsed, merged, source, mode, clusters=[name for name, _ in done])
    return ERROR if clusters.report_errors(outcomes) else OK


def _qualified(parts: fleet_page.Parts, cluster: str) -> fleet_page.Parts:
    return fleet_page.Parts(
        cluster_names.wants(parts.found, cluster),
        [cluster_names.live_node(node, cluster) for node in parts.nodes],
        {cluster_names.qualified(cluster, name): why for name, why in parts.reasons.items()},
        [cluster_names.judged(row, cluster) for row in parts.workloads or ()],
    )
