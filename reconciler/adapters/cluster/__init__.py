"""What the read-only commands (tag, audit, impact, explain, diff) read from the live cluster.

Node reads ask for metadata only (PartialObjectMetadata): labels are all that tags and audits need,
and whole Node objects dominate the cost of bulk lists. A list is one request, streamed (kube.items),
and each node keeps only the labels its command reads (core.reads): docs/scale.md has the figures.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from functools import partial
from typing import Any

from reconciler.adapters import kube
from reconciler.adapters.kube import shapes
from reconciler.core import diff
from reconciler.core.label_selector import LabelSelector
from reconciler.core.tags import GPU_PRESENT, Node

METADATA_LIST = kube.METADATA_LIST
METADATA_ONE = kube.METADATA_ONE
NODES = "/api/v1/nodes"
GPU_SELECTOR = f"{GPU_PRESENT}=true"


def connect(options: kube.Options) -> Cluster:
    return Cluster(kube.connect(options))


def label_selector(base: str, selector: LabelSelector | None) -> str:
    """The labelSelector parameter: `base` and the user's -l, both (the API server ANDs them)."""
    return ",".join(part for part in (base, selector.text() if selector else "") if part)


class Cluster:
    """Every method reads fresh from the API server (a consistent read, never a cached resourceVersion)."""

    def __init__(self, gateway: kube.Gateway) -> None:
        self.gateway = gateway
        self.host = gateway.host

    def gpu_nodes(
        self, selector: LabelSelector | None = None, labels: Collection[str] | None = None
    ) -> list[Node]:
        """All nodes labelled gpu.present=true (and matching `selector`), with only `labels` (None: all):
        one metadata-only list."""
        return [node for node, _ in self.node_documents(label_selector(GPU_SELECTOR, selector), labels)]

    def nodes(
        self, selector: LabelSelector | None = None, labels: Collection[str] | None = None
    ) -> list[Node]:
        """Every node, whatever its labels (those matching `selector`), with only `labels` (None: all):
        one metadata-only list."""
        return [node for node, _ in self.node_documents(label_selector("", selector), labels)]

    def node_documents(
        self, selector: str, labels: Collection[str] | None
    ) -> Iterator[tuple[Node, dict[str, Any]]]:
        """Each node as it arrives, with its metadata document (for the annotations a caller keeps)."""
        shared: dict[str, str] = {}
        query = {"labelSelector": selector or None}
        request = partial(self.gateway.request, "GET", NODES, query, accept=METADATA_LIST)
        for item in self.gateway.items(request, shapes.NODE):
            yield kube.kept(kube.node(item), labels, shared), item

    def cordoned(self, selector: str) -> set[str]:
        """The names of the nodes marked unschedulable (spec, not metadata: a second, small list)."""
        query = {"labelSelector": selector or None, "fieldSelector": "spec.unschedulable=true"}
        items = self.gateway.items(
            lambda: self.gateway.request("GET", NODES, query, accept=METADATA_LIST), shapes.NODE
        )
        return {kube.node(item).name for item in items}

    def node(self, name: str) -> Node | None:
        document = self.gateway.read(
            lambda: self.gateway.request("GET", f"{NODES}/{kube.segment(name)}", accept=METADATA_ONE),
            missing_ok=True,
            shape=shapes.NODE,
        )
        return None if document is None else kube.node(document)

    def budget_specs(self, namespace: str) -> list[diff.Budget]:
        """The namespace's PodDisruptionBudgets (policy/v1), identity and spec, as the diff compares them."""
        path = f"/apis/policy/v1/namespaces/{kube.segment(namespace)}/poddisruptionbudgets"
        items = self.gateway.items(lambda: self.gateway.request("GET", path), shapes.BUDGET)
        return [kube.budget_spec(item) for item in items]

    def pods(self, namespace: str) -> Iterator[dict[str, Any]]:
        """The namespace's pods as plain JSON documents (spec and status are needed, not only metadata),
        each as it arrives."""
        path = f"/api/v1/namespaces/{kube.segment(namespace)}/pods"
        return self.gateway.items(lambda: self.gateway.request("GET", path), shapes.POD)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{kube.segment(namespace)}/pods/{kube.segment(name)}"
        document: dict[str, Any] | None = self.gateway.read(
            lambda: self.gateway.request("GET", path), missing_ok=True, shape=shapes.POD
        )
        return document
