"""Reads and writes an upgrade needs: whole nodes, pods on a node, PDBs, evictions, patches, events.

Everything goes through the official client with `_preload_content=False` and JSON parsed here:
the client's model layer is slow for lists and strict about bodies we build as plain dicts.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.cluster import TIMEOUT, Cluster
from reconciler.core import budget
from reconciler.core.tags import GPU_PRESENT, Node
from reconciler.core.upgrade import LiveNode
from reconciler.errors import GpudrvError

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "gpudrv"
EVENT_NAMESPACE = "default"  # Node events live in the default namespace, as the kubelet's do


@dataclass(frozen=True)
class Eviction:
    """The eviction API's answer: evicted, refused (429 and friends, with why), or the pod is gone."""

    outcome: str  # evicted, refused, gone
    message: str = ""


class Conflict(Exception):
    """A write lost a race (HTTP 409): someone changed the object since we read it."""


class Fleet:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.host = cluster.host

    # --- reads -----------------------------------------------------------------------------------

    def gpu_nodes(self) -> list[LiveNode]:
        core = self._core()
        page = self._read(
            lambda: core.list_node_with_http_info(label_selector=f"{GPU_PRESENT}=true", **_raw())
        )
        return [live_node(item) for item in page.get("items") or []]

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        """The node and its resourceVersion, or None if there is no such node."""
        core = self._core()
        document = self._read(lambda: core.read_node_with_http_info(name, **_raw()), missing_ok=True)
        if document is None:
            return None
        return live_node(document), str(document["metadata"].get("resourceVersion", ""))

    def pods_on(self, node: str) -> list[budget.Pod]:
        core = self._core()
        page = self._read(
            lambda: core.list_pod_for_all_namespaces_with_http_info(
                field_selector=f"spec.nodeName={node}", **_raw()
            )
        )
        return [pod(item) for item in page.get("items") or []]

    def budgets(self) -> list[budget.Budget]:
        policy = self._policy()
        page = self._read(
            lambda: policy.list_pod_disruption_budget_for_all_namespaces_with_http_info(**_raw())
        )
        return [pdb(item) for item in page.get("items") or []]

    # --- writes ----------------------------------------------------------------------------------

    def patch_node(
        self,
        name: str,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        resource_version: str | None = None,
    ) -> None:
        """A JSON merge patch; a None value removes the key.

        With resource_version, the patch only applies to that version: a lost race raises Conflict.
        """
        metadata: dict[str, Any] = {}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if resource_version:
            metadata["resourceVersion"] = resource_version
        body: dict[str, Any] = {"metadata": metadata} if metadata else {}
        if unschedulable is not None:
            body["spec"] = {"unschedulable": unschedulable or None}
        core = self._core()
        self._write(lambda: core.patch_node_with_http_info(name, body, _content_type=MERGE_PATCH, **_raw()))

    def evict(self, target: budget.Pod) -> Eviction:
        from kubernetes.client import V1Eviction, V1ObjectMeta
        from kubernetes.client.exceptions import ApiException

        body = V1Eviction(metadata=V1ObjectMeta(name=target.name, namespace=target.namespace))
        core = self._core()
        try:
            self._write(
                lambda: core.create_namespaced_pod_eviction_with_http_info(
                    target.name, target.namespace, body, **_raw()
                ),
                raw=True,
            )
        except ApiException as exc:
            if exc.status == 404:
                return Eviction("gone")
            if exc.status in (429, 500):  # 429: a budget said no; 500: several budgets select the pod
                return Eviction("refused", _refusal(exc))
            raise self._error(exc) from None
        return Eviction("evicted")

    def delete_pod(self, target: budget.Pod) -> None:
        from kubernetes.client.exceptions import ApiException

        core = self._core()
        try:
            self._write(
                lambda: core.delete_namespaced_pod_with_http_info(target.name, target.namespace, **_raw()),
                raw=True,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise self._error(exc) from None

    def apply_budget(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        """Server-side apply as field manager gpudrv, forcing conflicts: git is the source of truth."""
        manifest = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": dict(spec),
        }
        policy = self._policy()
        self._write(
            lambda: policy.patch_namespaced_pod_disruption_budget_with_http_info(
                name,
                namespace,
                manifest,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY_PATCH,
                **_raw(),
            )
        )

    def read_budget(self, namespace: str, name: str) -> budget.Budget | None:
        policy = self._policy()
        found = self._read(
            lambda: policy.read_namespaced_pod_disruption_budget_with_http_info(name, namespace, **_raw()),
            missing_ok=True,
        )
        return None if found is None else pdb(found)

    def event(self, node: str, reason: str, message: str, warning: bool = False) -> None:
        """A Node event, so `kubectl describe node` and `kubectl get events` show what gpudrv did."""
        from kubernetes.client import CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference

        now = datetime.now(UTC)
        body = CoreV1Event(
            metadata=V1ObjectMeta(generate_name=f"{node}.gpudrv-", namespace=EVENT_NAMESPACE),
            involved_object=V1ObjectReference(kind="Node", name=node, api_version="v1"),
            reason=reason,
            message=message[:1024],
            type="Warning" if warning else "Normal",
            source=V1EventSource(component=FIELD_MANAGER, host=socket.gethostname()),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        core = self._core()
        self._write(lambda: core.create_namespaced_event_with_http_info(EVENT_NAMESPACE, body, **_raw()))

    # --- plumbing --------------------------------------------------------------------------------

    def _core(self) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.cluster.api_client)

    def _policy(self) -> Any:
        from kubernetes.client import PolicyV1Api

        return PolicyV1Api(self.cluster.api_client)

    def _read(self, request: Any, missing_ok: bool = False) -> Any:
        return self.cluster._call(request, missing_ok=missing_ok)

    def _write(self, request: Any, raw: bool = False) -> None:
        """Run a write. A lost race raises Conflict; other API errors become GpudrvError unless
        `raw`, for callers that read the status themselves (evictions)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            _ = request().data  # read the whole answer: a pooled connection must not keep unread bytes
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict(_message(exc)) from None
            if raw:
                raise
            raise self._error(exc) from None
        except HTTPError as exc:
            raise GpudrvError(f"cannot reach the cluster at {self.host}: {_short(exc)}") from None

    def _error(self, exc: Any) -> GpudrvError:
        return GpudrvError(f"the cluster at {self.host} answered {exc.status} {exc.reason}: {_message(exc)}")


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:200] + "..."


def _raw() -> dict[str, Any]:
    return {"_preload_content": False, "_request_timeout": TIMEOUT}


def live_node(document: Mapping[str, Any]) -> LiveNode:
    metadata = document.get("metadata") or {}
    node = Node(str(metadata.get("name", "")), dict(metadata.get("labels") or {}))
    spec = document.get("spec") or {}
    return LiveNode(node, bool(spec.get("unschedulable")), dict(metadata.get("annotations") or {}))


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
        terminating=bool(metadata.get("deletionTimestamp")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (document.get("status") or {}).get("conditions") or []
        ),
    )


def _requests_gpu(spec: Mapping[str, Any]) -> bool:
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        if any(budget.GPU_RESOURCE in (resources.get(kind) or {}) for kind in ("limits", "requests")):
            return True
    return False


def pdb(document: Mapping[str, Any]) -> budget.Budget:
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
        expected_pods=int(status.get("expectedPods", 0)),
        fresh=int(status.get("observedGeneration", 0)) >= int(metadata.get("generation", 0)),
    )


def _message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message", "")).strip() or str(exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "reason", exc))


def _refusal(exc: Any) -> str:
    """The API server's own words, with the budget's cause when it gives one."""
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        return str(exc.reason)
    causes = [
        str(c.get("message", "")) for c in (body.get("details") or {}).get("causes") or [] if c.get("message")
    ]
    return " ".join([str(body.get("message", "")).strip(), *causes]).strip()
