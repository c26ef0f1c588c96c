"""The Kubernetes gateway without a cluster: HTTP statuses as typed errors, API JSON as core data."""

from __future__ import annotations

import pytest
from urllib3.exceptions import MaxRetryError, NewConnectionError

from reconciler.adapters import kube
from reconciler.core.upgrades.budget import Budget, Pod, Selector
from reconciler.errors import GpudrvError
from tests.unit.fake_kube import HOST, always, gateway, refused


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
    connected, _ = gateway(always(refused(status, "Reason", {"message": "said no"})))
    with pytest.raises(kind) as caught:
        connected.write("DELETE", kube.PODS, namespace="ns", name="p")
    assert type(caught.value) is kind and isinstance(caught.value, GpudrvError)
    assert (caught.value.status, caught.value.detail) == (status, "said no")
    assert str(caught.value) == f"the cluster at {HOST} answered {status} Reason: said no"


def test_a_body_without_a_message_still_reads_as_one_line() -> None:
    connected, _ = gateway(always(refused(500, "Internal Server Error")))
    with pytest.raises(kube.ApiError, match=r"answered 500 Internal Server Error: no message$"):
        connected.get(kube.NODES, "n")


def test_an_eviction_refusal_names_the_budget_from_the_causes() -> None:
    body = {
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget p needs 2"}]},
    }
    connected, _ = gateway(always(refused(429, "Too Many Requests", body)))
    with pytest.raises(kube.TooManyRequests) as caught:
        connected.write("POST", kube.PODS, namespace="ns", name="p", subresource="eviction", body={})
    assert caught.value.explanation() == (
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget p needs 2"
    )


def test_get_returns_none_for_a_missing_object_only_when_asked() -> None:
    connected, fake = gateway(always(refused(404, "Not Found")))
    assert connected.get(kube.NODES, "n", missing_ok=True) is None
    with pytest.raises(kube.NotFound):
        connected.get(kube.NODES, "n")
    assert [call.path for call in fake.calls] == ["/api/v1/nodes/n", "/api/v1/nodes/n"]


def test_no_answer_is_unreachable() -> None:
    cause = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]
    connected, _ = gateway(always(MaxRetryError(None, "/api/v1/nodes", cause)))  # type: ignore[arg-type]
    with pytest.raises(kube.Unreachable, match=r"^cannot reach the cluster at https://127.0.0.1:6443: "):
        connected.get(kube.NODES, "n")


def test_pages_follow_the_continue_token_and_keep_the_lists_version() -> None:
    answers = {
        None: {"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t", "resourceVersion": "7"}},
        "t": {"items": [{"metadata": {"name": "b"}}], "metadata": {"resourceVersion": "9"}},
    }
    connected, fake = gateway(lambda call: answers[call.query.get("continue")])
    listing = connected.pages(kube.NODES, query={"labelSelector": "a=b"})
    assert [item["metadata"]["name"] for item in listing] == ["a", "b"]
    assert listing.version == "7"  # the first page's: a watch resumes from there
    assert [call.query for call in fake.calls] == [
        {"labelSelector": "a=b", "limit": "500"},
        {"continue": "t", "labelSelector": "a=b", "limit": "500"},
    ]


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "subresource", "path"),
    [
        (kube.NODES, None, None, "", "/api/v1/nodes"),
        (kube.NODES, None, "a/b", "", "/api/v1/nodes/a%2Fb"),
        (kube.PODS, None, None, "", "/api/v1/pods"),
        (kube.PODS, "ml", "p", "eviction", "/api/v1/namespaces/ml/pods/p/eviction"),
        (kube.BUDGETS, "ml", None, "", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets"),
        (kube.LEASES, "ns", "l", "", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"),
        (kube.CLUSTER_POLICIES, None, "cp", "", "/apis/nvidia.com/v1/clusterpolicies/cp"),
        (kube.NVIDIA_DRIVERS, None, None, "", "/apis/nvidia.com/v1alpha1/nvidiadrivers"),
        (kube.SELF_SUBJECT_REVIEWS, None, None, "", "/apis/authentication.k8s.io/v1/selfsubjectreviews"),
    ],
)
def test_the_resource_table_builds_each_path(
    resource: kube.Resource, namespace: str | None, name: str | None, subresource: str, path: str
) -> None:
    assert resource.path(namespace, name, subresource) == path


def test_a_namespaced_object_needs_its_namespace() -> None:
    with pytest.raises(ValueError, match="needs its namespace"):
        kube.PODS.path(None, "p")


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
    containers = [
        {"name": "sidecar", "image": "busybox"},
        {"name": "a", "image": "reg/cuda:12.8", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "image": "reg/cuda:12.8", "resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}}},
        {"name": "c", "image": "reg/tools:1", "resources": {"requests": {"nvidia.com/gpu": 1}}},
    ]
    init = [{"name": "i", "image": "reg/init:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
    spec = {"containers": containers, "initContainers": init}
    gpu = kube.pod({"metadata": {"namespace": "ml", "name": "q"}, "spec": spec})
    assert gpu.gpu_images == ("reg/cuda:12.8", "reg/tools:1")  # GPU containers once each, no init ones
