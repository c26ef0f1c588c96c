"""Issue 23, item 7: the hostile-input corpus reaches the reconcile path. A Lease, Events and watch
events of the wrong shape, refused or never sent: each is one clear error line (or the adapter's
documented recovery: the elector and the sink log one warning and go on, the node watch backs off and
tries again), never a traceback and never a hang."""

from __future__ import annotations

import logging
import queue
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters import kube
from reconciler.adapters.cluster import events, lease, node_watch, operator_fleet
from reconciler.core.incluster import election
from reconciler.core.incluster.election import Timing
from reconciler.errors import GpudrvError
from tests.hostile.fake_api import Answer, FakeApi, Request
from tests.unit.fake_kube import HOST, Call, Lines, always, refused
from tests.unit.fake_kube import gateway as faked

LIED = f"the cluster at {HOST} sent "
GOOD_LEASE = {"metadata": {"name": "l", "resourceVersion": "3"}, "spec": {"holderIdentity": "b"}}


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings logged, each one line; no record carries a traceback."""
    assert all(record.exc_info is None for record in caplog.records), [r.getMessage() for r in caplog.records]
    lines = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert all("\n" not in line for line in lines)
    return lines


# --- a lying Lease ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": "15"}},
            "spec.leaseDurationSeconds is the string '15', not an integer",
        ),
        (
            {"metadata": {"name": "l"}, "spec": {"leaseTransitions": True}},
            "spec.leaseTransitions is the boolean true, not an integer",
        ),
        (
            {"metadata": {"name": "l"}, "spec": {"holderIdentity": ["a"]}},
            "spec.holderIdentity is a list, not a string",
        ),
        ({"metadata": {"name": "l"}, "spec": "held"}, "spec is the string 'held', not an object"),
        ({"spec": {}}, "metadata is missing"),
        ([GOOD_LEASE], "sent an answer the API never sends: it is a list, not an object"),
    ],
)
def test_a_lease_of_the_wrong_shape_is_one_error(answer: Any, message: str) -> None:
    lock = lease.LeaseLock(faked(always(answer))[0], "ns", "l")
    with pytest.raises(GpudrvError) as caught:
        lock.get()
    assert str(caught.value).startswith(LIED) and message in str(caught.value)


def test_times_that_are_not_times_are_absent() -> None:
    """The documented recovery: a renewTime the API server would never send reads as none (stale)."""
    answer = {"metadata": {"name": "l", "resourceVersion": "3"}, "spec": {"renewTime": "yesterday"}}
    record = lease.LeaseLock(faked(always(answer))[0], "ns", "l").get()
    assert record is not None and record.renewed is None and record.version == "3"


def test_an_elector_told_lies_warns_once_and_does_not_lead(caplog: pytest.LogCaptureFixture) -> None:
    answers = [{"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": "long"}}, refused(500, "boom")]
    lock = lease.LeaseLock(
        faked(lambda call: answers[0] if call.method == "GET" else answers[1])[0], "ns", "l"
    )
    elector = lease.Elector(lock, "me", Timing(lease_duration=1, renew_deadline=0.5, retry_period=0.1))
    with caplog.at_level(logging.WARNING, "gpudrv.lease"):
        elector._try()
        elector._try()  # the same lie again: not logged again within the minute
    assert not elector.leading.is_set()
    (line,) = no_tracebacks(caplog)
    assert line.startswith(f"leader election: {LIED}a Lease the API never sends: spec.leaseDurationSeconds")


def test_a_lying_answer_to_the_leases_creation_is_one_error(caplog: pytest.LogCaptureFixture) -> None:
    def respond(call: Call) -> Any:
        return refused(404, "NotFound") if call.method == "GET" else {"metadata": {"name": 7}}

    elector = lease.Elector(lease.LeaseLock(faked(respond)[0], "ns", "l"), "me", Timing())
    with pytest.raises(
        GpudrvError, match=r"sent a Lease the API never sends: metadata\.name is the number 7"
    ):
        elector.lock.create(election.claim(None, "me", 15, datetime.now(UTC)))
    with caplog.at_level(logging.WARNING, "gpudrv.lease"):
        elector._try()  # the campaign: creates it, hears the lie, warns, does not lead
    assert not elector.leading.is_set()
    assert "metadata.name is the number 7" in no_tracebacks(caplog)[0]


# --- Events refused or of the wrong shape ---------------------------------------------------------------


def sink(respond: Any) -> events.EventSink:
    return events.EventSink(faked(respond)[0], refresh=1800)


MISSING = events.NodeEvent("node-1", "DriverImageMissing", "image t1 missing", key="t1")


@pytest.mark.parametrize("status", [401, 403, 422, 500])
def test_an_event_the_server_refuses_is_counted_failed_and_one_warning(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    counted: list[tuple[str, str]] = []
    writer = events.EventSink(
        faked(always(refused(status, "No", {"message": "not you"})))[0],
        1800,
        lambda r, o: counted.append((r, o)),
    ).start()
    with caplog.at_level(logging.WARNING, "gpudrv.events"):
        writer.post(MISSING)
        writer.stop()
    assert counted == [("DriverImageMissing", "failed")]
    (line,) = no_tracebacks(caplog)
    assert (
        line
        == f"event DriverImageMissing on node node-1: the cluster at {HOST} answered {status} No: not you"
    )


def test_an_event_that_both_exists_and_does_not_is_one_error_not_a_recursion() -> None:
    writer = sink(
        lambda call: refused(409, "AlreadyExists") if call.method == "POST" else refused(404, "NotFound")
    )
    with pytest.raises(GpudrvError, match=r"answered 3 times that event node-1\.gpudrv-\w+ exists \(409\)"):
        writer.write(MISSING)


@pytest.mark.parametrize(
    ("existing", "message"),
    [
        ({"count": "many"}, "sent an Event the API never sends: count is the string 'many', not an integer"),
        (
            {"lastTimestamp": 5},
            "sent an Event the API never sends: lastTimestamp is the number 5, not a string",
        ),
        ({"involvedObject": "node-1"}, "involvedObject is the string 'node-1', not an object"),
        (["an", "event"], "sent an answer the API never sends: it is a list, not an object"),
    ],
)
def test_an_existing_event_of_the_wrong_shape_is_one_error(existing: Any, message: str) -> None:
    writer = sink(lambda call: refused(409, "AlreadyExists") if call.method == "POST" else existing)
    with pytest.raises(GpudrvError) as caught:
        writer.write(MISSING)
    assert str(caught.value).startswith(LIED) and message in str(caught.value)


def test_a_timestamp_without_an_offset_is_read_as_utc() -> None:
    """Not a TypeError (naive against aware): an old event without an offset is stale, so counted."""
    patched: list[Any] = []

    def respond(call: Call) -> Any:
        if call.method == "POST":
            return refused(409, "AlreadyExists")
        if call.method == "PATCH":
            patched.append(call.body)
            return {}
        return {"count": 4, "lastTimestamp": "2001-01-01T00:00:00"}

    recount = events.NodeEvent("node-1", "DriverImageMissing", "m", key="t1", recount=False)
    assert sink(respond).write(recount) == "counted" and patched[0]["count"] == 5


def test_operator_events_of_the_wrong_shape_are_one_error() -> None:
    listed = {"items": [{"involvedObject": {"kind": "Node", "name": "n"}, "type": 5}]}
    with pytest.raises(
        GpudrvError, match=r"sent an Event list the API never sends: items\[0\]\.type is the number 5"
    ):
        operator_fleet.upgrade_events(faked(always(listed))[0])


# --- watch events of the wrong shape or kind ------------------------------------------------------------


def node(name: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "metadata": {"name": name, "resourceVersion": "11"}}


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "p"}}},
            "sent a watch event of nodes the API never sends: object.kind is the string 'Pod'",
        ),
        (
            {"type": "ADDED", "object": "node-1"},
            "sent a watch event the API never sends: object is the string 'node-1', not an object",
        ),
        (
            {"type": "EXPLODED", "object": node("a")},
            "sent a watch event the API never sends: type is the string 'EXPLODED'",
        ),
        ({"type": 1, "object": node("a")}, "type is the number 1, not a string"),
        ({"object": node("a")}, "sent a watch event the API never sends: type is missing"),
        ({"type": "MODIFIED", "object": {"metadata": {"name": ""}}}, "object.metadata.name is empty"),
        (
            {"type": "BOOKMARK", "object": {"metadata": {}}},
            "sent a watch bookmark the API never sends: object.metadata.resourceVersion is missing",
        ),
        (
            {"type": "ERROR", "object": {"code": "gone"}},
            "sent a watch error the API never sends: object.code is the string 'gone'",
        ),
        (["ADDED"], "sent a watch event the API never sends: it is a list, not an object"),
    ],
)
def test_a_watch_event_of_the_wrong_shape_or_kind_is_one_error(event: Any, message: str) -> None:
    gateway = faked(always(Lines.of([event])))[0]
    stream = gateway.watch(kube.NODES, {}, accept=kube.METADATA_ONE, timeout=(5, 5), kinds=node_watch.KINDS)
    with pytest.raises(GpudrvError) as caught:
        list(stream)
    assert str(caught.value).startswith(LIED) and message in str(caught.value)


def test_the_node_watch_told_lies_backs_off_and_keeps_watching(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Pod in the watch of nodes: nothing posted for it, one warning, and the watch goes on (from the
    same version: the lie changed nothing) until it hears of a real node."""
    monkeypatch.setattr(node_watch, "backoff", lambda failures, **_: 0.0)
    listed = {"metadata": {"resourceVersion": "10"}, "items": [node("a")]}
    script = [listed, [{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "p"}}}],
              [{"type": "ADDED", "object": node("b")}]]  # fmt: skip

    def respond(call: Call) -> Any:
        step = script.pop(0) if script else []
        return Lines.of(step) if call.query.get("watch") else step

    gateway, fake = faked(respond)
    posted: queue.Queue[Any] = queue.Queue()
    restarts: list[str] = []
    with caplog.at_level(logging.WARNING, "gpudrv.watch"):
        watcher = node_watch.NodeWatch(gateway, posted.put, restarts.append, streams=gateway).start()
        seen = [posted.get(timeout=5), posted.get(timeout=5)]
        watcher.stop()
    assert [type(item).__name__ for item in seen] == ["Listed", "Changed"] and seen[1].node.name == "b"
    assert restarts[0] == "error"
    watches = [call.query["resourceVersion"] for call in fake.calls if call.query.get("watch")]
    assert watches[:2] == ["10", "10"]
    lines = no_tracebacks(caplog)
    assert lines[0].startswith(
        f"watch on GPU nodes: {LIED}a watch event of nodes the API never sends: object.kind"
    )


# --- a watch that never sends anything ----------------------------------------------------------------


def silent_watch(request: Request) -> Answer:
    if request.query.get("watch") == ["true"]:
        return Answer(hang=True)
    return Answer(body=b'{"metadata": {"resourceVersion": "10"}, "items": []}')


def test_a_watch_that_never_answers_is_cut_at_its_read_timeout(tmp_path: Path) -> None:
    with FakeApi(silent_watch) as fake:
        gateway = kube.connect(kube.Options(kubeconfig=str(fake.kubeconfig(tmp_path / "kc"))))
        stream = kube.streaming(gateway).watch(
            kube.NODES, {}, accept=kube.METADATA_ONE, timeout=(1, 0.5), kinds=node_watch.KINDS
        )
        started = time.monotonic()
        with pytest.raises(kube.Unreachable) as caught:
            list(stream)
    assert time.monotonic() - started < 5
    assert len([request for request in fake.requests if request.query.get("watch")]) == 1  # not retried
    assert str(caught.value) == f"watch on the cluster at {fake.url} broke: no answer within 0.5 s"


def test_the_node_watch_on_a_silent_server_restarts_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(node_watch, "WATCH_SECONDS", (1, 1))
    monkeypatch.setattr(node_watch, "WATCH_SLACK", 0)  # read timeout: timeoutSeconds itself, 1 s
    monkeypatch.setattr(node_watch, "backoff", lambda failures, **_: 0.0)
    restarts: queue.Queue[str] = queue.Queue()
    with FakeApi(silent_watch) as fake, caplog.at_level(logging.WARNING, "gpudrv.watch"):
        gateway = kube.connect(kube.Options(kubeconfig=str(fake.kubeconfig(tmp_path / "kc"))))
        posted: queue.Queue[Any] = queue.Queue()
        watcher = node_watch.NodeWatch(gateway, posted.put, restarts.put).start()
        assert isinstance(posted.get(timeout=5), node_watch.Listed)
        assert restarts.get(timeout=10) == "error"
        watcher.stop()
    assert "broke: no answer within 1 s" in no_tracebacks(caplog)[0]
