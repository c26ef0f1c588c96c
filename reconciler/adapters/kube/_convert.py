"""The API's JSON as core data: nodes, pods and disruption budgets as the core reads them.

Each document has been checked against its shape (shapes.py) before it gets here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from reconciler.core.images.tags import Node
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.upgrade import LiveNode
from reconciler.core.views import diff


def node(document: Mapping[str, Any]) -> Node:
    """A Node (or its PartialObjectMetadata): the name and labels."""
    metadata = document.get("metadata") or {}
    return Node(str(metadata.get("name", "")), dict(metadata.get("labels") or {}))


def kept(node: Node, labels: Collection[str] | None, shared: dict[str, str] | None = None) -> Node:
    """The node with only the labels a command reads (None: all of them). Label values repeat across
    a fleet: with `shared`, one string object per distinct value (10,000 nodes hold ~100 strings,
    not 10,000 copies of "true" and the same kernel)."""
    if labels is None:
        return node
    found = node.labels
    memo = {} if shared is None else shared
    return Node(node.name, {key: memo.setdefault(found[key], found[key]) for key in labels if key in found})


def kept_annotations(document: Mapping[str, Any], keys: Collection[str]) -> dict[str, str]:
    """Only these annotations of an object (gpudrv's own: NFD's alone can be kilobytes)."""
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    return {key: str(annotations[key]) for key in keys if key in annotations}


def live_node(document: Mapping[str, Any]) -> LiveNode:
    """A whole Node, with what an upgrade needs besides the labels."""
    metadata = document.get("metadata") or {}
    spec = document.get("spec") or {}
    return LiveNode(node(document), bool(spec.get("unschedulable")), dict(metadata.get("annotations") or {}))


def pod(document: Mapping[str, Any]) -> budget.Pod:
    metadata = document.get("metadata") or {}
    owners = [ref for ref in metadata.get("ownerReferences") or [] if ref.get("controller")]
    return budget.Pod(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        labels=dict(metadata.get("labels") or {}),
        owner_kind=str(owners[0].get("kind")) if owners else None,
        mirror="kubernetes.io/config.mirror" in (metadata.get("annotations") or {}),
        phase=str((document.get("status") or {}).get("phase", "")),
        gpu=_requests_gpu(document.get("spec") or {}),
        gpu_images=budget.gpu_images(document.get("spec") or {}),
        terminating=bool(metadata.get("deletionTimestamp")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (document.get("status") or {}).get("conditions") or []
        ),
    )


def _requests_gpu(spec: Mapping[str, Any]) -> bool:
    """A GPU pod as the GPU Operator tells one: a container (not an init container) whose limits or
    requests name a resource starting with nvidia.com/gpu or nvidia.com/mig-."""
    return any(budget.gpu_container(container) for container in spec.get("containers") or [])


def disruption_budget(document: Mapping[str, Any]) -> budget.Budget:
    """A live PodDisruptionBudget as the drain and the upgrade gates see it: selector and status."""
    metadata, spec, status = (document.get(key) or {} for key in ("metadata", "spec", "status"))
    return budget.Budget(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        selector=budget.selector(spec.get("selector")),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        current_healthy=int(status.get("currentHealthy", 0)),
        desired_healthy=int(status.get("desiredHealthy", 0)),
        disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
        fresh=int(status.get("observedGeneration", 0)) >= int(metadata.get("generation", 0)),
    )


def budget_spec(document: Mapping[str, Any]) -> diff.Budget:
    """A live PodDisruptionBudget as the diff sees it: identity and spec, to compare with git."""
    metadata = document.get("metadata") or {}
    return diff.Budget(
        str(metadata.get("namespace", "")), str(metadata.get("name", "")), document.get("spec") or {}
    )
