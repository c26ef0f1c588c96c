"""A busy API server through the gateway: 429s and 5xx with Retry-After waited out as client-go does,
an eviction refused by a disruption budget left to the drain, and nothing else called a budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from reconciler.adapters import kube
from reconciler.adapters.cluster.drainer import Drain
from reconciler.adapters.cluster.fleet import EvictionOutcome, Fleet
from reconciler.adapters.kube import _transport
from reconciler.core.base import throttle
from reconciler.core.base.throttle import Throttled
from reconciler.core.upgrades import budget
from tests.unit.fake_kube import Call, gateway

NODE_LIST = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []}
APF = {"message": "Too many requests, please try again later.", "reason": "TooManyRequests", "code": 429}
BUDGET = {
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "reason": "TooManyRequests",
    "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2"}]},
    "code": 429,
}


def answer(status: int, method: str, retry_after: str | None = None, body: Any = None) -> ApiException:
    """The client's exception for a refusal, as Transport.request raises it (with the verb)."""
    exc = ApiException(status=status, reason="Too Many Requests" if status == 429 else "Service Unavailable")
    exc.body = json.dumps(body or APF)
    exc.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    exc.method = method
    return exc


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(_transport.time, "sleep", waits.append)
    return waits


def scripted(*answers: Any) -> Any:
    queue = list(answers)
    return lambda call: queue.pop(0) if len(queue) > 1 else queue[0]


def test_a_throttled_list_is_sent_again_after_the_servers_delay(slept: list[float]) -> None:
    connected, fake = gateway(scripted(answer(429, "GET", "2"), answer(429, "GET", "1"), NODE_LIST))
    heard: list[Throttled] = []
    connected.on_throttle = heard.append
    assert list(connected.pages(kube.NODES)) == []
    assert len(fake.calls) == 3 and slept == [2.0, 1.0]
    assert [item.shown() for item in heard] == [
        "the API server asked to wait 2 s (429); retry 1 of 10",
        "the API server asked to wait 1 s (429); retry 2 of 10",
    ]


def test_a_throttled_patch_is_sent_again_and_a_5xx_post_is_not(slept: list[float]) -> None:
    connected, fake = gateway(scripted(answer(429, "PATCH", "1"), {}))
    connected.on_throttle = lambda asked: None
    connected.write("PATCH", kube.NODES, name="n", body={}, content_type="application/merge-patch+json")
    assert [call.method for call in fake.calls] == ["PATCH", "PATCH"]

    connected, fake = gateway(scripted(answer(503, "POST", "1", {"message": "busy", "code": 503}), {}))
    with pytest.raises(kube.ApiError, match="503"):
        connected.write("POST", kube.PODS, namespace="ns", name="p", subresource="eviction", body={})
    assert len(fake.calls) == 1 and slept == [1.0]  # only the PATCH waited


def test_the_waits_are_bounded_in_number(slept: list[float]) -> None:
    connected, fake = gateway(lambda call: answer(429, "GET", "0"))
    connected.on_throttle = lambda asked: None
    with pytest.raises(kube.TooManyRequests):
        list(connected.pages(kube.NODES))
    assert len(fake.calls) == throttle.MAX_RETRIES + 1 and len(slept) == throttle.MAX_RETRIES


def test_a_wait_past_the_requests_total_timeout_is_not_waited(slept: list[float]) -> None:
    connected, fake = gateway(lambda call: answer(429, "GET", "30"))
    connected.timeouts = kube.Timeouts.of(5)
    with pytest.raises(kube.TooManyRequests):
        list(connected.pages(kube.NODES))
    assert len(fake.calls) == 1 and slept == []


def test_without_a_listener_the_wait_is_said_on_stderr(
    slept: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    connected, _ = gateway(scripted(answer(429, "GET", "1"), NODE_LIST))
    list(connected.pages(kube.NODES))
    assert capsys.readouterr().err == (
        "gpudrv: waiting for the cluster: the API server asked to wait 1 s (429); retry 1 of 10\n"
    )


def evictions(*answers: Any) -> tuple[Fleet, list[Call]]:
    connected, fake = gateway(scripted(*answers))
    connected.on_throttle = lambda asked: None
    return Fleet(connected), fake.calls


POD = budget.Pod("ns", "web-0", {"app": "web"}, "ReplicaSet")


def test_an_eviction_a_budget_refuses_is_never_retried_here(slept: list[float]) -> None:
    fleet, calls = evictions(answer(429, "POST", "10", BUDGET))
    refused = fleet.evict(POD)
    assert refused.outcome is EvictionOutcome.REFUSED and "disruption budget web" in refused.message
    assert len(calls) == 1 and slept == []


def test_an_eviction_throttled_by_a_busy_server_is_waited_out(slept: list[float]) -> None:
    fleet, calls = evictions(answer(429, "POST", "1"), {})
    assert fleet.evict(POD).outcome is EvictionOutcome.EVICTED
    assert len(calls) == 2 and slept == [1.0]


def test_a_429_without_a_budget_cause_is_not_called_a_budget_problem(slept: list[float]) -> None:
    fleet, _ = evictions(answer(429, "POST", None))  # no Retry-After: not waited, given back
    throttled = fleet.evict(POD)
    assert throttled.outcome is EvictionOutcome.THROTTLED

    said = Drain(fleet, "node-1", (), 1.0)._why({POD.ref: throttled})
    assert said.startswith("eviction of ns/web-0 not taken: the API server is throttling (429)")
    assert "PDB" not in said
