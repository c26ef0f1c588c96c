"""The reconcile loop's adapters without a cluster: the watch (410 and errors), deduplicated events,
two electors on one Lease, git credentials, and the metrics endpoints."""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters import kube
from reconciler.adapters.cluster import events, fleet, lease, node_watch
from reconciler.adapters.git import sync
from reconciler.adapters.git.sync import Credentials, Source
from reconciler.adapters.serving import metrics
from reconciler.adapters.serving.sync_endpoint import SyncEndpoint
from reconciler.core.incluster.election import Record, Timing
from reconciler.core.incluster.webhook import Secrets
from reconciler.errors import GpudrvError
from tests.unit.fake_kube import HOST, Call, Lines, refused
from tests.unit.fake_kube import gateway as faked

# --- the watch ------------------------------------------------------------------------------------


def node_doc(name: str, version: str, **labels: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "metadata": {"name": name, "resourceVersion": version,
            "labels": {"nvidia.com/gpu.present": "true", **labels}}}  # fmt: skip


class Script:
    """The node list's pages and the watches' streams, in order; then 500s."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps

    def __call__(self, call: Call) -> Any:
        step = self.steps.pop(0) if self.steps else refused(500, "script over")
        if isinstance(step, Exception):
            return step
        return Lines.of(step) if call.query.get("watch") else step


def listing(version: str, *names: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "items": [node_doc(name, version) for name in names]}


def test_list_then_watch_from_its_version_and_relist_on_410() -> None:
    gateway, fake = faked(Script([
        listing("10", "a", "b"),
        [
            {"type": "ADDED", "object": node_doc("c", "11")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
            {"type": "MODIFIED", "object": node_doc("a", "16", extra="1")},
            {"type": "DELETED", "object": node_doc("b", "17")},
        ],
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}],
        listing("30", "a", "c"),
    ]))  # fmt: skip
    posted: queue.Queue[Any] = queue.Queue()
    restarts: list[str] = []
    watcher = node_watch.NodeWatch(gateway, posted.put, restarts.append, streams=gateway).start()
    seen = [posted.get(timeout=5) for _ in range(5)]
    watcher.stop()
    assert [type(item).__name__ for item in seen] == ["Listed", "Changed", "Changed", "Deleted", "Listed"]
    assert [node.name for node in seen[0].nodes] == ["a", "b"] and seen[0].version == "10"
    assert seen[2].node.labels["extra"] == "1" and seen[3].name == "b"
    assert [node.name for node in seen[4].nodes] == ["a", "c"]
    lists = [call for call in fake.calls if not call.query.get("watch")]
    watches = [call for call in fake.calls if call.query.get("watch")]
    assert lists[0].path == "/api/v1/nodes" and "PartialObjectMetadataList" in lists[0].accept
    assert lists[0].query == {"labelSelector": "nvidia.com/gpu.present=true", "limit": "500"}
    assert watches[0].query["resourceVersion"] == "10" and watches[1].query["resourceVersion"] == "17"
    assert watches[0].query["allowWatchBookmarks"] is True
    assert "PartialObjectMetadata;" in watches[0].accept
    seconds = int(watches[0].query["timeoutSeconds"])
    assert watches[0].timeout == (5, seconds + node_watch.WATCH_SLACK)
    assert restarts[0] == "gone"


def test_the_watch_lists_every_page_through_the_one_paging_loop() -> None:
    first = {**listing("10", "a"), "metadata": {"resourceVersion": "10", "continue": "more"}}
    gateway, fake = faked(Script([first, listing("10", "b"), []]))
    posted: queue.Queue[Any] = queue.Queue()
    watcher = node_watch.NodeWatch(gateway, posted.put, streams=gateway).start()
    listed = posted.get(timeout=5)
    watcher.stop()
    assert [node.name for node in listed.nodes] == ["a", "b"] and listed.version == "10"
    assert fake.calls[1].query["continue"] == "more"


def test_errors_back_off_and_the_watch_keeps_trying(monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []
    monkeypatch.setattr(node_watch, "backoff", lambda failures, **_: delays.append(failures) or 0.0)
    gateway, _ = faked(Script([refused(500, "boom"), refused(503, "busy"), listing("5", "a")]))
    posted: queue.Queue[Any] = queue.Queue()
    watcher = node_watch.NodeWatch(gateway, posted.put, streams=gateway).start()
    assert isinstance(posted.get(timeout=5), node_watch.Listed)
    watcher.stop()
    assert delays[:2] == [1, 2]


# --- events ---------------------------------------------------------------------------------------


class EventApi:
    """create/read/patch of core/v1 events in one namespace, in memory, through the fake transport."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.patches: list[dict[str, Any]] = []

    def __call__(self, call: Call) -> Any:
        assert call.path.startswith("/api/v1/namespaces/default/events")
        if call.method == "POST":
            name = call.body["metadata"]["name"]
            if name in self.objects:
                return refused(409, "AlreadyExists")
            self.objects[name] = json.loads(json.dumps(call.body))
            return {}
        name = call.path.rsplit("/", 1)[1]
        if call.method == "GET":
            return self.objects[name] if name in self.objects else refused(404, "NotFound")
        assert call.method == "PATCH" and call.content_type == "application/merge-patch+json"
        self.patches.append(call.body)
        self.objects[name].update(call.body)
        return {}


def sink(api: EventApi, refresh: float = 1800) -> events.EventSink:
    return events.EventSink(faked(api)[0], refresh)


def test_one_problem_is_one_event_counted_again_only_when_asked_or_stale() -> None:
    api = EventApi()
    writer = sink(api)
    missing = events.NodeEvent("node-1", "DriverImageMissing", "image t1 missing", key="t1", recount=False)
    assert writer.write(missing) == "created"
    assert writer.write(missing) == "unchanged"  # a new leader finding the same fresh problem
    assert writer.write(events.NodeEvent("node-1", "DriverImageMissing", "m", key="t1")) == "counted"
    (name,) = api.objects
    assert name == events.event_name("node-1", "DriverImageMissing", "t1")
    assert api.objects[name]["count"] == 2 and api.objects[name]["involvedObject"]["uid"] == "node-1"
    # Another tag is another problem, another event.
    assert writer.write(events.NodeEvent("node-1", "DriverImageMissing", "m", key="t2")) == "created"
    # Stale (older than the refresh interval): counted again, which also keeps it from expiring.
    assert sink(api, refresh=0).write(missing) == "counted"
    assert api.objects[name]["count"] == 3


def test_the_upgrade_and_the_reconcile_loop_write_one_kind_of_node_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One builder (events.node_event): the same fields, only the component (and the name) differ."""
    monkeypatch.setattr(events, "now", lambda: "2026-01-02T03:04:05Z")
    api = EventApi()
    writer = sink(api)
    writer.host = "host-1"
    writer.write(events.NodeEvent("node-1", "DriverImageMissing", "m", key="t1"))
    monkeypatch.setattr(fleet.socket, "gethostname", lambda: "host-1")
    fleet.Fleet(faked(api)[0]).event("node-1", "DriverImageMissing", "m", warning=True, name="by-fleet")
    from_sink, from_fleet = api.objects.values()
    assert from_fleet["metadata"] == {"name": "by-fleet", "namespace": "default"}
    assert (
        from_sink["source"]["component"] == "gpudrv-reconcile"
        and from_fleet["source"]["component"] == "gpudrv"
    )
    same = {"metadata", "source", "reportingComponent"}
    assert {k: v for k, v in from_sink.items() if k not in same} == {
        k: v for k, v in from_fleet.items() if k not in same
    }
    assert from_fleet["involvedObject"] == {
        "kind": "Node",
        "name": "node-1",
        "uid": "node-1",
        "apiVersion": "v1",
    }
    assert (
        from_fleet["firstTimestamp"] == "2026-01-02T03:04:05Z" and from_fleet["reportingInstance"] == "host-1"
    )


def test_event_names_are_valid_and_stable() -> None:
    name = events.event_name("n" * 253, "DriverImageMissing", "tag")
    assert len(name) <= 253 and name == events.event_name("n" * 253, "DriverImageMissing", "tag")
    assert name != events.event_name("n" * 253, "DriverImageMissing", "other")


def test_the_sink_drops_rather_than_blocks_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "QUEUE_SIZE", 1)
    counted: list[tuple[str, str]] = []
    writer = events.EventSink(faked()[0], 1800, lambda reason, result: counted.append((reason, result)))
    writer.post(events.NodeEvent("a", "R", "m", "k"))
    writer.post(events.NodeEvent("b", "R", "m", "k"))  # not started: the queue is full
    assert counted == [("R", "dropped")]


# --- leader election --------------------------------------------------------------------------------


class MemoryLease:
    """One Lease with the API server's compare-and-swap on resourceVersion."""

    def __init__(self) -> None:
        self.namespace, self.name = "ns", "gpudrv-reconcile"
        self.record: Record | None = None
        self.lock = threading.Lock()
        self.version = 0

    def get(self) -> Record | None:
        return self.record

    def create(self, wanted: Record) -> Record:
        with self.lock:
            if self.record is not None:
                raise kube.Conflict(HOST, 409, "AlreadyExists", "")
            return self._store(wanted)

    def update(self, wanted: Record) -> Record:
        with self.lock:
            if self.record is None or wanted.version != self.record.version:
                raise kube.Conflict(HOST, 409, "Conflict", "")
            return self._store(wanted)

    def _store(self, wanted: Record) -> Record:
        self.version += 1
        self.record = Record(wanted.holder, wanted.duration, wanted.acquired, wanted.renewed,
                             wanted.transitions, str(self.version))  # fmt: skip
        return self.record


def test_one_of_two_leads_and_the_other_takes_over_within_the_lease() -> None:
    timing = Timing(lease_duration=0.6, renew_deadline=0.4, retry_period=0.05)
    shared = MemoryLease()
    a = lease.Elector(shared, "a", timing).start()  # type: ignore[arg-type]
    deadline = time.monotonic() + 5
    while not a.leading.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    b = lease.Elector(shared, "b", timing).start()  # type: ignore[arg-type]
    time.sleep(0.5)
    assert a.leading.is_set() and not b.leading.is_set()
    # a dies without releasing (SIGKILL): b waits out the lease, then takes it.
    a.stopping.set()
    a.thread.join()
    died = time.monotonic()
    while not b.leading.is_set() and time.monotonic() - died < 5:
        time.sleep(0.01)
    took = time.monotonic() - died
    assert b.leading.is_set() and 0.4 <= took <= 0.6 + 0.3
    assert shared.record is not None and shared.record.holder == "b" and shared.record.transitions == 1
    # b stops cleanly: released, and a new candidate takes it at its first try.
    b.stop(release=True)
    assert shared.record.holder is None
    c = lease.Elector(shared, "c", timing).start()  # type: ignore[arg-type]
    started = time.monotonic()
    while not c.leading.is_set() and time.monotonic() - started < 5:
        time.sleep(0.01)
    assert time.monotonic() - started < 0.3
    c.stop()


def test_lease_documents_round_trip() -> None:
    lock = lease.LeaseLock(faked()[0], "ns", "gpudrv-reconcile")
    from datetime import UTC, datetime

    record = Record(
        "pod-a", 15, datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 0, 0, 2, tzinfo=UTC), 2, "7"
    )
    document = lock._document(record)
    assert document["spec"] == {
        "holderIdentity": "pod-a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2025-01-01T00:00:00.000000Z",
        "renewTime": "2025-01-01T00:00:02.000000Z",
        "leaseTransitions": 2,
    }
    assert document["metadata"]["resourceVersion"] == "7"
    assert lease.record(document) == record
    released = lock._document(Record(None, 1, None, None, 2, "8"))
    assert "holderIdentity" not in released["spec"]


# --- git credentials ------------------------------------------------------------------------------


def test_a_token_is_a_header_for_that_host_only_never_in_argv_or_url(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    source = Source("https://github.com/example/fleet.git", "main", Credentials(token_file=token))
    env = sync.environment(source, tmp_path)
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraHeader"
    assert (
        env["GIT_CONFIG_VALUE_0"] == "Authorization: Basic eC1hY2Nlc3MtdG9rZW46czNjcmV0"
    )  # x-access-token:s3cret
    token.write_text("rotated")
    assert "eC1hY2Nlc3MtdG9rZW46cm90YXRlZA==" in sync.environment(source, tmp_path)["GIT_CONFIG_VALUE_0"]


def test_an_ssh_key_is_copied_private_and_host_keys_are_checked(tmp_path: Path) -> None:
    key, hosts = tmp_path / "ssh-privatekey", tmp_path / "known_hosts"
    key.write_text("KEY")
    key.chmod(0o644)  # as a Secret volume often mounts it
    hosts.write_text("github.com ssh-ed25519 AAAA")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    creds = Credentials(ssh_key_file=key, known_hosts_file=hosts)
    env = sync.environment(Source("git@github.com:example/fleet.git", "main", creds), private)
    assert (private / "ssh-key").read_text() == "KEY" and (
        private / "ssh-key"
    ).stat().st_mode & 0o777 == 0o600
    assert "StrictHostKeyChecking=yes" in env["GIT_SSH_COMMAND"]
    assert f"UserKnownHostsFile={hosts}" in env["GIT_SSH_COMMAND"]


@pytest.mark.parametrize(
    ("url", "creds", "problem"),
    [
        ("https://h/r.git", Credentials(token_file=Path("t"), ssh_key_file=Path("k")), "not both"),
        ("git@h:r.git", Credentials(token_file=Path("t")), "needs an https://"),
        ("git@h:r.git", Credentials(ssh_key_file=Path("k")), "--git-known-hosts-file"),
        ("/srv/fleet.git", Credentials(), None),
    ],
)
def test_credential_mistakes_are_refused_up_front(url: str, creds: Credentials, problem: str | None) -> None:
    found = creds.problem(url)
    assert (found is None) if problem is None else (found is not None and problem in found)


# --- the endpoints ----------------------------------------------------------------------------------


def test_metrics_health_readiness_and_sync(tmp_path: Path) -> None:
    measured = metrics.Metrics()
    measured.missing.labels("node-1", "550-x-ubuntu22.04").set(1)
    syncs: list[int] = []
    ready = {"ok": False}
    server = metrics.Server(
        "127.0.0.1:0",
        measured,
        lambda: (True, "turning"),
        lambda: (ready["ok"], "why"),
        SyncEndpoint(lambda: syncs.append(1), lambda: Secrets(token=b"t")),
    ).start()
    base = f"http://{server.address}"
    try:
        with urllib.request.urlopen(base + "/metrics") as answer:
            text = answer.read().decode()
        assert 'gpudrv_node_image_missing{node="node-1",tag="550-x-ubuntu22.04"} 1.0' in text
        assert "process_resident_memory_bytes" in text and "_created" not in text
        assert urllib.request.urlopen(base + "/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/readyz")
        assert refused.value.code == 503
        ready["ok"] = True
        assert urllib.request.urlopen(base + "/readyz").status == 200
        signed = urllib.request.Request(base + "/sync", headers={"Authorization": "Bearer t"}, method="POST")
        assert urllib.request.urlopen(signed).status == 202
        assert syncs == [1]
    finally:
        server.stop()


NODE = {"kind": "Node", "metadata": {"name": "n"}}


def test_a_stream_closed_from_another_thread_just_ends() -> None:
    class Blocking:
        def __init__(self) -> None:
            self.closed = threading.Event()

        def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
            yield json.dumps({"type": "ADDED", "object": NODE}).encode() + b"\n"
            self.closed.wait(5)
            raise OSError("socket closed")

        def shutdown(self) -> None:
            self.closed.set()

    response = Blocking()
    stream = faked(lambda call: response)[0].watch(
        kube.NODES, {}, accept=kube.JSON, timeout=(5, 5), kinds=["Node"]
    )
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.extend(stream))
    reader.start()
    time.sleep(0.1)
    stream.close()
    reader.join(5)
    assert not reader.is_alive() and got == [{"type": "ADDED", "object": NODE}]


def watch(respond: Any) -> list[dict[str, Any]]:
    stream = faked(respond)[0].watch(kube.NODES, {}, accept=kube.JSON, timeout=(5, 5), kinds=["Node"])
    return list(stream)


def test_a_broken_watch_is_unreachable_and_a_gone_status_is_gone() -> None:
    class Broken:
        def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
            raise OSError("connection reset")
            yield b""

    with pytest.raises(kube.Unreachable, match="connection reset"):
        watch(lambda call: Broken())
    with pytest.raises(kube.Gone):
        watch(lambda call: refused(410, "Gone"))
    with pytest.raises(GpudrvError, match="not JSON"):
        watch(lambda call: Lines([b"not json"]))
