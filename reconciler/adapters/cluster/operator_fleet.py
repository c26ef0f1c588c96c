"""What a rollout on a GPU Operator fleet reads and writes besides the nodes: the operator's driver and
validator pods, its upgrade events on the nodes, and the driver resources applied from git."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.adapters import kube
from reconciler.adapters.cluster.fleet import apply_without_force
from reconciler.core.contract import operator
from reconciler.core.contract.operator import DriverResource, Kind, Mode
from reconciler.core.rollout.supervise import EVENT_REASON, VALIDATOR_APP, DriverPod
from reconciler.core.upgrades.budget import Pod

# The driver pods the operator's upgrade controller manages (controllers/upgrade_controller.go:58-70,127-145):
# app=nvidia-driver-daemonset for a ClusterPolicy's DaemonSet, app.kubernetes.io/component=nvidia-driver
# for the DaemonSets of NVIDIADrivers (one per NVIDIADriver and pool, internal/state/driver.go).
CLUSTER_POLICY_DRIVERS = "app=nvidia-driver-daemonset"
NVIDIADRIVER_DRIVERS = "app.kubernetes.io/component=nvidia-driver"


def driver_selector(mode: Mode) -> str:
    return NVIDIADRIVER_DRIVERS if mode is Mode.NVIDIA_DRIVER else CLUSTER_POLICY_DRIVERS


def driver_pods(gateway: kube.Gateway, mode: Mode = Mode.CLUSTER_POLICY) -> dict[str, DriverPod]:
    """The operator's driver pod on each node (by spec.nodeName); the newest when a node has two. With
    NVIDIADrivers, each pod names the NVIDIADriver that owns its DaemonSet."""
    owners = driver_daemonsets(gateway) if mode is Mode.NVIDIA_DRIVER else {}
    found: dict[str, tuple[str, DriverPod]] = {}
    for item in _pods(gateway, driver_selector(mode)):
        node = str((item.get("spec") or {}).get("nodeName") or "")
        if not node:
            continue
        metadata = item.get("metadata") or {}
        created = str(metadata.get("creationTimestamp") or "")
        if node in found and found[node][0] >= created:
            continue
        daemonset = _controller(metadata, "DaemonSet")
        owner = owners.get((str(metadata.get("namespace") or ""), daemonset), "")
        found[node] = (created, _driver_pod(item, owner))
    return {node: pod for node, (_, pod) in found.items()}


def driver_daemonsets(gateway: kube.Gateway) -> dict[tuple[str, str], str]:
    """(namespace, DaemonSet) -> the NVIDIADriver that controls it (its controller reference, set by
    internal/state/driver.go's SetControllerReference)."""
    items = gateway.pages(kube.DAEMONSETS, query={"labelSelector": NVIDIADRIVER_DRIVERS})
    found = {}
    for item in items:
        metadata = item.get("metadata") or {}
        owner = _controller(metadata, str(Kind.NVIDIA_DRIVER))
        if owner:
            found[(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))] = owner
    return found


def _controller(metadata: Mapping[str, Any], kind: str) -> str:
    """The name of the object's controller of `kind` ("" when it has none)."""
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller") is True:
            return str(ref.get("name") or "")
    return ""


def _driver_pod(item: Mapping[str, Any], owner: str = "") -> DriverPod:
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
        owner=owner,
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
    return list(gateway.items(kube.PODS, query={"labelSelector": selector}))


def _ready(item: Mapping[str, Any]) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def upgrade_events(gateway: kube.Gateway) -> dict[str, list[str]]:
    """The operator's upgrade events (reason GPUDriverUpgrade) per node, oldest first; its Warnings
    (why a step failed) after its Normal ones (each state it set), so the last says why."""
    items = gateway.items(
        kube.EVENTS, query={"fieldSelector": f"reason={EVENT_REASON},involvedObject.kind=Node"}
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


def live_document(gateway: kube.Gateway, kind: Kind, name: str) -> dict[str, Any] | None:
    """The driver resource as the cluster has it, managedFields included; None when it is absent
    (or its CRD is not installed)."""
    return gateway.get(kube.DRIVER_RESOURCES[kind], name, missing_ok=True)


# What to do when a field of a driver resource is another manager's (docs/gitops.md).
ADVICE = (
    "Change it there, or stage the rollout around that manager's sync (gpudrv apply --hold before it, "
    "--await-sync after it)"
)


def apply_resource(gateway: kube.Gateway, item: DriverResource) -> None:
    """Server-side apply of the driver resource as declared in git, field manager gpudrv, never
    forced (fleet.apply_without_force): a field another manager owns is refused by the API server
    (409), named in one line, not taken."""
    body = {
        "apiVersion": operator.API_VERSIONS[item.kind],
        "kind": str(item.kind),
        "metadata": {"name": item.name},
        "spec": dict(item.spec),
    }
    apply_without_force(gateway, kube.DRIVER_RESOURCES[item.kind], body, ref=item.ref, advice=ADVICE)
