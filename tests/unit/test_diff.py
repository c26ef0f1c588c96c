"""Drift and matrix impact on plain data, and how the diff and impact commands render them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters import kube
from reconciler.commands.diff import terminal_colour
from reconciler.core.audit.impact import NodeImpact, impact
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.core.images.tags import ImageKey, Node
from reconciler.core.views import diff
from reconciler.core.views.diff import Budget, BudgetDrift, Change, NodeDrift, State
from reconciler.render import diff as diff_cmd
from reconciler.render import impact as impact_cmd

MAJOR = "nvidia.com/cuda.driver.major"
GPU = {"nvidia.com/gpu.present": "true"}
LAB = {
    **GPU,
    MAJOR: "550",
    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-119-generic",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}
A = ImageKey("550", "5.15.0-119-generic", "ubuntu22.04")
B = ImageKey("550", "6.8.0-52-generic", "ubuntu24.04")
SELECTOR = {"matchLabels": {"app": "trainer"}}


def plain(_colour: str, text: str) -> str:
    return text


def test_only_declared_labels_are_compared() -> None:
    desired = [Node("n1", {MAJOR: "550", "team": "ml"}, "nodes/n1.yaml:1")]
    live = [Node("n1", {MAJOR: "535", "team": "ml", "kubernetes.io/arch": "amd64", "other": "x"})]
    assert diff.node_drift(desired, live) == [
        NodeDrift("n1", State.CHANGED, "nodes/n1.yaml:1", (Change(MAJOR, "550", "535"),))
    ]


def test_label_missing_live_is_drift_and_equal_labels_are_not() -> None:
    desired = [Node("n1", {MAJOR: "550"}), Node("n2", {MAJOR: "550"})]
    live = [Node("n1", {}), Node("n2", {MAJOR: "550"})]
    assert diff.node_drift(desired, live) == [
        NodeDrift("n1", State.CHANGED, None, (Change(MAJOR, "550", None),))
    ]


def test_absent_and_undeclared_nodes_in_name_order() -> None:
    desired = [Node("b", GPU, "b.yaml:1"), Node("d", GPU)]
    live = [
        Node("d", GPU),
        Node("a", GPU),
        Node("c", {"role": "cpu"}),
        Node("e", {"nvidia.com/gpu.present": "false"}),
    ]
    drift = diff.node_drift(desired, live)
    assert drift == [NodeDrift("a", State.UNDECLARED, None), NodeDrift("b", State.ABSENT, "b.yaml:1")]


def test_budget_fields_declared_only() -> None:
    desired = [Budget("ns", "pdb", {"minAvailable": 4, "selector": SELECTOR}, "w.yaml:3")]
    live = [Budget("ns", "pdb", {"minAvailable": 3, "selector": SELECTOR, "maxUnavailable": None})]
    assert diff.budget_drift(desired, live) == [
        BudgetDrift("ns", "pdb", State.CHANGED, "w.yaml:3", (Change("minAvailable", 4, 3),))
    ]


def test_budget_selector_and_policy_and_absence() -> None:
    desired = [
        Budget("ns", "a", {"selector": SELECTOR, "unhealthyPodEvictionPolicy": "AlwaysAllow"}),
        Budget("ns", "b", {"maxUnavailable": "25%"}),
        Budget("ns", "same", {"maxUnavailable": 1, "selector": SELECTOR}),
    ]
    live = [
        Budget("ns", "a", {"selector": {"matchLabels": {"app": "other"}}}),
        Budget("other", "b", {"maxUnavailable": "25%"}),  # same name, other namespace: not it
        Budget("ns", "same", {"maxUnavailable": 1, "selector": SELECTOR}),
    ]
    drift = diff.budget_drift(desired, live)
    assert drift == [
        BudgetDrift(
            "ns",
            "a",
            State.CHANGED,
            None,
            (
                Change("selector", SELECTOR, {"matchLabels": {"app": "other"}}),
                Change("unhealthyPodEvictionPolicy", "AlwaysAllow", None),
            ),
        ),
        BudgetDrift("ns", "b", State.ABSENT, None),
    ]


def test_no_drift() -> None:
    result = diff.drift([Node("n", LAB)], [Node("n", {**LAB, "x": "y"})], [], [])
    assert not result.found
    assert diff_cmd.as_text(result, Path("fleet"), plain) == "no drift"
    assert diff_cmd.as_json(result) == {"kind": "diff", "ok": True, "nodes": [], "budgets": [], "drivers": []}


def test_diff_text_like_kubectl_diff() -> None:
    result = diff.drift(
        [Node("lab-node-1", {MAJOR: "550", "extra": "yes"}, "f/n1.yaml:1"), Node("new", GPU, "f/new.yaml:1")],
        [Node("lab-node-1", {MAJOR: "535"}), Node("stray", GPU)],
        [Budget("gpu-drv", "trainer-pdb", {"minAvailable": 4, "selector": SELECTOR}, "f/w.yaml:30")],
        [Budget("gpu-drv", "trainer-pdb", {"minAvailable": 3, "selector": SELECTOR})],
    )
    assert diff_cmd.as_text(result, Path("f"), plain).splitlines() == [
        "node/lab-node-1   (f/n1.yaml:1)",
        "+ extra=yes   (desired; not set live)",
        f"- {MAJOR}=535   (live)",
        f"+ {MAJOR}=550   (desired)",
        "+ node/new   (declared in f/new.yaml:1; absent live)",
        "- node/stray   (live GPU node; not declared under f)",
        "poddisruptionbudget/gpu-drv/trainer-pdb   (f/w.yaml:30)",
        "- spec.minAvailable: 3   (live)",
        "+ spec.minAvailable: 4   (desired)",
    ]
    data = diff_cmd.as_json(result)
    assert (data["kind"], data["ok"]) == ("diff", False)
    assert data["nodes"][0]["labels"][1] == {"key": MAJOR, "desired": "550", "live": "535"}
    assert [n["state"] for n in data["nodes"]] == ["changed", "absent", "undeclared"]
    assert data["budgets"] == [
        {
            "namespace": "gpu-drv",
            "name": "trainer-pdb",
            "state": "changed",
            "origin": "f/w.yaml:30",
            "fields": [{"field": "minAvailable", "desired": 4, "live": 3}],
        }
    ]
    json.dumps(data)  # plain data all the way down


def test_diff_colours_minus_red_plus_green() -> None:
    result = diff.drift([Node("n", {MAJOR: "550"})], [Node("n", {MAJOR: "535"})])

    def paint(colour: str, text: str) -> str:
        return f"<{colour}>{text}</>"

    lines = diff_cmd.as_text(result, Path("f"), paint).splitlines()
    assert lines[1].startswith(f"<{diff_cmd.RED}>- ") and lines[2].startswith(f"<{diff_cmd.GREEN}>+ ")


def test_diff_paints_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert terminal_colour()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not terminal_colour()
    Tty.isatty = lambda self: False  # type: ignore[method-assign]  # a pipe or a file
    monkeypatch.delenv("NO_COLOR")
    assert not terminal_colour()
    assert diff_cmd.paint(True)(diff_cmd.RED, "x") == f"{diff_cmd.RED}x{diff_cmd.RESET}"
    assert diff_cmd.paint(False)(diff_cmd.RED, "x") == "x"


def test_live_budget_from_api_json() -> None:
    document = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"minAvailable": 1}, "status": {}}
    assert kube.budget_spec(document) == Budget("ns", "p", {"minAvailable": 1})


def test_impact_rows_and_nodes() -> None:
    lab3 = Node(
        "lab-node-3",
        {
            **LAB,
            "feature.node.kubernetes.io/kernel-version.full": "6.8.0-52-generic",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
        },
    )
    broken = Node("odd", {**GPU, MAJOR: ""})
    cpu = Node("cpu", {})
    result = impact([A], [A, B], [lab3, Node("lab-node-0", LAB), broken, cpu])
    assert result.added == (B,) and result.removed == ()
    assert result.nodes == (
        NodeImpact("lab-node-0", A.tag, None, "OK", "OK", A.tag),  # one contract: the tag is unchanged
        NodeImpact("lab-node-3", B.tag, None, "MISSING", "OK", B.tag),
        NodeImpact("odd", None, f"label {MAJOR} is empty", "INVALID", "INVALID"),
    )
    assert result.broken == ()
    text = impact_cmd.as_text(result, "origin/main", "matrix/support-matrix.csv").splitlines()
    assert text[:2] == ["matrix/support-matrix.csv: origin/main \u2192 working tree", f"+ {B.as_csv()}"]
    assert f"lab-node-3: MISSING \u2192 OK  {B.tag}" in text
    assert f"odd: INVALID \u2192 INVALID  (label {MAJOR} is empty)" in text


def test_impact_removal_that_strands_a_node() -> None:
    result = impact([A, B], [B], [Node("lab-node-0", LAB)])
    assert result.removed == (A,)
    assert [node.node for node in result.broken] == ["lab-node-0"]
    markdown = impact_cmd.as_markdown(result, "main", "m.csv")
    assert f"| `{A.as_csv()}` | `{A.tag}` | **removed** |" in markdown
    assert f"| lab-node-0 | `{A.tag}` | OK | **MISSING** |" in markdown
    data = impact_cmd.as_json(result, "main", "m.csv")
    assert [node["node"] for node in data["findings"]] == ["lab-node-0"]
    assert data["removed"] == [{"driver_branch": "550", "kernel": A.kernel, "os_tag": A.os_tag, "tag": A.tag}]


def test_impact_markdown_escapes_pipes() -> None:
    result = impact([], [], [Node("n", {**GPU, MAJOR: "5|5"})])
    assert "\\|" in impact_cmd.as_markdown(result, "main", "m.csv")


def _driver(name: str, version: str, selector: dict[str, str], origin: str | None = None) -> DriverResource:
    spec = {"version": version, "usePrecompiled": True, "nodeSelector": selector}
    return DriverResource(
        Kind.NVIDIA_DRIVER, name, version, True, spec=spec, origin=origin, version_origin=origin
    )


def test_driver_resources_drift_by_declared_field() -> None:
    os_id = "feature.node.kubernetes.io/system-os_release.ID"  # a key with dots: paths are not split on them
    desired = [
        _driver("ubuntu", "550", {os_id: "ubuntu"}, "fleet/nvd.yaml:9"),
        _driver("new", "550", {}, "fleet/n.yaml:3"),
    ]
    live = [_driver("ubuntu", "535", {os_id: "ubuntu"}), _driver("stray", "535", {})]
    drifts = diff.resource_drift(desired, live)
    assert [(d.ref, d.state) for d in drifts] == [
        ("NVIDIADriver/new", diff.State.ABSENT),
        ("NVIDIADriver/stray", diff.State.UNDECLARED),
        ("NVIDIADriver/ubuntu", diff.State.CHANGED),
    ]
    assert drifts[2].fields == (diff.Change("version", "550", "535"),)
    text = diff_cmd.as_text(diff.Drift((), (), tuple(drifts)), Path("fleet"), plain)
    assert '- spec.version: "535"   (live)' in text and '+ spec.version: "550"   (desired)' in text


def test_live_driver_resources_are_not_drift_when_git_declares_none() -> None:
    assert diff.resource_drift([], [_driver("stray", "535", {})]) == []
