"""deploy/monitoring's rules read as files: the plain rule file and the PrometheusRule hold the same
rules, deploy/'s default build needs no Prometheus Operator, and every series a rule reads is one
`gpudrv reconcile` exports, with the labels the rule aggregates by and its annotations name (a renamed
metric or label in adapters/serving/metrics.py fails here, not silently in a cluster). The one label
gpudrv does not export is `cluster`, each cluster's Prometheus external label: every aggregation keeps
it, so the rules hold in a view of many clusters (docs/in-cluster.md, "Many clusters"). What the
rules do over time is tests/monitoring/test_rules_promtool.py's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from reconciler.adapters.git.sync import Credentials, Source
from reconciler.adapters.incluster.reconcile_ports import Exporter
from reconciler.adapters.serving.metrics import Metrics
from reconciler.core.incluster.reconcile_ports import Figures
from reconciler.render.reconcile import change_line, event_message
from tests.conftest import REPO

MONITORING = REPO / "deploy" / "monitoring"
RULE_FILE = MONITORING / "gpudrv.rules.yaml"
GATE = "GPUDriverNextKernelImageMissing"
# Added by each cluster's Prometheus (external_labels), not exported by gpudrv; absent inside a cluster.
EXTERNAL = {"cluster"}
CLUSTER_PHRASE = "{{ if $labels.cluster }} in cluster {{ $labels.cluster }}{{ end }}"


def load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text())


def rules() -> dict[str, dict[str, Any]]:
    """Every rule by its alert or record name."""
    return {
        rule.get("alert") or rule["record"]: rule
        for group in load(RULE_FILE)["groups"]
        for rule in group["rules"]
    }


def alerts() -> dict[str, dict[str, Any]]:
    return {name: rule for name, rule in rules().items() if "alert" in rule}


def records() -> dict[str, dict[str, Any]]:
    return {name: rule for name, rule in rules().items() if "record" in rule}


def exported() -> dict[str, set[str]]:
    """Every series name the reconciler's /metrics shows with figures that have every kind of finding,
    and the label names it carries."""
    measured = Metrics()
    source = Source("https://git.example/fleet.git", "main", Credentials())
    out = Exporter(measured, None, source, change_line, event_message)  # type: ignore[arg-type]
    out.export(
        Figures(
            True,
            3,
            missing={"a": "550-6.1.0-9-generic-ubuntu22.04"},
            invalid=frozenset({"c"}),
            upgrade_states={"none": 3},
            next_missing={"b": ("6.1.0-9-generic", "550-6.1.0-9-generic-ubuntu22.04")},
        )
    )
    out.audited()
    measured.last_sync.set_to_current_time()
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(measured.exposition()[0].decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def test_the_prometheus_rule_holds_the_same_rules_as_the_plain_file() -> None:
    rule = load(MONITORING / "prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["namespace"] == "gpudrv-system"
    assert rule["spec"] == load(RULE_FILE)
    assert load(MONITORING / "kustomization.yaml")["resources"] == ["prometheusrule.yaml"]


def kustomized(folder: Path) -> list[Path]:
    """The files a kustomization folder builds from, followed through its folders."""
    found = []
    for entry in load(folder / "kustomization.yaml").get("resources", []):
        path = (folder / entry).resolve()
        found += kustomized(path) if path.is_dir() else [path]
    return found


def test_deploys_default_build_needs_no_prometheus_operator() -> None:
    files = kustomized(REPO / "deploy")
    assert files and MONITORING.resolve() not in {path.parent for path in files}
    reader = YAML(typ="safe", pure=True)
    kinds = {doc["kind"] for path in files for doc in reader.load_all(path.read_text()) if doc}
    assert "PrometheusRule" not in kinds and "Deployment" in kinds


def test_the_gate_alert_names_the_node_its_next_kernel_and_the_tag() -> None:
    gate = alerts()[GATE]
    assert "for" not in gate and gate["keep_firing_for"] == "10m"
    for name in ("node", "kernel", "tag"):
        assert f"{{{{ $labels.{name} }}}}" in gate["annotations"]["summary"]
    assert set(alerts()) == {
        "GPUDriverImageMissing",
        GATE,
        "GPUDriverAuditStale",
        "GPUDriverNoGPUNodesAudited",
        "GPUDriverFleetRepoStale",
    }


# `by (labels) (series)`, the series maybe inside functions or aggregations: `by (cluster)
# (last_over_time(series[1d]))`, `count by (cluster, tag) (max by (cluster, node, tag) (series))` (a
# lookahead, so the inner `by` is found too).
AGGREGATED = re.compile(r"(?=\bby\s*\(([^)]*)\)\s*\(\s*(?:\w+(?:\s+by\s*\([^)]*\))?\s*\(\s*)*(\w+))")


def by_labels(found: str) -> set[str]:
    return {label.strip() for label in found.split(",") if label.strip()}


@pytest.mark.parametrize("name", sorted(rules()))
def test_every_series_a_rule_reads_is_exported_with_the_labels_it_uses(name: str) -> None:
    rule, series = rules()[name], exported()
    expr = rule["expr"]
    read = set(re.findall(r"\bgpudrv_\w+", expr))
    assert read, expr
    missing = read - series.keys()
    assert not missing, f"{name} reads {sorted(missing)}, which gpudrv reconcile does not export"
    kept: set[str] = set()
    for labels, metric in AGGREGATED.findall(expr):
        by = by_labels(labels)
        assert by - EXTERNAL <= series[metric], f"{name}: {metric} has no label {sorted(by - series[metric])}"
        kept |= by
    text = " ".join([*rule.get("annotations", {}).values(), *rule.get("labels", {}).values()])
    named = set(re.findall(r"\$labels\.(\w+)", text))
    assert named <= kept, f"{name} names {sorted(named - kept)}, which its expression does not keep"


@pytest.mark.parametrize("name", sorted(rules()))
def test_every_aggregation_keeps_the_cluster(name: str) -> None:
    """A `max` or `count` without `cluster` would merge two clusters' nodes of one name (or their
    timestamps) in a view of many clusters; only the fleet-wide records drop it, on purpose, in their
    outermost `count`."""
    expr = rules()[name]["expr"]
    aggregations = re.findall(r"\b(max|min|sum|count|avg)\b\s*(?:by\s*\(([^)]*)\))?\s*\(", expr)
    assert aggregations, expr
    inner = aggregations[1:] if "record" in rules()[name] else aggregations
    for operation, labels in inner:
        assert "cluster" in by_labels(labels), f"{name}: {operation} without cluster in {expr!r}"


def test_the_gate_reads_exactly_the_next_kernel_series_and_its_labels() -> None:
    (found,) = AGGREGATED.findall(alerts()[GATE]["expr"])
    labels, name = found
    assert name == "gpudrv_node_next_kernel_image_missing"
    assert exported()[name] == {"node", "kernel", "tag"}
    assert by_labels(labels) == EXTERNAL | exported()[name]


@pytest.mark.parametrize("alert", sorted(alerts()))
def test_every_alert_names_its_cluster_only_when_it_has_one(alert: str) -> None:
    """In one cluster's Prometheus the alert has no `cluster` label: the phrase is left out, and the
    text reads as before; in a view of many clusters it says which."""
    summary = alerts()[alert]["annotations"]["summary"]
    assert CLUSTER_PHRASE in summary
    rest = " ".join(text for rule in alerts().values() for text in rule["annotations"].values())
    assert "$labels.cluster" not in rest.replace(CLUSTER_PHRASE, "")


LEVELLED = re.compile(r"^(\w+):(gpudrv_\w+):(\w+)$")


@pytest.mark.parametrize("record", sorted(records()))
def test_a_record_is_named_for_its_labels_series_and_operation(record: str) -> None:
    """Prometheus's naming: level:metric:operations, the level the labels the outermost aggregation
    keeps; `cluster_` ones per cluster, the others across every cluster the rule sees."""
    match = LEVELLED.match(record)
    assert match, record
    level, metric, operation = match.groups()
    expr = records()[record]["expr"]
    outer = re.match(r"(\w+) by \(([^)]*)\) \(", expr)
    assert outer, expr
    assert outer.group(1) == operation
    assert by_labels(outer.group(2)) == set(level.split("_"))
    assert set(re.findall(r"\bgpudrv_\w+", expr)) == {metric}


def test_each_per_node_series_has_a_count_per_cluster_and_one_for_the_fleet() -> None:
    assert set(records()) == {
        "cluster_tag:gpudrv_node_image_missing:count",
        "tag:gpudrv_node_image_missing:count",
        "cluster_kernel_tag:gpudrv_node_next_kernel_image_missing:count",
        "kernel_tag:gpudrv_node_next_kernel_image_missing:count",
    }
