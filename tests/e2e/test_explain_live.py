"""`gpudrv explain` live, against the real scheduler.

For a seeded set of generated node affinities over fake nodes with varied driver labels, gpudrv's
verdict must equal the scheduler's: a pod that runs is on a node gpudrv predicted, and a pod is
Pending exactly when gpudrv predicts no node. The fake nodes carry no `nvidia.com/gpu.present`
label (other tests audit every GPU node), and every pod selects this test's nodes only.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from tests.e2e.conftest import FakeNodes, Kube, node_manifest

RUN = "e2e.gpudrv.io/run"  # every pod's nodeSelector: this test's nodes, nobody else's
# The shared cluster runs other tests whose pods select no node (the lab's trainers): a taint keeps
# them off this test's nodes. Every pod here tolerates it alike, so among them only affinity decides.
KEEP_OUT = "e2e.gpudrv.io/explain"
TIER = "e2e.gpudrv.io/tier"
ABSENT = "e2e.gpudrv.io/absent"  # no node has it
MAJOR = "nvidia.com/cuda.driver.major"
MINOR = "nvidia.com/cuda.driver.minor"
NODES = {
    "a": {MAJOR: "550", MINOR: "90", TIER: "gold"},
    "b": {MAJOR: "535", MINOR: "183", TIER: "silver"},
    "c": {MAJOR: "580", MINOR: "65"},
    "d": {MAJOR: "beta", TIER: "gold"},  # Gt/Lt never match a label that is not an integer
    "e": {MINOR: "7"},  # no major at all: NotIn and DoesNotExist match it
    "f": {MAJOR: "0570", TIER: "bronze"},  # leading zero: still 570
}
VALUES = {
    MAJOR: ["550", "535", "580", "beta", "0570", "570"],
    MINOR: ["90", "183", "65", "7"],
    TIER: ["gold", "silver", "bronze", "iron"],
    ABSENT: ["x"],
}
NUMBERS = ["0", "7", "100", "534", "535", "549", "550", "560", "570", "579", "580", "999"]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
PODS, SEED = 32, 20250705
UNSCHEDULABLE = "didn't match Pod's node affinity/selector"


def expression(rng: random.Random) -> dict[str, Any]:
    key, operator = rng.choice(list(VALUES)), rng.choice(OPERATORS)
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in ("Gt", "Lt"):
        return {"key": key, "operator": operator, "values": [rng.choice(NUMBERS)]}
    return {
        "key": key,
        "operator": operator,
        "values": rng.sample(VALUES[key], min(len(VALUES[key]), rng.randint(1, 2))),
    }


def term(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    generated: dict[str, Any] = {"matchExpressions": [expression(rng) for _ in range(rng.randint(1, 3))]}
    if rng.random() < 0.15:
        operator = rng.choice(["In", "NotIn"])
        field = {"key": "metadata.name", "operator": operator, "values": [rng.choice(node_names)]}
        generated["matchFields"] = [field]
    return generated


def pod(name: str, namespace: str, run: str, affinity: dict[str, Any] | None, image: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": {RUN: run},
        "tolerations": [{"key": KEEP_OUT, "operator": "Equal", "value": run, "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": image}],
        "terminationGracePeriodSeconds": 0,
    }
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def generated_pods(namespace: str, run: str, node_names: list[str]) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    pods = []
    for number in range(PODS):
        terms = [term(rng, node_names) for _ in range(rng.randint(1, 3))]
        required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        affinity = None if rng.random() < 0.1 else {"nodeAffinity": required}
        pods.append(pod(f"p{number:02d}", namespace, run, affinity, "example.invalid/noop:1"))
    return pods


def add_nodes(kube: Kube, nodes: FakeNodes, unique: str) -> list[str]:
    """All the fake nodes in one apply, Ready and with no taint but ours, so only affinity decides."""
    documents = [
        json.loads(node_manifest(f"{unique}-{s}", {RUN: unique, **labels})) for s, labels in NODES.items()
    ]
    for document in documents:
        document["spec"] = {"taints": [{"key": KEEP_OUT, "value": unique, "effect": "NoSchedule"}]}
    kube.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    names = [document["metadata"]["name"] for document in documents]
    nodes.created.extend(names)

    def settled() -> bool:
        items = kube.get("nodes", "-l", f"{RUN}={unique}")["items"]
        return len(items) == len(names) and all(_ready(node) and _only_our_taint(node) for node in items)

    kube.wait_for("the fake nodes Ready, with no taint but ours", settled, timeout=90)
    return names


def _only_our_taint(node: dict[str, Any]) -> bool:
    # A new node is tainted not-ready until the node controller sees it Ready: pods must not race that.
    return [taint["key"] for taint in node["spec"].get("taints") or []] == [KEEP_OUT]


def _ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def decided(pod_document: dict[str, Any]) -> bool:
    """Scheduled (a node name), or refused by the scheduler (PodScheduled=False, Unschedulable)."""
    if pod_document["spec"].get("nodeName"):
        return True
    conditions = pod_document.get("status", {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)


def wait_decided(kube: Kube, namespace: str, count: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 90
    while True:
        items = kube.get("pods", "-n", namespace)["items"]
        if len(items) == count and all(decided(item) for item in items):
            return {item["metadata"]["name"]: item for item in items}
        assert time.monotonic() < deadline, "timed out waiting for the scheduler to decide every pod"
        time.sleep(0.5)


def explain_json(kube: Kube, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    result = kube.gpudrv("explain", *args, "-o", "json")
    assert result.stderr == "", result.stderr
    return result.returncode, {item["name"]: item for item in json.loads(result.stdout)["workloads"]}


def fits(verdict: dict[str, Any]) -> list[str]:
    return [node["node"] for node in verdict["nodes"] if node["fits"]]


def reasons(verdict: dict[str, Any]) -> dict[str, str]:
    return {node["node"]: node["reason"] for node in verdict["nodes"] if not node["fits"]}


def test_verdicts_equal_the_schedulers(kube: Kube, nodes: FakeNodes, namespace: str, unique: str) -> None:
    names = add_nodes(kube, nodes, unique)
    pods = generated_pods(namespace, unique, names)
    kube.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    live = wait_decided(kube, namespace, len(pods))

    code, verdicts = explain_json(kube, "-n", namespace)
    assert sorted(verdicts) == sorted(live)
    scheduled = {
        name: item["spec"]["nodeName"] for name, item in live.items() if item["spec"].get("nodeName")
    }
    for name, verdict in verdicts.items():
        predicted = set(fits(verdict))
        assert predicted <= set(names), (name, predicted)  # the run label keeps other tests' nodes out
        affinity = json.dumps(live[name]["spec"].get("affinity"))
        if name in scheduled:
            assert scheduled[name] in predicted, (name, scheduled[name], reasons(verdict), affinity)
            assert verdict["scheduler"] is None
        else:
            assert predicted == set(), (name, predicted, affinity)
            assert UNSCHEDULABLE in verdict["scheduler"], verdict["scheduler"]
            assert set(reasons(verdict)) >= set(names)
    # The seed gives both outcomes in numbers, so the comparison means something.
    assert len(scheduled) >= 8, scheduled
    assert len(pods) - len(scheduled) >= 8, scheduled
    assert code == 1  # some pod fits no node


def test_one_pending_pod_with_the_schedulers_message(
    kube: Kube, nodes: FakeNodes, namespace: str, unique: str
) -> None:
    names = add_nodes(kube, nodes, unique)
    gt_560 = {"matchExpressions": [{"key": MAJOR, "operator": "Gt", "values": ["560"]}]}
    too_high = {"matchExpressions": [{"key": MAJOR, "operator": "Gt", "values": ["590"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [too_high]}}
    }
    cuda13 = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [gt_560]}}
    }
    items = [
        pod("cuda13-job", namespace, unique, affinity, "nvcr.io/nvidia/pytorch:25.03-py3"),
        pod("cuda13-ok", namespace, unique, cuda13, "nvcr.io/nvidia/pytorch:25.12-py3"),
    ]
    kube.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    live = wait_decided(kube, namespace, 2)

    result = kube.gpudrv("explain", "pod/cuda13-job", "-n", namespace)
    assert (result.returncode, result.stderr) == (1, "")
    lines = result.stdout.splitlines()
    assert lines[0] == f"Pod {namespace}/cuda13-job fits no node"
    assert f"  {unique}-a: {MAJOR}=550 is not Gt 590" in lines
    assert f"  {unique}-d: {MAJOR}=beta is not an integer (Gt 590)" in lines
    assert f"  {unique}-e: {MAJOR} is missing (Gt 590)" in lines
    scheduler = next(line for line in lines if line.startswith("  scheduler: "))
    assert UNSCHEDULABLE in scheduler
    assert scheduler == f"  scheduler: {live['cuda13-job']['status']['conditions'][0]['message']}"

    # Gt 560 admits the 580 node and the 0570 node; CUDA 13 needs 580, so the 570 node is an error.
    code, verdicts = explain_json(kube, "pod/cuda13-ok", "-n", namespace)
    assert fits(verdicts["cuda13-ok"]) == sorted([f"{unique}-c", f"{unique}-f"])
    assert live["cuda13-ok"]["spec"]["nodeName"] in fits(verdicts["cuda13-ok"])
    [finding] = verdicts["cuda13-ok"]["findings"]
    assert (finding["severity"], finding["node_names"]) == ("error", [f"{unique}-f"])
    assert code == 1
    assert len(names) == len(NODES)


def test_missing_pod_and_empty_namespace(kube: Kube, namespace: str) -> None:
    result = kube.gpudrv("explain", "pod/nope", "-n", namespace)
    assert result.returncode == 2
    assert result.stderr.startswith(f"gpudrv: pod nope not found in namespace {namespace} in the cluster at ")
    result = kube.gpudrv("explain", "-n", namespace)
    assert (result.returncode, result.stdout) == (0, "no workloads to explain\n")
