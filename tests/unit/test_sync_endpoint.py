"""POST /sync on the loop's real HTTP server: signed, unsigned, replayed, oversized, limited, slow."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.serving import metrics, sync_endpoint
from reconciler.adapters.serving.sync_endpoint import SyncEndpoint

SECRET = b"webhook-secret"
TOKEN = b"sync-token"


class Loop:
    def __init__(self, server: metrics.Server, syncs: list[float], measured: metrics.Metrics) -> None:
        self.server, self.syncs, self.metrics = server, syncs, measured
        self.host, _, port = server.address.rpartition(":")
        self.port = int(port)

    def post(self, body: bytes = b"{}", headers: dict[str, str] | None = None) -> tuple[int, str]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=5)
        try:
            connection.request("POST", "/sync", body=body, headers=headers or {})
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    def get(self, path: str, timeout: float = 5) -> int:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            answer.read()
            return answer.status
        finally:
            connection.close()

    def counted(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value("gpudrv_sync_requests_total", {"result": result})
        return value or 0.0


def start(tmp_path: Path, webhook: bytes | None, token: bytes | None, interval: float = 0.0) -> Loop:
    secret_file = token_file = None
    if webhook is not None:
        secret_file = tmp_path / "webhook"
        secret_file.write_bytes(webhook + b"\n")
    if token is not None:
        token_file = tmp_path / "token"
        token_file.write_bytes(token)
    measured = metrics.Metrics()
    syncs: list[float] = []
    endpoint = SyncEndpoint(
        lambda: syncs.append(time.monotonic()),
        sync_endpoint.secret_files(secret_file, token_file),
        lambda result: measured.sync_requests.labels(str(result)).inc(),
        interval=interval,
    )
    server = metrics.Server(
        "127.0.0.1:0", measured, lambda: (True, "turning"), lambda: (True, "ok"), endpoint
    )
    return Loop(server.start(), syncs, measured)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    running = start(tmp_path, SECRET, TOKEN)
    yield running
    running.server.stop()


def signature(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def test_a_signed_push_and_a_bearer_token_fetch(loop: Loop) -> None:
    body = b'{"ref": "refs/heads/main"}'
    assert loop.post(body, {"X-Hub-Signature-256": signature(body), "X-GitHub-Delivery": "d-1"})[0] == 202
    assert loop.post(b"", {"Authorization": "Bearer sync-token"}) == (202, "fetching the fleet repository\n")
    assert len(loop.syncs) == 2
    assert loop.counted("accepted") == 2


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({}, "no credentials: X-Hub-Signature-256 or a bearer token required"),
        ({"X-Hub-Signature-256": signature(b"another body")}, "wrong signature"),
        ({"Authorization": "Bearer guess"}, "wrong bearer token"),
    ],
)
def test_others_are_refused_with_401_and_nothing_is_fetched(
    loop: Loop, headers: dict[str, str], why: str
) -> None:
    assert loop.post(b"{}", headers) == (401, f"refused: {why}\n")
    assert loop.syncs == []
    assert loop.counted("unauthorized") == 1


def test_a_replayed_delivery_is_refused(loop: Loop) -> None:
    body = b'{"after": "abc"}'
    headers = {"X-Hub-Signature-256": signature(body), "X-GitHub-Delivery": "d-7"}
    assert loop.post(body, headers)[0] == 202
    assert loop.post(body, headers)[0] == 409
    assert len(loop.syncs) == 1 and loop.counted("replayed") == 1


def test_an_oversized_body_is_refused_before_it_is_read(loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_endpoint, "MAX_BODY", 1000)
    with socket.create_connection((loop.host, loop.port), timeout=5) as raw:
        raw.sendall(
            b"POST /sync HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\n"
            b"Content-Length: 999999999\r\n\r\n"
        )
        answer = raw.recv(4096)
    assert answer.startswith(b"HTTP/1.0 413") and loop.syncs == []


def test_without_a_secret_sync_is_off(tmp_path: Path) -> None:
    running = start(tmp_path, None, None)
    try:
        status, text = running.post(b"{}", {"Authorization": "Bearer anything"})
        assert status == 403 and "off" in text and running.syncs == []
    finally:
        running.server.stop()


def test_a_flood_of_valid_requests_gives_one_fetch_now_and_one_deferred(tmp_path: Path) -> None:
    running = start(tmp_path, None, TOKEN, interval=0.5)
    try:
        answers = [running.post(b"", {"Authorization": "Bearer sync-token"})[0] for _ in range(20)]
        assert answers == [202] * 20
        assert len(running.syncs) == 1
        time.sleep(0.8)
        assert len(running.syncs) == 2  # the 19 limited ones became one deferred fetch
        assert running.syncs[1] - running.syncs[0] >= 0.45
        assert running.counted("limited") == 19
    finally:
        running.server.stop()


def test_a_rotated_secret_takes_effect_at_once(tmp_path: Path, loop: Loop) -> None:
    (tmp_path / "token").write_bytes(b"rotated")
    assert loop.post(b"", {"Authorization": "Bearer sync-token"})[0] == 401
    assert loop.post(b"", {"Authorization": "Bearer rotated"})[0] == 202


def test_many_stuck_clients_do_not_starve_the_probes_and_are_cut_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "READ_TIMEOUT", 1.0)
    running = start(tmp_path, SECRET, TOKEN)
    stuck: list[socket.socket] = []
    try:
        for _ in range(200):  # a burst of connections at once, none of which sends a whole request
            raw = socket.socket()
            raw.setblocking(False)
            raw.connect_ex((running.host, running.port))
            stuck.append(raw)
        probes = [running.get(path, timeout=1) for path in ("/healthz", "/readyz", "/metrics")]
        assert probes == [200, 200, 200]  # each within a kubelet probe's default timeoutSeconds: 1
        for number, raw in enumerate(stuck):  # half-open: a request line, never the end of the headers
            raw.setblocking(True)
            raw.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" if number % 2 else b"POST /sync HTTP/1.1\r\n")
        # A body that never comes: the signed request's reader times out too.
        slow = socket.create_connection((running.host, running.port), timeout=5)
        slow.sendall(b"POST /sync HTTP/1.1\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 100\r\n\r\n{")
        stuck.append(slow)
        time.sleep(1.5)
        for raw in stuck:  # each was closed by the server once READ_TIMEOUT passed
            raw.settimeout(2)
            assert raw.recv(1024) == b""
        assert running.syncs == []
    finally:
        for raw in stuck:
            raw.close()
        running.server.stop()


def test_a_secret_file_that_is_not_there_turns_its_way_off(tmp_path: Path) -> None:
    (tmp_path / "token").write_bytes(b"t")
    read = sync_endpoint.secret_files(tmp_path / "absent", tmp_path / "token")
    assert read() == sync_endpoint.Secrets(webhook=None, token=b"t")
    (tmp_path / "token").write_bytes(b"\n")
    with pytest.raises(OSError, match="is empty"):
        read()
