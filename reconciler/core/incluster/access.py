"""What `gpudrv reconcile` may do in the cluster, as the API server's authorizer is asked about it.

The requests the code sends are listed here once, next to why: `gpudrv reconcile --check-access`
asks the API server about each (SelfSubjectAccessReview), and the deployment's roles in deploy/ are
held to them by the end-to-end tests. `excess` lists what the identity should NOT be able to do in
that mode: an audit-only deployment that could patch nodes, evict pods or read Secrets has been given
more than it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

EVENT_NAMESPACE = "default"  # Node events live in the default namespace, as the kubelet's do


@dataclass(frozen=True)
class Access:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""  # "" for cluster-scoped resources, or every namespace
    name: str = ""
    why: str = ""

    def text(self) -> str:
        """As `kubectl auth can-i` takes it: `patch nodes`, `create pods/eviction -A`."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            resource += f"/{self.subresource}"
        if self.name:
            resource += f"/{self.name}" if not self.subresource else f" {self.name}"
        where = f" -n {self.namespace}" if self.namespace else ""
        return f"{self.verb} {resource}{where}"

    def attributes(self) -> dict[str, str]:
        """The ResourceAttributes of an access review."""
        fields = {
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {key: value for key, value in fields.items() if value}


def audit_needs(lease_namespace: str | None, lease_name: str) -> tuple[Access, ...]:
    """The audit loop: watch GPU nodes, read the GPU Operator's driver resources, write Node events,
    and (unless leader election is off: `lease_namespace` None) hold the Lease."""
    needs = [
        Access("list", "nodes", why="the GPU nodes, metadata only"),
        Access("watch", "nodes", why="nodes joining or changing labels, audited at once"),
        Access("list", "clusterpolicies", "nvidia.com", why="the GPU Operator's driver contract"),
        Access("list", "nvidiadrivers", "nvidia.com", why="the GPU Operator's driver contract"),
        Access("create", "events", namespace=EVENT_NAMESPACE, why="DriverImageMissing on the Node"),
        Access("get", "events", namespace=EVENT_NAMESPACE, why="an existing event, to count it again"),
        Access("patch", "events", namespace=EVENT_NAMESPACE, why="count/lastTimestamp, not a new event"),
    ]
    if lease_namespace is not None:
        needs += [
            Access("create", "leases", "coordination.k8s.io", namespace=lease_namespace,
                   why="leader election: the first replica creates the Lease"),
            Access("get", "leases", "coordination.k8s.io", namespace=lease_namespace, name=lease_name,
                   why="leader election"),
            Access("update", "leases", "coordination.k8s.io", namespace=lease_namespace, name=lease_name,
                   why="leader election: take, renew and release the Lease"),
        ]  # fmt: skip
    return tuple(needs)


# `gpudrv apply` (run by `reconcile --apply`): reconciler/adapters/fleet.py's requests, without --force.
APPLY_NEEDS = (
    Access("get", "nodes", why="apply: a node and its resourceVersion"),
    Access("patch", "nodes", why="apply: cordon, state label, driver labels, owner annotation"),
    Access("list", "pods", why="apply: the pods on a node (every namespace)"),
    Access("create", "pods", subresource="eviction", why="apply: drain through the eviction API"),
    Access("list", "poddisruptionbudgets", "policy", why="apply: the budget gate"),
    Access("patch", "poddisruptionbudgets", "policy", why="apply: server-side apply of budgets in git"),
    # A server-side apply that creates the object is authorized as a create.
    Access("create", "poddisruptionbudgets", "policy", why="apply: a budget declared in git, absent live"),
    # Never two controllers on one label: lab mode first looks for the GPU Operator.
    Access("list", "deployments", "apps", why="apply: is the GPU Operator's Deployment there"),
    Access("list", "daemonsets", "apps", why="apply: are the GPU Operator's driver DaemonSets there"),
    # On an operator fleet (reconciler/commands/rollout.py): the driver resources from git, the
    # operator's upgrade events on nodes for the stalls it explains.
    Access("get", "clusterpolicies", "nvidia.com", why="apply: what differs from git, and who owns it"),
    Access("get", "nvidiadrivers", "nvidia.com", why="apply: what differs from git, and who owns it"),
    Access("patch", "clusterpolicies", "nvidia.com", why="apply: server-side apply of the ClusterPolicy"),
    Access("create", "clusterpolicies", "nvidia.com", why="apply: a ClusterPolicy in git, absent live"),
    Access("patch", "nvidiadrivers", "nvidia.com", why="apply: server-side apply of NVIDIADrivers"),
    Access("create", "nvidiadrivers", "nvidia.com", why="apply: an NVIDIADriver in git, absent live"),
    Access("list", "events", why="apply: the operator's GPUDriverUpgrade events, why a node failed"),
)

# Never needed in any mode: reading these would only widen what a compromised pod could reach.
NEVER = (
    Access("get", "secrets", why="never needed: git credentials come from the pod's own mounted files"),
    Access("list", "secrets", why="never needed"),
    Access("delete", "nodes", why="never needed"),
    Access("delete", "pods", why="never needed: apply evicts (reconcile never passes --force)"),
)


def needs(lease_namespace: str | None, lease_name: str, apply: bool) -> tuple[Access, ...]:
    return audit_needs(lease_namespace, lease_name) + (APPLY_NEEDS if apply else ())


def excess(apply: bool) -> tuple[Access, ...]:
    """What this mode must not be allowed: apply's writes when auditing only, and NEVER always."""
    return NEVER if apply else APPLY_NEEDS + NEVER


@dataclass(frozen=True)
class Answer:
    """The API server's answer to one access review."""

    access: Access
    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class Report:
    """What `reconcile --check-access` found: who gpudrv is, and each needed and excessive access."""

    user: str
    needed: list[Answer]  # what the mode needs
    excessive: list[Answer]  # what it must not be able to do

    @property
    def missing(self) -> list[Answer]:
        return [answer for answer in self.needed if not answer.allowed]

    @property
    def excess(self) -> list[Answer]:
        return [answer for answer in self.excessive if answer.allowed]
