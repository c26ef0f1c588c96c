"""What a rollout on a GPU Operator fleet reads and writes besides the nodes: the operator's driver and
validator pods, its upgrade events on the nodes, and the driver resources applied from git."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.adapters import api_shapes, kube
from reconciler.adapters.fleet import APPLY_PATCH, FIELD_MANAGER
from reconciler.core import operator
from reconciler.core.budget import Pod
from reconciler.core.executor import DRIVER_APP
from reconciler.core.operator import DriverResource
from reconciler.core.supervise import EVENT_REASON, VALIDATOR_APP, DriverPod


def driver_pods(gateway: kube.Gateway) -> dict[str, DriverPod]:
    """The operator's driver pod on each node (by spec.nodeName); the newest when a node has two."""
    found: dict[str, tuple[str, DriverPod]] = {}
    for item in _pods(gateway, f"app={DRIVER_APP}"):
        node = str((item.get("spec") or {}).get("nodeName") or "")
        if not node:
            continue
        metadata = item.get("metadata") or {}
        created = str(metadata.get("creationTimestamp") or "")
        if node in found and found[node][0] >= created:
            continue
        found[node] = (created, _driver_pod(item))
    return {node: pod for node, (_, pod) in found.items()}


def _driver_pod(item: Mapping[str, Any]) -> DriverPod:
    metadata = item.get("metadata") or {}
    spec = item.get("spec") or {}
    status = item.get("status") or {}
    containers = spec.get("containers") or [{}]
    statuses = status.get("containerStatuses") or []
    waiting = next(
        (
            (s.get("state") or {}).get("waiting") or {}
            for s in statuses
            if (s.get("state") or {}).get("waiting")
        ),
        {},
    )
    terminating = bool(metadata.get("deletionTimestamp"))
    return DriverPod(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        image=str(containers[0].get("image") or ""),
        ready=not terminating and _ready(item),
        waiting=str(waiting.get("reason") or ""),
        message=str(waiting.get("message") or ""),
    )


def validator_pods(gateway: kube.Gateway) -> dict[str, tuple[Pod, bool]]:
    """The operator's validator pod on each node, and whether it is Ready."""
    found: dict[str, tuple[Pod, bool]] = {}
    for item in _pods(gateway, f"app={VALIDATOR_APP}"):
        node = str((item.get("spec") or {}).get("nodeName") or "")
        if node:
            found[node] = (kube.pod(item), _ready(item))
    return found


def _pods(gateway: kube.Gateway, selector: str) -> list[dict[str, Any]]:
    core = gateway.core()
    return list(
        gateway.items(
            lambda: core.list_pod_for_all_namespaces_with_http_info(label_selector=selector, **kube.raw()),
            api_shapes.POD,
        )
    )


def _ready(item: Mapping[str, Any]) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def upgrade_events(gateway: kube.Gateway) -> dict[str, list[str]]:
    """The operator's upgrade events (reason GPUDriverUpgrade) per node, oldest first; its Warnings
    (why a step failed) after its Normal ones (each state it set), so the last says why."""
    core = gateway.core()
    items = gateway.items(
        lambda: core.list_event_for_all_namespaces_with_http_info(
            field_selector=f"reason={EVENT_REASON},involvedObject.kind=Node", **kube.raw()
        )
    )
    found: dict[str, list[tuple[bool, str, str]]] = {}
    for item in items:
        involved = item.get("involvedObject") or {}
        when = str(item.get("lastTimestamp") or item.get("eventTime") or "")
        warning = item.get("type") == "Warning"
        found.setdefault(str(involved.get("name") or ""), []).append(
            (warning, when, str(item.get("message") or ""))
        )
    return {node: [message for *_, message in sorted(events)] for node, events in found.items()}


def apply_resource(gateway: kube.Gateway, item: DriverResource) -> None:
    """Server-side apply of the driver resource as declared in git: field manager gpudrv, conflicts
    forced (git is the source of truth, as for the budgets)."""
    group, version = operator.API_VERSIONS[item.kind].split("/")
    body = {
        "apiVersion": operator.API_VERSIONS[item.kind],
        "kind": str(item.kind),
        "metadata": {"name": item.name},
        "spec": dict(item.spec),
    }
    custom = gateway.custom()
    gateway.write(
        lambda: custom.patch_cluster_custom_object_with_http_info(
            group,
            version,
            operator.PLURALS[item.kind],
            item.name,
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY_PATCH,
            **kube.raw(),
        )
    )
