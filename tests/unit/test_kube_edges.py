"""Issue 12, items 1 and 2, at the gateway: answers of the wrong shape, endless lists, bounded bodies,
timeouts, outages waited out while patient, writes that lose a race, and the kubeconfig check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from reconciler.adapters import kube
from reconciler.adapters.cluster import fleet
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.kube import _config, _paging, _transport
from reconciler.core.images.tags import Node
from reconciler.core.upgrades.upgrade import LiveNode
from reconciler.errors import GpudrvError
from tests.unit.fake_kube import HOST, Call, always
from tests.unit.fake_kube import gateway as faked


def gateway(respond: Any = None) -> kube.Gateway:
    return faked(respond or always({}))[0]


def test_timeouts_as_kubectl_reads_request_timeout() -> None:
    assert kube.Timeouts.of(None) == kube.Timeouts(5.0, 15.0, 60.0)
    assert kube.Timeouts.of(0) == kube.Timeouts(None, None, None)
    assert kube.Timeouts.of(2) == kube.Timeouts(2.0, 2.0, 2.0)
    assert kube.Timeouts.of(30) == kube.Timeouts(5.0, 30.0, 30.0)
    assert kube.Timeouts.of(0).pair() is None


def test_a_continue_token_sent_twice_is_an_error() -> None:
    pages = gateway(always({"items": [], "metadata": {"continue": "again"}})).pages(kube.NODES)
    with pytest.raises(
        GpudrvError, match=r"sent the same continue token twice \('again'\): a list that would never end"
    ):
        list(pages)


def test_a_list_of_too_many_pages_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_paging, "MAX_PAGES", 3)

    def respond(call: Call) -> Any:
        return {"items": [], "metadata": {"continue": f"{call.query.get('continue')}x"}}

    pages = gateway(respond).pages(kube.NODES)
    with pytest.raises(GpudrvError, match=r"more than 3 pages of one list"):
        list(pages)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"items": 5}, "sent a Node list the API never sends: items is the number 5, not a list"),
        ({"items": ["a"]}, "sent a Node list the API never sends: items[0] is the string 'a', not an object"),
        (
            {"items": [{"metadata": {"name": "n", "labels": {"a": 5}}}]},
            "sent a Node list the API never sends: items[0].metadata.labels.a is the number 5, not a string",
        ),
        ({"items": [{"metadata": {"labels": {}}}]}, "items[0].metadata.name is missing"),
        ({"items": [{"metadata": {"name": ""}}]}, "items[0].metadata.name is empty"),
        (
            {"items": [], "metadata": {"continue": 5}},
            "sent a list the API never sends: metadata.continue is the number 5",
        ),
        ({"items": [], "metadata": []}, "sent a list the API never sends: metadata is a list, not an object"),
    ],
)
def test_a_list_of_the_wrong_shape_names_the_server_and_the_field(document: object, message: str) -> None:
    with pytest.raises(GpudrvError) as caught:
        list(gateway(always(document)).pages(kube.NODES))
    assert str(caught.value).startswith(f"the cluster at {HOST} ")
    assert message in str(caught.value)


def test_null_fields_are_absent_as_the_api_server_reads_them() -> None:
    document = {"items": [{"metadata": {"name": "n", "labels": None, "annotations": None}, "spec": None}]}
    (item,) = gateway(always(document)).items(kube.NODES)
    assert kube.live_node(item) == LiveNode(Node("n", {}))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"<html>", "sent a response that is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON: nested too deeply"),
        (b"[1]", "sent an answer the API never sends: it is a list, not an object"),
        (b"null", "it is null, not an object"),
        (b'"\xff"', "not JSON"),
    ],
)
def test_an_answer_that_is_not_a_json_object(data: bytes, message: str) -> None:
    with pytest.raises(GpudrvError, match=None) as caught:
        gateway(always(data)).get(kube.NODES, "n")
    assert message in str(caught.value)


class Response:
    """Enough of urllib3's HTTPResponse for _read_body."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def read(self, amount: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def test_an_answer_is_bounded_in_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transport, "MAX_BODY", 10)
    assert _transport.read_body(Response([b"12345", b"67890"]), None) == b"1234567890"
    with pytest.raises(kube._errors.BadAnswer, match="more than"):
        _transport.read_body(Response([b"12345", b"678901"]), None)


def test_an_answer_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 100.0])
    monkeypatch.setattr(_transport.time, "monotonic", lambda: next(clock))
    with pytest.raises(kube._errors.BadAnswer, match="took more than 60 s to send one answer"):
        _transport.read_body(Response([b"a", b"b", b"c"]), 60.0)


def refused(call: Call | None = None) -> Any:
    return NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]


NODE = {"metadata": {"name": "n"}}


def test_while_patient_an_outage_is_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transport.time, "sleep", lambda seconds: None)
    said: list[str] = []
    attempts = iter([refused(), refused(), NODE])
    patient = gateway(lambda call: next(attempts))
    patient.patience, patient.notice, patient.reached = 60.0, said.append, True
    assert patient.get(kube.NODES, "n") == NODE
    assert len(said) == 1 and "Connection refused; retrying for up to 60 s" in said[0]


def test_a_cluster_never_reached_fails_at_once_even_when_patient() -> None:
    patient = gateway(refused)
    patient.patience = 60.0
    with pytest.raises(kube.Unreachable, match="Connection refused"):
        patient.get(kube.NODES, "n")


def test_not_patient_fails_at_once() -> None:
    impatient = gateway(refused)
    impatient.reached = True
    with pytest.raises(kube.Unreachable):
        impatient.get(kube.NODES, "n")


def slow(call: Call) -> Any:
    return ReadTimeoutError(None, "/api/v1/nodes", "Read timed out.")  # type: ignore[arg-type]


def test_a_read_timeout_says_so() -> None:
    with pytest.raises(kube.Unreachable, match=r"no answer within 15 s \(--request-timeout\)"):
        gateway(slow).get(kube.NODES, "n")


def test_each_client_holds_its_own_timeouts() -> None:
    """reconcile opens several clients: one's --request-timeout is not another's."""
    short, default = gateway(slow), gateway(slow)
    short.timeouts = kube.Timeouts.of(2)
    with pytest.raises(kube.Unreachable, match=r"no answer within 2 s"):
        short.get(kube.NODES, "n")
    with pytest.raises(kube.Unreachable, match=r"no answer within 15 s"):
        default.get(kube.NODES, "n")
    assert _config.exec_timeout(short.timeouts) == 2 and _config.exec_timeout(default.timeouts) == 15


class Racing(Fleet):
    """A Fleet whose node writes lose `losses` races first, as with another writer."""

    def __init__(self, losses: int) -> None:
        super().__init__(gateway())
        self.losses = losses
        self.version = 1
        self.sent: list[dict[str, Any]] = []

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        return LiveNode(Node(name, {})), str(self.version)

    def _patch(self, name: str, body: dict[str, Any]) -> None:
        self.sent.append(body)
        if self.losses:
            self.losses -= 1
            self.version += 1  # the other writer's change
            raise kube.Conflict(HOST, 409, "Conflict", "the object has been modified")


def test_a_write_that_loses_a_race_is_sent_again_on_the_fresh_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet.time, "sleep", lambda seconds: None)
    racing = Racing(losses=3)
    racing.patch_node("n", labels={"a": "b"})
    assert [body["metadata"]["resourceVersion"] for body in racing.sent] == ["1", "2", "3", "4"]
    assert racing.conflicts == 3


def test_a_write_that_always_loses_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet.time, "sleep", lambda seconds: None)
    with pytest.raises(kube.Conflict, match="changed under 10 writes in a row"):
        Racing(losses=100).patch_node("n", labels={"a": "b"})


def test_expect_sees_the_fresh_node_before_each_write(monkeypatch: pytest.MonkeyPatch) -> None:
    class Taken(Exception):
        pass

    def expect(live: LiveNode) -> None:
        raise Taken

    racing = Racing(losses=0)
    with pytest.raises(Taken):
        racing.patch_node("n", labels={"a": "b"}, expect=expect)
    assert racing.sent == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\n", "kc: not a kubeconfig: the string 'hello', not a mapping"),
        ("- a\n", "kc: not a kubeconfig: a list, not a mapping"),
        ("", "kc: the file is empty"),
        ("a: 1\n---\nb: 2\n", "kc: 2 YAML documents; a kubeconfig is one"),
        ("apiVersion: v1\nclusters: 5\n", "kc:2: clusters is the number 5, not a list"),
        (
            "clusters:\n- name: c\n  cluster: {server: 5}\n",
            "kc:3: clusters[0].cluster.server is the number 5",
        ),
        (
            "users:\n- name: u\n  user: {exec: {command: x}}\n",
            "kc:3: users[0].user.exec.apiVersion is missing",
        ),
        ("a: !!python/object:os.system {}\n", "kc:1: YAML tag !!python/object:os.system is not allowed"),
        ("[" * 5000 + "]" * 5000, "kc:1: invalid YAML"),
    ],
)
def test_the_kubeconfig_is_checked_before_the_client_reads_it(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "kc").write_text(text)
    with pytest.raises(GpudrvError) as caught:
        _config._check_kubeconfig(str(tmp_path / "kc"))
    assert str(caught.value) == f"kubeconfig {tmp_path / message}" or message in str(caught.value)


def test_yaml_11_booleans_in_a_kubeconfig_are_booleans(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text(
        "clusters:\n- name: c\n  cluster: {server: 'https://x', insecure-skip-tls-verify: yes}\n"
    )
    _config._check_kubeconfig(str(tmp_path / "kc"))  # client-go reads YAML 1.1: yes is true
