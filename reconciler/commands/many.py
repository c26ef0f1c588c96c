"""`report` and `status` over several clusters of gpudrv.yaml (--cluster, --all-clusters): each cluster
read on its own thread (commands/clusters.py), the results put together with each node named
CLUSTER/NODE; a cluster that could not be read is one line on stderr and exit 2, after the others'
results in full."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from reconciler.adapters.sources import valid_matrix
from reconciler.commands import ERROR, OK, Output, clusters, fleet_page, status
from reconciler.commands.clusters import Outcome, Target
from reconciler.core import cluster_names, cuda_workloads
from reconciler.render import document
from reconciler.render.clusters import Read, with_clusters
from reconciler.render.upgrades import Row, report_json, report_text, status_json, status_table

T = TypeVar("T")


def report(targets: Sequence[Target], matrix_path: Path, output: Output, registry_images: bool) -> int:
    parsed = valid_matrix(matrix_path)
    if output is Output.HTML:
        return _page(targets, matrix_path, registry_images)
    in_matrix = parsed.tags()
    outcomes = clusters.fan_out(targets, lambda t: status.report_facts(t.source(), in_matrix, t.name))
    done = [outcome.result for outcome in outcomes if outcome.result is not None]
    data = report_json(
        [node for facts in done for node in facts.nodes],
        sum(facts.skew for facts in done),
        len(parsed.rows),
        sum(facts.next_skew for facts in done),
    )
    read = [_read(o, lambda facts: (True, len(facts.nodes))) for o in outcomes]  # report's ok: always
    if output.structured:
        print(document.text(with_clusters(data, read), output))
    elif done:
        print(f"CLUSTERS={','.join(o.target.name for o in outcomes if o.result is not None)}")
        print(report_text(data))
    return ERROR if clusters.report_errors(outcomes) else OK


def run_status(targets: Sequence[Target], matrix_path: Path, output: Output) -> int:
    def one(target: Target) -> list[Row]:
        rows = status.status_rows(target.fleet, matrix_path, target.source())
        return [_row(row, target.name) for row in rows]

    outcomes = clusters.fan_out(targets, one)
    rows = [row for outcome in outcomes for row in outcome.result or ()]
    read = [_read(o, lambda found: (True, len(found))) for o in outcomes]  # status's ok: always
    if output.structured:
        print(document.text(with_clusters(status_json(rows), read), output))
    elif rows or all(outcome.error is None for outcome in outcomes):
        print(status_table(rows))
    return ERROR if clusters.report_errors(outcomes) else OK


def _row(row: Row, cluster: str) -> Row:
    return replace(row, node=cluster_names.qualified(cluster, row.node))


def _read(outcome: Outcome[T], facts: Callable[[T], tuple[bool | None, int]]) -> Read:
    """The cluster as the output lists it: its verdict and node count from `facts`, or its error."""
    if outcome.result is None:
        return Read(outcome.target.name, error=outcome.error)
    ok, count = facts(outcome.result)
    return Read(outcome.target.name, ok, count)


def _page(targets: Sequence[Target], matrix_path: Path, registry_images: bool) -> int:
    parsed = valid_matrix(matrix_path)

    def one(target: Target) -> tuple[fleet_page.Parts, str]:
        source = target.source()
        parts = status.page_parts(source, registry_images)
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
