"""The reconcile loop's ports on real things (adapters/incluster/reconcile_ports.py): the Prometheus series
the Exporter keeps, the inbox's batches, the events it posts, the node news it translates."""

from __future__ import annotations

import threading
import time

from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.cluster.events import NodeEvent
from reconciler.adapters.cluster.node_watch import Changed, Deleted, Listed
from reconciler.adapters.git.sync import Credentials, Source
from reconciler.adapters.incluster.reconcile_ports import Exporter, QueueInbox, node_news
from reconciler.adapters.serving.metrics import Metrics
from reconciler.core.audit.audit import Finding, Status
from reconciler.core.images.tags import Node
from reconciler.core.incluster.reconcile_ports import (
    AVAILABLE,
    MISSING,
    CommitFetched,
    Event,
    Figures,
    NodeChanged,
    NodeDeleted,
    NodesListed,
    Snapshot,
    Tally,
)
from reconciler.render.reconcile import change_line, event_message

SOURCE = Source("https://token@git.example/fleet.git", "main", Credentials())


class Sink:
    def __init__(self) -> None:
        self.posted: list[NodeEvent] = []

    def post(self, event: NodeEvent) -> None:
        self.posted.append(event)


def series(measured: Metrics, name: str) -> list[tuple[dict[str, str], float]]:
    text = measured.exposition()[0].decode()
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def exporter() -> tuple[Exporter, Metrics, Sink]:
    measured, sink = Metrics(), Sink()
    return Exporter(measured, sink, SOURCE, change_line, event_message), measured, sink  # type: ignore[arg-type]


def test_figures_set_the_gauges_and_a_series_goes_only_when_it_is_no_longer_true() -> None:
    out, measured, _ = exporter()
    out.export(Figures(True, 3, {"a": "t1", "b": "t2"}, frozenset({"c"}), 1, {"upgrade-done": 2, "none": 1}))
    assert series(measured, "gpudrv_node_image_missing") == [
        ({"node": "a", "tag": "t1"}, 1),
        ({"node": "b", "tag": "t2"}, 1),
    ]
    assert series(measured, "gpudrv_node_tag_invalid") == [({"node": "c"}, 1)]
    assert [value for _, value in series(measured, "gpudrv_gpu_nodes_missing_image")] == [2]
    assert [value for _, value in series(measured, "gpudrv_leader")] == [1]
    # a's tag changed, b was fixed, c got a tag, d is new; an upgrade state seen before keeps its series.
    out.export(Figures(True, 4, {"a": "t3", "d": "t1"}, frozenset(), 0, {"none": 4}))
    assert sorted(
        labels["node"] + "=" + labels["tag"] for labels, _ in series(measured, "gpudrv_node_image_missing")
    ) == [
        "a=t3",
        "d=t1",
    ]
    assert series(measured, "gpudrv_node_tag_invalid") == []
    states = {labels["state"]: value for labels, value in series(measured, "gpudrv_gpu_nodes_upgrade_state")}
    assert states == {"upgrade-done": 2, "none": 4}
    # A standby: every per-node series gone, the figures zero.
    out.export(Figures())
    assert series(measured, "gpudrv_node_image_missing") == []
    assert series(measured, "gpudrv_gpu_nodes_upgrade_state") == []
    for name in (
        "gpudrv_leader",
        "gpudrv_gpu_nodes",
        "gpudrv_gpu_nodes_missing_image",
        "gpudrv_fleet_problems",
    ):
        assert [value for _, value in series(measured, name)] == [0], name


def test_a_next_kernel_series_goes_when_its_kernel_or_tag_changes_or_the_problem_does() -> None:
    out, measured, _ = exporter()
    name = "gpudrv_node_next_kernel_image_missing"
    out.export(
        Figures(True, 2, next_missing={"a": ("6.1.0-9-generic", "t1"), "b": ("6.1.0-9-generic", "t1")})
    )
    assert series(measured, name) == [
        ({"node": "a", "kernel": "6.1.0-9-generic", "tag": "t1"}, 1),
        ({"node": "b", "kernel": "6.1.0-9-generic", "tag": "t1"}, 1),
    ]
    assert [value for _, value in series(measured, "gpudrv_gpu_nodes_missing_image")] == [0]
    # a's next kernel moved on, b's was fixed.
    out.export(Figures(True, 2, next_missing={"a": ("6.1.0-10-generic", "t2")}))
    assert series(measured, name) == [({"node": "a", "kernel": "6.1.0-10-generic", "tag": "t2"}, 1)]
    out.export(Figures())
    assert series(measured, name) == []


def test_label_values_are_escaped_in_the_exposition() -> None:
    out, measured, _ = exporter()
    hostile = 'n"} 1\ngpudrv_leader 7'
    out.export(Figures(True, 1, next_missing={hostile: ("k", "t")}))
    assert series(measured, "gpudrv_node_next_kernel_image_missing") == [
        ({"node": hostile, "kernel": "k", "tag": "t"}, 1)
    ]
    assert [value for _, value in series(measured, "gpudrv_leader")] == [1]


def test_counts_the_commit_in_force_and_events_worded_by_the_renderer() -> None:
    out, measured, sink = exporter()
    out.count(Tally.REJECTED)
    out.count(Tally.APPLY_RUNS, "findings")
    out.count(Tally.AUDIT_ERRORS)
    out.count(Tally.AUDIT_ERRORS)
    assert [value for _, value in series(measured, "gpudrv_commit_rejected_total")] == [1]
    assert series(measured, "gpudrv_apply_runs_total") == [({"result": "findings"}, 1)]
    assert [value for _, value in series(measured, "gpudrv_audit_errors_total")] == [2]
    out.in_force(Snapshot("f" * 40, "matrix.csv", frozenset(), None, None, 1_700_000_000))
    ((labels, _),) = series(measured, "gpudrv_commit_info")
    assert labels == {"commit": "f" * 40, "branch": "main", "repository": "https://***@git.example/fleet.git"}
    finding = Finding("n1", Status.MISSING, "550-6.1.0-9-generic-ubuntu22.04")
    out.event(Event("n1", MISSING, finding.detail, "m.csv at abc", finding, recount=False))
    out.event(Event("n1", AVAILABLE, "550-x", "m.csv at abd", warning=False))
    missing, available = sink.posted
    assert (missing.reason, missing.key, missing.warning, missing.recount) == (
        MISSING,
        finding.detail,
        True,
        False,
    )
    assert missing.message.startswith(
        "driver image 550-6.1.0-9-generic-ubuntu22.04 is not in the support matrix (m.csv at abc)"
    )
    assert (available.warning, available.message) == (
        False,
        "driver image 550-x is in the support matrix (m.csv at abd)",
    )


def test_the_inbox_waits_for_a_first_message_then_takes_all_there_are() -> None:
    inbox = QueueInbox()
    started = time.monotonic()
    assert inbox.take(0.05) == [] and time.monotonic() - started >= 0.04
    inbox.put(CommitFetched("a"))
    inbox.put(CommitFetched("b"))
    assert inbox.take(5) == [CommitFetched("a"), CommitFetched("b")]
    threading.Timer(0.05, inbox.put, [CommitFetched("c")]).start()
    assert inbox.take(5) == [CommitFetched("c")]  # woken by the message, not by the timeout


def test_node_news_from_the_watch() -> None:
    node = Node("n1", {"nvidia.com/gpu.present": "true"})
    assert node_news(Listed([node], "7")) == NodesListed([node], "7")
    assert node_news(Changed(node, 1.0)) == NodeChanged(node)
    assert node_news(Deleted("n1")) == NodeDeleted("n1")
