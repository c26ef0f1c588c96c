"""The one gateway to the Kubernetes API: the client, the JSON it returns as core data, and its errors.

Only this package imports `kubernetes` (its _transport and _config modules; an import contract says
so), and only inside functions, so offline commands never pay for it. Requests go through the
client's `ApiClient` (`Gateway.request`: its configuration, auth and connection pool) without the
generated API classes: importing `CoreV1Api` alone costs about 1.5 s and 20 MiB of pydantic models,
more than a 5,000-node list. HTTP statuses become typed errors once, here; callers catch NotFound or
Conflict, never a status.

Its modules, one concern each (callers import this package, never them):
- _errors: ApiError and one subclass per status a caller acts on; Unreachable; NoCluster.
- _transport: the request, the pool that bounds every answer (MAX_BODY, the total timeout), the
  timeouts each client holds (--request-timeout, as kubectl's; urllib3 retries nothing on its own).
- _config: connect(): the kubeconfig checked before the client reads it, exec plugins under a timeout.
- _resources: the table of resources (group, version, plural, scope, shape) and the URL of each.
- _gateway: the verbs (get, items, pages, create, replace, write, watch), each answer shape-checked.
- _paging: the one paging loop (a continue token sent twice, or more than MAX_PAGES pages, is an error).
- _watch: watch streams, each event checked (type, shape, kind).
- _convert: the API's JSON as core data (nodes, pods, budgets).
- shapes (with _schema): the shape of every document read; jsonstream: a list read as it arrives.
"""

from reconciler.adapters.kube._config import EXEC_TIMEOUT, Options, connect, exec_timeout, preload, streaming
from reconciler.adapters.kube._convert import (
    budget_spec,
    disruption_budget,
    kept,
    kept_annotations,
    live_node,
    node,
    pod,
)
from reconciler.adapters.kube._errors import (
    NO_CLUSTER,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    NoCluster,
    NotFound,
    TooManyRequests,
    Unreachable,
)
from reconciler.adapters.kube._gateway import Gateway
from reconciler.adapters.kube._paging import MAX_PAGES, PAGE_SIZE, Listing
from reconciler.adapters.kube._resources import (
    BUDGETS,
    CLUSTER_POLICIES,
    CONTROLLER_REVISIONS,
    DAEMONSETS,
    DEPLOYMENTS,
    DRIVER_RESOURCES,
    EVENTS,
    LEASES,
    NODES,
    NVIDIA_DRIVERS,
    PODS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_REVIEWS,
    Resource,
    segment,
)
from reconciler.adapters.kube._transport import (
    JSON,
    MAX_BODY,
    METADATA_LIST,
    METADATA_ONE,
    TIMEOUT,
    USER_AGENT,
    Timeouts,
)
from reconciler.adapters.kube._watch import Stream

__all__ = [
    "BUDGETS",
    "CLUSTER_POLICIES",
    "CONTROLLER_REVISIONS",
    "DAEMONSETS",
    "DEPLOYMENTS",
    "DRIVER_RESOURCES",
    "EVENTS",
    "EXEC_TIMEOUT",
    "JSON",
    "LEASES",
    "MAX_BODY",
    "MAX_PAGES",
    "METADATA_LIST",
    "METADATA_ONE",
    "NODES",
    "NO_CLUSTER",
    "NVIDIA_DRIVERS",
    "PAGE_SIZE",
    "PODS",
    "SELF_SUBJECT_ACCESS_REVIEWS",
    "SELF_SUBJECT_REVIEWS",
    "TIMEOUT",
    "USER_AGENT",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gateway",
    "Gone",
    "Listing",
    "NoCluster",
    "NotFound",
    "Options",
    "Resource",
    "Stream",
    "Timeouts",
    "TooManyRequests",
    "Unreachable",
    "budget_spec",
    "connect",
    "disruption_budget",
    "exec_timeout",
    "kept",
    "kept_annotations",
    "live_node",
    "node",
    "pod",
    "preload",
    "segment",
    "streaming",
]
