"""The compiled shape check (shapes.Shape.holds) never passes a document jsonschema rejects.

Each item of a 10,000-node list is checked, so the check is plain Python; jsonschema stays the
authority for every document the compiled check does not pass. Random mutations of a document of
each shape (values swapped for other JSON kinds, keys dropped, at any depth) must never be passed by
the compiled check and refused by jsonschema; the unmutated documents must pass both.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from reconciler.adapters.kube import shapes
from reconciler.adapters.kube.shapes import (
    BUDGET,
    CLUSTER_POLICY,
    DEPLOYMENT,
    EVENT,
    LEASE,
    NODE,
    POD,
    STATUS,
    WATCH_EVENT,
    Shape,
)

_VALUES: list[Any] = [None, 0, 1, 1.0, 2.5, True, False, "", "x", [], [1], ["a"], {}, {"a": 1}, {"a": "b"}]

_DOCUMENTS: dict[str, tuple[Shape, dict[str, Any]]] = {
    "node": (
        NODE,
        {
            "metadata": {
                "name": "gpu-1",
                "labels": {f"feature.node.kubernetes.io/cpu-{i}": "true" for i in range(20)},
                "annotations": {"nfd.node.kubernetes.io/feature-labels": "a,b"},
                "resourceVersion": "12",
                "ownerReferences": [{"kind": "Machine", "controller": True}],
                "generation": 3,
            },
            "spec": {"unschedulable": True},
        },
    ),
    "pod": (
        POD,
        {
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
            "spec": {
                "nodeName": "gpu-1",
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                            ]
                        }
                    }
                },
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    ),
    "budget": (
        BUDGET,
        {
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {
                "minAvailable": "50%",
                "selector": {
                    "matchLabels": {"a": "b"},
                    "matchExpressions": [{"key": "k", "operator": "Exists"}],
                },
            },
            "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0},
        },
    ),
    "deployment": (
        DEPLOYMENT,
        {"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [{"image": "x:v1"}]}}}},
    ),
    "cluster-policy": (CLUSTER_POLICY, {"metadata": {"name": "cluster-policy"}, "spec": {"driver": {}}}),
    "lease": (
        LEASE,
        {
            "metadata": {"name": "gpudrv-reconcile", "resourceVersion": "7"},
            "spec": {
                "holderIdentity": "pod-a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2025-01-01T00:00:00.000000Z",
                "renewTime": "2025-01-01T00:00:02.000000Z",
                "leaseTransitions": 2,
            },
        },
    ),
    "event": (
        EVENT,
        {
            "involvedObject": {"kind": "Node", "name": "n"},
            "type": "Warning",
            "reason": "R",
            "message": "m",
            "lastTimestamp": "2025-01-01T00:00:00Z",
            "count": 3,
        },
    ),
    "watch-event": (WATCH_EVENT, {"type": "ADDED", "object": {"metadata": {"name": "n"}}}),
    "status": (STATUS, {"code": 410, "reason": "Expired", "message": "too old"}),
}


def _mutate(document: Any, rnd: random.Random) -> Any:
    if isinstance(document, dict) and document:
        copy = dict(document)
        key = rnd.choice(list(copy))
        roll = rnd.random()
        if roll < 0.2:
            del copy[key]
        elif roll < 0.6:
            copy[key] = _mutate(copy[key], rnd)
        else:
            copy[key] = rnd.choice(_VALUES)
        return copy
    if isinstance(document, list) and document:
        copy = list(document)
        index = rnd.randrange(len(copy))
        copy[index] = _mutate(copy[index], rnd) if rnd.random() < 0.6 else rnd.choice(_VALUES)
        return copy
    return rnd.choice(_VALUES)


@pytest.mark.parametrize("name", sorted(_DOCUMENTS))
def test_the_compiled_check_never_passes_what_jsonschema_refuses(name: str) -> None:
    shape, document = _DOCUMENTS[name]
    assert shape.holds(document)
    assert shape.validator.is_valid(document)
    rnd = random.Random(name)
    refused = 0
    for _ in range(3000):
        mutated = document
        for _ in range(rnd.randint(1, 3)):
            mutated = _mutate(mutated, rnd)
        valid = shape.validator.is_valid(mutated)
        if shape.holds(mutated):
            assert valid, mutated
        refused += not valid
        # problem() agrees with jsonschema whichever way the compiled check went.
        assert (shapes.problem(shape, mutated) is None) == valid
    assert refused > 100  # the mutations do reach the checked fields


def test_a_schema_keyword_the_compiler_does_not_know_leaves_the_decision_to_jsonschema() -> None:
    shape = Shape("Thing", {"properties": {"size": {"type": "integer", "maximum": 3}}})
    assert not shape.holds({"size": 2})
    assert shapes.problem(shape, {"size": 2}) is None
    assert shapes.problem(shape, {"size": 5}) is not None


def test_integers_are_not_booleans_and_booleans_are_not_integers() -> None:
    shape = Shape(
        "Thing", {"properties": {"count": {"type": ["integer", "null"]}, "on": {"type": "boolean"}}}
    )
    assert shape.holds({"count": 3, "on": False})
    assert not shape.holds({"count": True})
    assert not shape.holds({"on": 1})
    assert shapes.problem(shape, {"count": True}) is not None
