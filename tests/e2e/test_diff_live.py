"""`gpudrv diff --from DIR` against the real API server.

Other tests share the cluster, so every assertion looks only at this test's nodes (its unique prefix)
and its namespace. Only the one "live GPU node, not declared" case needs gpu.present=true; that node
carries the lab's labels (an image the lab matrix has) and lives only as long as that check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.conftest import FakeNodes, Kube

MAJOR = "nvidia.com/cuda.driver.major"
SELECTOR = {"matchLabels": {"app": "trainer"}}


def node_yaml(name: str, labels: dict[str, str]) -> str:
    lines = [f'    {key}: "{value}"' for key, value in labels.items()]
    return (
        "\n".join(["apiVersion: v1", "kind: Node", "metadata:", f"  name: {name}", "  labels:", *lines])
        + "\n"
    )


def pdb(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def mine(data: dict[str, Any], prefix: str, namespace: str) -> dict[str, Any]:
    return {
        "nodes": [n for n in data["nodes"] if n["node"].startswith(prefix)],
        "budgets": [b for b in data["budgets"] if b["namespace"] == namespace],
    }


def blocks(text: str, prefix: str, namespace: str) -> list[str]:
    """The text output's lines that belong to this test's objects (a block runs to the next header)."""
    kept: list[str] = []
    keep = False
    for line in text.splitlines():
        name = line.removeprefix("+ ").removeprefix("- ").split()[0]
        if name.startswith(("node/", "poddisruptionbudget/")):
            keep = name.startswith((f"node/{prefix}", f"poddisruptionbudget/{namespace}/"))
        if keep:
            kept.append(line)
    return kept


def test_diff_against_the_live_cluster(
    kube: Kube, nodes: FakeNodes, namespace: str, unique: str, tmp_path: Path
) -> None:
    same = nodes.add(f"{unique}-same", **{MAJOR: "550", "team": "ml"})
    changed = nodes.add(f"{unique}-changed", **{MAJOR: "535", "team": "ml"})
    absent = f"{unique}-absent"
    desired = tmp_path / "fleet"
    (desired / "nodes").mkdir(parents=True)
    for name, labels in (
        (same, {MAJOR: "550"}),
        (changed, {MAJOR: "550", "zone": "a"}),
        (absent, {MAJOR: "550"}),
    ):
        (desired / "nodes" / f"{name}.yaml").write_text(node_yaml(name, labels))
    declared = [
        pdb(namespace, "kept", {"minAvailable": 1, "selector": SELECTOR}),
        pdb(namespace, "trainer-pdb", {"minAvailable": 4, "selector": SELECTOR}),
        pdb(namespace, "missing", {"maxUnavailable": "25%", "selector": SELECTOR}),
    ]
    (desired / "budgets.yaml").write_text("\n---\n".join(json.dumps(d) for d in declared))
    kube.apply(json.dumps(declared[0]))
    kube.apply(json.dumps(pdb(namespace, "trainer-pdb", {"minAvailable": 3, "selector": SELECTOR})))
    stray = nodes.add_gpu(f"{unique}-stray")

    result = kube.gpudrv("diff", "--from", str(desired), "-o", "json")
    text = kube.gpudrv("diff", "--from", str(desired))
    kube.run("delete", "node", stray, "--wait=true")  # short-lived: other tests audit GPU nodes

    assert (result.returncode, result.stderr) == (1, "")
    assert mine(json.loads(result.stdout), unique, namespace) == {
        "nodes": [
            {"node": absent, "state": "absent", "origin": f"{desired}/nodes/{absent}.yaml:1", "labels": []},
            {
                "node": changed,
                "state": "changed",
                "origin": f"{desired}/nodes/{changed}.yaml:1",
                "labels": [
                    {"key": MAJOR, "desired": "550", "live": "535"},
                    {"key": "zone", "desired": "a", "live": None},
                ],
            },
            {"node": stray, "state": "undeclared", "origin": None, "labels": []},
        ],
        "budgets": [
            {
                "namespace": namespace,
                "name": "missing",
                "state": "absent",
                "origin": f"{desired}/budgets.yaml:5",
                "fields": [],
            },
            {
                "namespace": namespace,
                "name": "trainer-pdb",
                "state": "changed",
                "origin": f"{desired}/budgets.yaml:3",
                "fields": [{"field": "minAvailable", "desired": 4, "live": 3}],
            },
        ],
    }
    assert text.returncode == 1
    assert blocks(text.stdout, unique, namespace) == [
        f"+ node/{absent}   (declared in {desired}/nodes/{absent}.yaml:1; absent live)",
        f"node/{changed}   ({desired}/nodes/{changed}.yaml:1)",
        f"- {MAJOR}=535   (live)",
        f"+ {MAJOR}=550   (desired)",
        "+ zone=a   (desired; not set live)",
        f"- node/{stray}   (live GPU node; not declared under {desired})",
        f"+ poddisruptionbudget/{namespace}/missing   (declared in {desired}/budgets.yaml:5; absent live)",
        f"poddisruptionbudget/{namespace}/trainer-pdb   ({desired}/budgets.yaml:3)",
        "- spec.minAvailable: 3   (live)",
        "+ spec.minAvailable: 4   (desired)",
    ]
    assert "\x1b[" not in text.stdout  # not a terminal: no colour


def test_diff_sees_fixes_at_once(
    kube: Kube, nodes: FakeNodes, namespace: str, unique: str, tmp_path: Path
) -> None:
    node = nodes.add(f"{unique}-n", **{MAJOR: "535"})
    desired = tmp_path / "fleet"
    desired.mkdir()
    (desired / "node.yaml").write_text(node_yaml(node, {MAJOR: "550"}))
    budget = pdb(namespace, "p", {"minAvailable": 2, "selector": SELECTOR})
    (desired / "pdb.yaml").write_text(json.dumps(budget))
    kube.apply(json.dumps(pdb(namespace, "p", {"minAvailable": 1, "selector": SELECTOR})))

    def drift() -> dict[str, Any]:
        result = kube.gpudrv("diff", "--from", str(desired), "-o", "json")
        assert result.returncode in (0, 1) and result.stderr == ""
        return mine(json.loads(result.stdout), unique, namespace)

    before = drift()
    assert [n["node"] for n in before["nodes"]] == [node]
    assert [b["name"] for b in before["budgets"]] == ["p"]

    kube.run("label", "node", node, f"{MAJOR}=550", "--overwrite")
    kube.apply(json.dumps(budget))
    assert drift() == {"nodes": [], "budgets": []}
