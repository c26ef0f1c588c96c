"""The shape of what gpudrv reads from outside, checked before anything reads it: the API server's
objects (only the fields the adapters use) and a kubeconfig.

A server may be broken, old, or lying: `items` that is not a list, labels that are numbers, a status
that is a string. Each document is checked against a small JSON Schema of the fields gpudrv reads,
so the adapters can read them as the API documents them, and a document of another shape is one
clear error naming the server and the field, never a traceback. Fields gpudrv does not read are
not checked (a newer server may add any).

The check itself (compiled, with jsonschema as the authority) is _schema's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.adapters.kube._schema import Shape, describe, dotted, problem

__all__ = ["Shape", "describe", "dotted", "problem"]

# JSON null is the zero value to the API server's Go types: every field may be null (the adapters read
# a null as absent), and a field that is present has the type the API documents.
_STRING: dict[str, Any] = {"type": ["string", "null"]}
_STRINGS: dict[str, Any] = {"type": ["array", "null"], "items": {"type": "string"}}
_STRING_MAP: dict[str, Any] = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
_INT_OR_STRING: dict[str, Any] = {"type": ["integer", "string", "null"]}
_INTEGER: dict[str, Any] = {"type": ["integer", "null"]}
_BOOLEAN: dict[str, Any] = {"type": ["boolean", "null"]}


def _object(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    shape: dict[str, Any] = {"type": ["object", "null"], "properties": dict(properties)}
    if required:
        shape["required"] = list(required)
    return shape


def _list_of(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": ["array", "null"], "items": {**item, "type": "object"}}


_METADATA = _object(
    {
        "name": {"type": "string", "minLength": 1},  # required, never null
        "namespace": _STRING,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "resourceVersion": _STRING,
        "generation": _INTEGER,
        "deletionTimestamp": _STRING,
        "ownerReferences": _list_of(_object({"kind": _STRING, "name": _STRING, "controller": _BOOLEAN})),
        "continue": _STRING,
    },
    required=["name"],
)
_SELECTOR_TERMS = _list_of(
    _object(
        {
            "matchExpressions": _list_of(_object({"key": _STRING, "operator": _STRING, "values": _STRINGS})),
            "matchFields": _list_of(_object({"key": _STRING, "operator": _STRING, "values": _STRINGS})),
        }
    )
)
_CONTAINERS = _list_of(
    _object(
        {
            "name": _STRING,
            "image": _STRING,
            "resources": _object(
                {"limits": {"type": ["object", "null"]}, "requests": {"type": ["object", "null"]}}
            ),
        }
    )
)
_POD_SPEC = _object(
    {
        "nodeName": _STRING,
        "nodeSelector": _STRING_MAP,
        "containers": _CONTAINERS,
        "initContainers": _CONTAINERS,
        "affinity": _object(
            {
                "nodeAffinity": _object(
                    {
                        "requiredDuringSchedulingIgnoredDuringExecution": _object(
                            {"nodeSelectorTerms": _SELECTOR_TERMS}
                        )
                    }
                )
            }
        ),
    }
)


NODE = Shape(
    "Node",
    _object({"metadata": _METADATA, "spec": _object({"unschedulable": _BOOLEAN})}, ["metadata"]),
)
POD = Shape(
    "Pod",
    _object(
        {
            "metadata": _METADATA,
            "spec": _POD_SPEC,
            "status": _object(
                {
                    "phase": _STRING,
                    "conditions": _list_of(
                        _object({"type": _STRING, "status": _STRING, "message": _STRING, "reason": _STRING})
                    ),
                }
            ),
        },
        ["metadata"],
    ),
)
BUDGET = Shape(
    "PodDisruptionBudget",
    _object(
        {
            "metadata": _METADATA,
            "spec": _object(
                {
                    "minAvailable": _INT_OR_STRING,
                    "maxUnavailable": _INT_OR_STRING,
                    "selector": {
                        "type": ["object", "null"],
                        "properties": {
                            "matchLabels": _STRING_MAP,
                            "matchExpressions": _list_of(
                                _object(
                                    {"key": _STRING, "operator": _STRING, "values": _STRINGS},
                                    ["key", "operator"],
                                )
                            ),
                        },
                    },
                }
            ),
            "status": _object(
                {
                    "currentHealthy": _INTEGER,
                    "desiredHealthy": _INTEGER,
                    "disruptionsAllowed": _INTEGER,
                    "observedGeneration": _INTEGER,
                }
            ),
        },
        ["metadata"],
    ),
)
DEPLOYMENT = Shape(
    "Deployment",
    _object(
        {
            "metadata": _METADATA,
            "spec": _object({"template": _object({"spec": _object({"containers": _CONTAINERS})})}),
        },
        ["metadata"],
    ),
)
EVENT = Shape(
    "Event",
    _object(
        {
            "involvedObject": _object({"kind": _STRING, "name": _STRING}),
            "type": _STRING,
            "reason": _STRING,
            "message": _STRING,
            "lastTimestamp": _STRING,
            "eventTime": _STRING,
            "count": _INTEGER,
        }
    ),
)
LEASE = Shape(
    "Lease",
    _object(
        {
            "metadata": _METADATA,
            "spec": _object(
                {
                    "holderIdentity": _STRING,
                    "leaseDurationSeconds": _INTEGER,
                    "acquireTime": _STRING,
                    "renewTime": _STRING,
                    "leaseTransitions": _INTEGER,
                }
            ),
        },
        ["metadata"],
    ),
)
# A DaemonSet or a ControllerRevision: who owns it (metadata.ownerReferences) and, for a revision, its number.
DAEMONSET = Shape("DaemonSet", _object({"metadata": _METADATA}, ["metadata"]))
CONTROLLER_REVISION = Shape(
    "ControllerRevision", _object({"metadata": _METADATA, "revision": _INTEGER}, ["metadata"])
)
# The GPU Operator's resources: core.operator checks their spec.
CLUSTER_POLICY = Shape(
    "ClusterPolicy", _object({"metadata": _METADATA, "spec": {"type": ["object", "null"]}}, ["metadata"])
)
NVIDIA_DRIVER = Shape(
    "NVIDIADriver", _object({"metadata": _METADATA, "spec": {"type": ["object", "null"]}}, ["metadata"])
)
# The answers of `kubectl auth whoami` and `kubectl auth can-i`: a created review has no name.
SELF_SUBJECT_REVIEW = Shape(
    "SelfSubjectReview",
    _object({"status": _object({"userInfo": _object({"username": _STRING})})}),
)
SELF_SUBJECT_ACCESS_REVIEW = Shape(
    "SelfSubjectAccessReview",
    _object({"status": _object({"allowed": _BOOLEAN, "reason": _STRING})}),
)
# A watch: each line one event; an ERROR event's object is a metav1.Status, a BOOKMARK's carries only
# the resourceVersion to resume from (no name), every other's is an object of the watched resource.
WATCH_EVENT = Shape(
    "watch event",
    {
        "type": "object",
        "properties": {"type": {"type": "string"}, "object": {"type": "object"}},
        "required": ["type", "object"],
    },
)
STATUS = Shape("Status", _object({"code": _INTEGER, "reason": _STRING, "message": _STRING}))
BOOKMARK = Shape(
    "bookmark",
    _object(
        {"metadata": _object({"resourceVersion": {"type": "string"}}, ["resourceVersion"])}, ["metadata"]
    ),
)
# Every list's own metadata: where to continue, and the version a watch resumes from.
LIST_METADATA = Shape("list", _object({"continue": _STRING, "resourceVersion": _STRING}))

# --- a kubeconfig: what the kubernetes client reads of it, so it never meets another shape -------------

_NAMED = {"type": "object", "required": ["name"], "properties": {"name": _STRING}}
_EXEC = _object(
    {
        "command": _STRING,
        "apiVersion": _STRING,
        "args": _STRINGS,
        "env": {
            "type": ["array", "null"],
            "items": _object({"name": _STRING, "value": _STRING}, ["name", "value"]),
        },
        "provideClusterInfo": _BOOLEAN,
    },
    ["command", "apiVersion"],
)
KUBECONFIG = Shape(
    "kubeconfig",
    _object(
        {
            "current-context": _STRING,
            "clusters": _list_of(
                {
                    **_NAMED,
                    "properties": {
                        "name": _STRING,
                        "cluster": _object(
                            {
                                "server": _STRING,
                                "certificate-authority": _STRING,
                                "certificate-authority-data": _STRING,
                                "insecure-skip-tls-verify": _BOOLEAN,
                                "tls-server-name": _STRING,
                                "proxy-url": _STRING,
                            },
                            ["server"],
                        ),
                    },
                    "required": ["name", "cluster"],
                }
            ),
            "contexts": _list_of(
                {
                    **_NAMED,
                    "properties": {
                        "name": _STRING,
                        "context": _object(
                            {"cluster": _STRING, "user": _STRING, "namespace": _STRING}, ["cluster"]
                        ),
                    },
                    "required": ["name", "context"],
                }
            ),
            "users": _list_of(
                {
                    **_NAMED,
                    "properties": {
                        "name": _STRING,
                        "user": {
                            "type": ["object", "null"],
                            "properties": {
                                "token": _STRING,
                                "tokenFile": _STRING,
                                "username": _STRING,
                                "password": _STRING,
                                "client-certificate": _STRING,
                                "client-certificate-data": _STRING,
                                "client-key": _STRING,
                                "client-key-data": _STRING,
                                "exec": _EXEC,
                                "auth-provider": _object({"name": _STRING, "config": _STRING_MAP}),
                            },
                        },
                    },
                }
            ),
        }
    ),
)
