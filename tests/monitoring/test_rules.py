"""deploy/monitoring's alert rules read as files: the plain rule file and the PrometheusRule hold the
same rules, deploy/'s default build needs no Prometheus Operator, and every series a rule reads is one
`gpudrv reconcile` exports, with the labels the rule aggregates by and its annotations name (a renamed
metric or label in adapters/serving/metrics.py fails here, not silently in a cluster). What the rules
do over time is tests/monitoring/test_rules_promtool.py's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from reconciler.adapters.git.sync import Credentials, Source
from reconciler.adapters.serving.metrics import Metrics
from reconciler.commands.reconcile.service import Exporter
from reconciler.core.reconcile_ports import Figures
from tests.conftest import REPO

MONITORING = REPO / "deploy" / "monitoring"
RULE_FILE = MONITORING / "gpudrv.rules.yaml"
GATE = "GPUDriverNextKernelImageMissing"


def load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text())


def alerts() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in load(RULE_FILE)["groups"] for rule in group["rules"]}


def exported() -> dict[str, set[str]]:
    """Every series name the reconciler's /metrics shows with figures that have every kind of finding,
    and the label names it carries."""
    measured = Metrics()
    out = Exporter(measured, None, Source("https://git.example/fleet.git", "main", Credentials()))  # type: ignore[arg-type]
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
        "GPUDriverFleetRepoStale",
    }


AGGREGATED = re.compile(r"\bby\s*\(([^)]*)\)\s*\(\s*(\w+)\s*\)")


@pytest.mark.parametrize("alert", sorted(alerts()))
def test_every_series_a_rule_reads_is_exported_with_the_labels_it_uses(alert: str) -> None:
    rule, series = alerts()[alert], exported()
    expr = rule["expr"]
    read = set(re.findall(r"\bgpudrv_\w+", expr))
    assert read, expr
    missing = read - series.keys()
    assert not missing, f"{alert} reads {sorted(missing)}, which gpudrv reconcile does not export"
    kept: set[str] = set()
    for labels, name in AGGREGATED.findall(expr):
        by = {label.strip() for label in labels.split(",") if label.strip()}
        assert by <= series[name], f"{alert}: {name} has no label {sorted(by - series[name])}"
        kept |= by
    text = " ".join([*rule.get("annotations", {}).values(), *rule.get("labels", {}).values()])
    named = set(re.findall(r"\$labels\.(\w+)", text))
    assert named <= kept, f"{alert} names {sorted(named - kept)}, which its expression does not keep"


def test_the_gate_reads_exactly_the_next_kernel_series_and_its_labels() -> None:
    (found,) = AGGREGATED.findall(alerts()[GATE]["expr"])
    labels, name = found
    assert name == "gpudrv_node_next_kernel_image_missing"
    assert {label.strip() for label in labels.split(",")} == exported()[name] == {"node", "kernel", "tag"}
