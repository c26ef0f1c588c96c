"""Every resource gpudrv reads or writes, and the one place its URL is built.

A resource is its API group, version, plural and scope, and the shape of one object of it (shapes.py):
the gateway reads nothing without one. No other module spells an API path (a test checks that).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from reconciler.adapters.kube import shapes
from reconciler.adapters.kube.shapes import Shape
from reconciler.core.contract.operator import API_VERSIONS, PLURALS, Kind


def segment(name: str) -> str:
    """A name as one URL path segment, quoted as the generated API methods quote path parameters."""
    return quote(name, safe="")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group (/api/v1)
    version: str
    plural: str
    namespaced: bool
    shape: Shape  # of one object

    @property
    def kind(self) -> str:
        return self.shape.kind

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
        """The collection (every namespace's when `namespace` is None), or the object `name` in it, or
        its subresource; each name quoted as one segment."""
        if name is not None and self.namespaced and namespace is None:
            raise ValueError(f"a {self.plural} object needs its namespace")
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{segment(namespace)}" if self.namespaced and namespace is not None else ""
        path = f"{root}{where}/{self.plural}"
        if name is not None:
            path += f"/{segment(name)}"
        return f"{path}/{subresource}" if subresource else path


NODES = Resource("", "v1", "nodes", False, shapes.NODE)
PODS = Resource("", "v1", "pods", True, shapes.POD)
EVENTS = Resource("", "v1", "events", True, shapes.EVENT)
BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", True, shapes.BUDGET)
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, shapes.LEASE)
DEPLOYMENTS = Resource("apps", "v1", "deployments", True, shapes.DEPLOYMENT)
DAEMONSETS = Resource("apps", "v1", "daemonsets", True, shapes.DAEMONSET)
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", True, shapes.CONTROLLER_REVISION)
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", False, shapes.SELF_SUBJECT_REVIEW
)
SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", False, shapes.SELF_SUBJECT_ACCESS_REVIEW
)


def _driver(kind: Kind, shape: Shape) -> Resource:
    group, version = API_VERSIONS[kind].split("/")
    return Resource(group, version, PLURALS[kind], False, shape)


# The GPU Operator's driver resources, from the core's one record of their API versions and plurals.
DRIVER_RESOURCES: Mapping[Kind, Resource] = {
    Kind.CLUSTER_POLICY: _driver(Kind.CLUSTER_POLICY, shapes.CLUSTER_POLICY),
    Kind.NVIDIA_DRIVER: _driver(Kind.NVIDIA_DRIVER, shapes.NVIDIA_DRIVER),
}
CLUSTER_POLICIES = DRIVER_RESOURCES[Kind.CLUSTER_POLICY]
NVIDIA_DRIVERS = DRIVER_RESOURCES[Kind.NVIDIA_DRIVER]
