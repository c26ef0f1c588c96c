"""What the read-only commands (tag, audit, impact, explain, diff) read from the live cluster.

Node reads ask for metadata only (PartialObjectMetadata): labels are all that tags and audits need,
and whole Node objects dominate the cost of bulk lists.
"""

from __future__ import annotations

from typing import Any

from reconciler.adapters import api_shapes, kube
from reconciler.core import diff
from reconciler.core.label_selector import LabelSelector
from reconciler.core.tags import GPU_PRESENT, Node

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def connect(options: kube.Options) -> Cluster:
    return Cluster(kube.connect(options))


def label_selector(base: str, selector: LabelSelector | None) -> str:
    """The labelSelector parameter: `base` and the user's -l, both (the API server ANDs them)."""
    return ",".join(part for part in (base, selector.text() if selector else "") if part)


class Cluster:
    """Every method reads fresh from the API server."""

    def __init__(self, gateway: kube.Gateway) -> None:
        self.gateway = gateway
        self.host = gateway.host

    def gpu_nodes(self, selector: LabelSelector | None = None) -> list[Node]:
        """All nodes labelled gpu.present=true (and matching `selector`): one paginated metadata-only list."""
        return self._nodes(label_selector(f"{GPU_PRESENT}=true", selector))

    def nodes(self, selector: LabelSelector | None = None) -> list[Node]:
        """Every node, whatever its labels (those matching `selector`): one paginated metadata-only list."""
        return self._nodes(label_selector("", selector))

    def node(self, name: str) -> Node | None:
        core = self.gateway.core()
        document = self.gateway.read(
            lambda: core.read_node_with_http_info(name, **kube.raw(_headers={"Accept": METADATA_ONE})),
            missing_ok=True,
            shape=api_shapes.NODE,
        )
        return None if document is None else kube.node(document)

    def budget_specs(self, namespace: str) -> list[diff.Budget]:
        """The namespace's PodDisruptionBudgets (policy/v1), identity and spec, as the diff compares them."""
        policy = self.gateway.policy()
        items = self.gateway.items(
            lambda: policy.list_namespaced_pod_disruption_budget_with_http_info(namespace, **kube.raw()),
            api_shapes.BUDGET,
        )
        return [kube.budget_spec(item) for item in items]

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's pods as plain JSON documents (spec and status are needed, not only metadata)."""
        core = self.gateway.core()
        return list(
            self.gateway.pages(
                lambda token: core.list_namespaced_pod_with_http_info(
                    namespace, limit=kube.PAGE_SIZE, _continue=token, **kube.raw()
                ),
                api_shapes.POD,
            )
        )

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        core = self.gateway.core()
        document: dict[str, Any] | None = self.gateway.read(
            lambda: core.read_namespaced_pod_with_http_info(name, namespace, **kube.raw()),
            missing_ok=True,
            shape=api_shapes.POD,
        )
        return document

    def _nodes(self, selector: str) -> list[Node]:
        core = self.gateway.core()
        items = self.gateway.pages(
            lambda token: core.list_node_with_http_info(
                label_selector=selector,
                limit=kube.PAGE_SIZE,
                _continue=token,
                **kube.raw(_headers={"Accept": METADATA_LIST}),
            ),
            api_shapes.NODE,
        )
        return [kube.node(item) for item in items]
