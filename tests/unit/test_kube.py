"""The Kubernetes gateway without a cluster: HTTP statuses as typed errors, API JSON as core data."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError

from reconciler.adapters import kube
from reconciler.core.budget import Budget, Pod, Selector
from reconciler.errors import GpudrvError

HOST = "https://127.0.0.1:6443"


def failing(status: int, reason: str, body: dict[str, Any] | None = None) -> Any:
    def request() -> Any:
        exc = ApiException(status=status, reason=reason)
        exc.body = None if body is None else json.dumps(body)
        raise exc

    return request


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (404, kube.NotFound),
        (409, kube.Conflict),
        (429, kube.TooManyRequests),
        (401, kube.Forbidden),
        (403, kube.Forbidden),
        (500, kube.ApiError),
    ],
)
def test_statuses_become_typed_errors_with_the_servers_message(
    status: int, kind: type[kube.ApiError]
) -> None:
    gateway = kube.Gateway(None, HOST)
    with pytest.raises(kind) as caught:
        gateway.write(failing(status, "Reason", {"message": "said no"}))
    assert type(caught.value) is kind and isinstance(caught.value, GpudrvError)
    assert (caught.value.status, caught.value.detail) == (status, "said no")
    assert str(caught.value) == f"the cluster at {HOST} answered {status} Reason: said no"


def test_a_body_without_a_message_still_reads_as_one_line() -> None:
    with pytest.raises(kube.ApiError, match=r"answered 500 Internal Server Error: no message$"):
        kube.Gateway(None, HOST).read(failing(500, "Internal Server Error"))


def test_an_eviction_refusal_names_the_budget_from_the_causes() -> None:
    body = {
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget p needs 2"}]},
    }
    with pytest.raises(kube.TooManyRequests) as caught:
        kube.Gateway(None, HOST).write(failing(429, "Too Many Requests", body))
    assert caught.value.explanation() == (
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget p needs 2"
    )


def test_read_returns_none_for_a_missing_object_only_when_asked() -> None:
    gateway = kube.Gateway(None, HOST)
    assert gateway.read(failing(404, "Not Found"), missing_ok=True) is None
    with pytest.raises(kube.NotFound):
        gateway.read(failing(404, "Not Found"))


def test_no_answer_is_unreachable() -> None:
    def request() -> Any:
        cause = NewConnectionError(
            None, "Failed to establish a new connection: [Errno 111] Connection refused"
        )
        raise MaxRetryError(None, "/api/v1/nodes", cause)  # type: ignore[arg-type]

    with pytest.raises(kube.Unreachable, match=r"^cannot reach the cluster at https://127.0.0.1:6443: "):
        kube.Gateway(None, HOST).read(request)


def test_pages_follow_the_continue_token() -> None:
    answers = {
        None: {"items": [{"n": 1}, {"n": 2}], "metadata": {"continue": "t"}},
        "t": {"items": [{"n": 3}], "metadata": {}},
    }
    gateway = kube.Gateway(None, HOST)
    items = gateway.pages(lambda token: SimpleNamespace(data=json.dumps(answers[token])))
    assert list(items) == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_one_pdb_document_two_views() -> None:
    document = {
        "metadata": {"namespace": "ml", "name": "p", "generation": 2},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "t"}}},
        "status": {
            "currentHealthy": 2,
            "desiredHealthy": 1,
            "disruptionsAllowed": 1,
            "observedGeneration": 1,
        },
    }
    live = kube.disruption_budget(document)
    assert live == Budget(
        "ml",
        "p",
        Selector({"app": "t"}),
        min_available=1,
        current_healthy=2,
        desired_healthy=1,
        disruptions_allowed=1,
        fresh=False,
    )
    assert kube.budget_spec(document).spec == document["spec"]


def test_nodes_and_pods_from_api_json() -> None:
    document = {
        "metadata": {"name": "n", "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {"unschedulable": True},
    }
    assert kube.node(document).labels == {"a": "b"}
    live = kube.live_node(document)
    assert (live.name, live.unschedulable, dict(live.annotations)) == ("n", True, {"x": "y"})
    pod = kube.pod(
        {
            "metadata": {
                "namespace": "ml",
                "name": "p",
                "ownerReferences": [{"kind": "Job", "controller": True}],
            },
            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert pod == Pod("ml", "p", {}, owner_kind="Job", gpu=True, ready=True)
