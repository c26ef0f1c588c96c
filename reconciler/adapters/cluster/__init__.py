"""What the read-only commands (tag, audit, impact, explain, diff) read from the live cluster.

Node reads ask for metadata only (PartialObjectMetadata): labels are all that tags and audits need,
and whole Node objects dominate the cost of bulk lists. A list is one request, streamed (Gateway.items),
and each node keeps only the labels its command reads (core.reads): docs/scale.md has the figures.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from reconciler.adapters import kube
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.images.tags import GPU_PRESENT, Node
from reconciler.core.views import diff

METADATA_LIST = kube.METADATA_LIST
METADATA_ONE = kube.METADATA_ONE
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
        for item in self.gateway.items(kube.NODES, query=query, accept=METADATA_LIST):
            yield kube.kept(kube.node(item), labels, shared), item

    def cordoned(self, selector: str) -> set[str]:
        """The names of the nodes marked unschedulable (spec, not metadata: a second, small list)."""
        query = {"labelSelector": selector or None, "fieldSelector": "spec.unschedulable=true"}
        items = self.gateway.items(kube.NODES, query=query, accept=METADATA_LIST)
        return {kube.node(item).name for item in items}

    def node(self, name: str) -> Node | None:
        document = self.gateway.get(kube.NODES, name, missing_ok=True, accept=METADATA_ONE)
        return None if document is None else kube.node(document)

    def budget_specs(self, namespace: str) -> list[diff.Budget]:
        """The namespace's PodDisruptionBudgets (policy/v1), identity and spec, as the diff compares them."""
        items = self.gateway.items(kube.BUDGETS, namespace)
        return [kube.budget_spec(item) for item in items]

    def pods(self, namespace: str) -> Iterator[dict[str, Any]]:
        """The namespace's pods as plain JSON documents (spec and status are needed, not only metadata),
        each as it arrives."""
        return self.gateway.items(kube.PODS, namespace)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.gateway.get(kube.PODS, name, namespace, missing_ok=True)
