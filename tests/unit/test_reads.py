"""Live reads keep only the labels a command reads (core.reads): every result must be the same as with
all of a node's labels. Nodes here are the example fleets' nodes with their labels changed, dropped or
added at random, and about a hundred labels no computation reads."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters import desired, kube
from reconciler.adapters.cluster import workloads
from reconciler.adapters.files import manifests, operator_contract
from reconciler.commands.explain import load_table
from reconciler.core.audit import audit
from reconciler.core.contract import driver_images, operator
from reconciler.core.images import tags
from reconciler.core.images.tags import Node
from reconciler.core.rollout import rollout
from reconciler.core.upgrades import upgrade
from reconciler.core.upgrades.upgrade import Images, LiveNode
from reconciler.core.views import diff, reads
from reconciler.core.views.explain import report
from reconciler.render import audit as audit_view
from reconciler.render import diff as diff_view
from reconciler.render import explain as explain_view
from reconciler.render import upgrades as upgrades_view

REPO = Path(__file__).resolve().parents[2]
FLEETS = [REPO / "clusters" / name for name in ("lab", "gpu-operator", "gpu-operator-pools")]
WORKLOADS = workloads.load_workloads(REPO / "clusters" / "lab" / "workloads")
TABLE = load_table()

POOL_KEY = "nodepool.example.com/name"  # an NVIDIADriver below selects on it: no computation reads it else


def label_keys_in_core() -> set[str]:
    """Every string in reconciler/core that looks like a label key (a prefix with a dot, a slash, a
    name): whatever the core may look up, independently of what core.reads says it reads."""
    pattern = re.compile(r"^[a-z0-9.-]+\.[a-z]+/[A-Za-z0-9._-]+$")
    found: set[str] = set()
    for path in (REPO / "reconciler" / "core").rglob("*.py"):
        if "boot" in path.parts:  # the probe's own files: it writes a label, reads none
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.match(node.value):
                found.add(node.value)
    return found


def pooled_contract() -> operator.Contract:
    """The NVIDIADriver fleet, its rhel driver also selecting on POOL_KEY."""
    resources = [
        replace(item, node_selector={**item.node_selector, POOL_KEY: "gpu-a"}) if item.node_selector else item
        for item in operator_contract.load_resources(FLEETS[2])
    ]
    return operator.contract(resources, operator_contract.rules().newest)


CONTRACTS = [(fleet, desired.from_git(fleet, desired.Pins(), quiet=True).contract) for fleet in FLEETS]
CONTRACTS.append((FLEETS[2], pooled_contract()))
KEYS = sorted(
    label_keys_in_core()
    | {POOL_KEY}
    | {key for item in WORKLOADS for key in item.placement.label_keys()}
    | {key for fleet in FLEETS for node in manifests.load_nodes(fleet) for key in node.labels}
)
VALUES = [
    "true", "false", "", "550", "535", "570", "90", "07", "183", "06", "5.15.0-119-generic",
    "6.8.0-45-generic", "5.14.0-427.13.1.el9_4.x86_64", "ubuntu", "rhel", "22.04", "24.04", "9.4", "9",
    "upgrade-required", "drain-required", "upgrade-done", "upgrade-failed", "not a value", "550.90.07",
    "gpu-a", "gpu-b",
]  # fmt: skip
NOISE = {f"feature.node.kubernetes.io/cpu-cpuid.FLAG{i}": "true" for i in range(100)}


@st.composite
def fleets(draw: st.DrawFn, fleet: Path) -> list[Node]:
    """The fleet's nodes, each label changed, dropped or left, plus labels no computation reads."""
    nodes = []
    for node in manifests.load_nodes(fleet):
        labels = {**NOISE, **node.labels, "kubernetes.io/hostname": node.name, POOL_KEY: "gpu-a"}
        for key in draw(st.lists(st.sampled_from(KEYS), max_size=6, unique=True)):
            value = draw(st.sampled_from([None, *VALUES]))
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        nodes.append(Node(node.name, labels))
    return nodes


def kept(nodes: list[Node], keys: frozenset[str]) -> list[Node]:
    return [kube.kept(node, keys, {}) for node in nodes]


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data())
def test_audit_and_report_read_only_what_for_contract_keeps(data: st.DataObject) -> None:
    for fleet, contract in CONTRACTS:
        nodes = data.draw(fleets(fleet))
        in_matrix = frozenset({"550-5.15.0-119-generic-ubuntu22.04", "535-5.15.0-107-generic-ubuntu22.04"})

        def audited(given: list[Node], contract: Any = contract, in_matrix: Any = in_matrix) -> Any:
            try:
                found = driver_images.wants(contract, given)
            except operator.ContractError as exc:
                return ("refused", str(exc))
            per_node = {w.node.name: (w.tag, w.node.labels.get(tags.UPGRADE_STATE)) for w in found.wants}
            return audit_view.as_json(audit.audit_wants(found, in_matrix)), per_node

        assert audited(kept(nodes, reads.for_contract(contract))) == audited(nodes)


@SETTINGS
@given(data=st.data())
def test_status_and_plan_read_only_fleet_labels_and_gpudrvs_annotations(data: st.DataObject) -> None:
    declared = manifests.load_nodes(FLEETS[0])
    nodes = data.draw(fleets(FLEETS[0]))
    notes = {upgrade.FAILURE: "drain: refused", "nfd.node.kubernetes.io/feature-labels": "x" * 100}
    images = Images("main", "matrix/support-matrix.csv", frozenset({"550-5.15.0-119-generic-ubuntu22.04"}))

    def status(live: list[LiveNode]) -> Any:
        rows = [
            (
                upgrade.driver(node.node.labels),
                rollout.running_branch(node.node.labels),
                upgrade.state_of(node.node.labels),
                upgrade.needs_upgrade(desired, node),
            )
            for desired, node in zip(declared, live, strict=True)
        ]
        plans = [
            upgrade.plan_node(desired, node, images) for desired, node in zip(declared, live, strict=True)
        ]
        return rows, upgrades_view.plan_json([plan for plan in plans if plan is not None], images, ok=True)

    def live(given: list[Node]) -> list[LiveNode]:
        return [LiveNode(node, index % 2 == 0, notes) for index, node in enumerate(given)]

    document = {"metadata": {"annotations": notes}}
    projected = [
        replace(node, annotations=kube.kept_annotations(document, reads.ANNOTATIONS)) for node in live(nodes)
    ]
    assert status(
        [replace(n, node=k) for n, k in zip(projected, kept(nodes, reads.FLEET), strict=True)]
    ) == status(live(nodes))


@SETTINGS
@given(data=st.data())
def test_explain_reads_only_what_for_workloads_keeps(data: st.DataObject) -> None:
    nodes = data.draw(fleets(FLEETS[0]))

    def explained(given: list[Node]) -> dict[str, Any]:
        return explain_view.as_json([report(item, given, TABLE) for item in WORKLOADS], ok=True)

    assert explained(kept(nodes, reads.for_workloads(WORKLOADS))) == explained(nodes)


@SETTINGS
@given(data=st.data())
def test_diff_reads_only_the_declared_labels(data: st.DataObject) -> None:
    for fleet in FLEETS:
        desired = manifests.load_nodes(fleet)
        nodes = data.draw(fleets(fleet))
        drift = diff_view.as_json(diff.drift(desired, kept(nodes, reads.for_declared(desired))))
        assert drift == diff_view.as_json(diff.drift(desired, nodes))


def test_label_values_are_shared_across_nodes() -> None:
    shared: dict[str, str] = {}
    first, second = (
        kube.kept(
            Node(name, {tags.KERNEL: "".join(["5.15.0-", "119-generic"]), "other": "x"}), reads.FLEET, shared
        )
        for name in ("a", "b")
    )
    assert first.labels == {tags.KERNEL: "5.15.0-119-generic"}
    assert first.labels[tags.KERNEL] is second.labels[tags.KERNEL]
    everything = Node("c", {"x": "y"})
    assert kube.kept(everything, None) is everything
