"""The GPU Operator as it runs in the cluster: its driver resources (ClusterPolicy, NVIDIADriver), the
release its Deployment runs, the contract they make, and whether it is there at all (lab mode must
not run beside it)."""

from __future__ import annotations

from typing import Any

from reconciler.adapters import kube
from reconciler.core.contract import driver_images, operator
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.errors import GpudrvError

OPERATOR_SELECTOR = "app.kubernetes.io/component=gpu-operator"  # the Helm chart's and OLM's pod label


def live_resources(gateway: kube.Gateway) -> list[DriverResource]:
    """Every ClusterPolicy and NVIDIADriver in the cluster; none when their CRDs are not installed."""
    found: list[DriverResource] = []
    for kind in Kind:
        try:
            items = list(gateway.pages(kube.DRIVER_RESOURCES[kind]))
        except kube.NotFound:
            continue  # the CRD is not installed: no such resource
        found.extend(_live_resource(kind, item) for item in items)
    return found


def _live_resource(kind: Kind, document: dict[str, Any]) -> DriverResource:
    name = str((document.get("metadata") or {}).get("name", ""))
    try:
        return operator.resource({**document, "kind": str(kind)})
    except operator.ResourceError as exc:
        raise GpudrvError(f"{kind}/{name} in the cluster: {exc}") from None


def operator_deployments(gateway: kube.Gateway) -> kube.Listing:
    """The GPU Operator's Deployments in every namespace (the one way gpudrv lists them)."""
    return gateway.pages(kube.DEPLOYMENTS, query={"labelSelector": OPERATOR_SELECTOR})


def live_operator_version(gateway: kube.Gateway) -> str | None:
    """The release of the running GPU Operator: its Deployment's image tag; None when none runs."""
    try:
        items = list(operator_deployments(gateway))
    except kube.Forbidden as exc:
        raise GpudrvError(
            f"cannot read the GPU Operator's Deployment to learn its release ({exc.message}); "
            "pass --operator-version or set operatorVersion in gpudrv.yaml"
        ) from None
    for item in items:
        if (item.get("metadata") or {}).get("deletionTimestamp"):
            continue  # an operator being removed no longer decides anything
        containers = (((item.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or []
        for container in containers:
            image = str(container.get("image") or "")
            tag = driver_images.tag_of(image.split("@", 1)[0])
            if "gpu-operator" in image and tag:
                return tag
    return None


# --- who owns the upgrade state label ------------------------------------------------------------------

# The operator's driver DaemonSets: app=nvidia-driver-daemonset (ClusterPolicy), and
# app.kubernetes.io/component=nvidia-driver (NVIDIADriver) (controllers/upgrade_controller.go).
DRIVER_DAEMONSET_SELECTORS = ("app=nvidia-driver-daemonset", "app.kubernetes.io/component=nvidia-driver")


def operator_present(gateway: kube.Gateway) -> str | None:
    """What shows that the GPU Operator's upgrade controller owns nvidia.com/gpu-driver-upgrade-state in
    this cluster, in words (a ClusterPolicy, the operator's Deployment, a driver DaemonSet); None when
    nothing does. Lab mode refuses to run beside it: two controllers must never drive one label."""
    try:
        return _policy_found(gateway) or _deployment_found(gateway) or _driver_daemonset_found(gateway)
    except kube.Forbidden as exc:
        raise GpudrvError(
            f"cannot tell whether the GPU Operator runs in the cluster at {gateway.host} ({exc.message}); "
            "lab mode needs to read ClusterPolicies, Deployments and DaemonSets first"
        ) from None


def _policy_found(gateway: kube.Gateway) -> str | None:
    try:  # one page of one: any ClusterPolicy will do
        first = next(iter(gateway.pages(kube.CLUSTER_POLICIES, limit=1)), None)
    except kube.NotFound:
        return None  # the CRD is not installed
    if first is None:
        return None
    return f"ClusterPolicy {first['metadata']['name']}"


def _deployment_found(gateway: kube.Gateway) -> str | None:
    for item in operator_deployments(gateway):
        metadata = item["metadata"]
        if not metadata.get("deletionTimestamp"):
            return f"the GPU Operator's Deployment {metadata.get('namespace')}/{metadata.get('name')}"
    return None


def _driver_daemonset_found(gateway: kube.Gateway) -> str | None:
    for selector in DRIVER_DAEMONSET_SELECTORS:
        first = next(iter(gateway.items(kube.DAEMONSETS, query={"labelSelector": selector})), None)
        if first is not None:
            metadata = first["metadata"]
            return f"driver DaemonSet {metadata.get('namespace')}/{metadata.get('name')} ({selector})"
    return None
