"""Fault injection on the real control plane (issue 12, item 5): restart kube-apiserver, pause etcd,
and a recording proxy between gpudrv and the API server that can kill gpudrv at an exact request or
make another writer win a race before one.

The proxy speaks plain HTTP to gpudrv (its kubeconfig names http://127.0.0.1:PORT, no credentials)
and HTTPS to the real kube-apiserver with the admin client certificate. It forwards every request
unchanged and records each exchange, so a test can count what gpudrv wrote. When the API server is
down, the proxy drops the connection without an answer, as a dead server would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

STATE = Path(os.environ.get("GPUDRV_CLUSTER_STATE") or Path.home() / ".cache" / "gpudrv" / "cluster-state")


def _state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads((STATE / "state.json").read_text())
    return state


def _tls() -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(STATE / "pki" / "ca.crt"))
    context.load_cert_chain(str(STATE / "pki" / "admin.crt"), str(STATE / "pki" / "admin.key"))
    return context


def api_port() -> int:
    return int(_state()["ports"]["kube-apiserver"])


def api_ready() -> bool:
    try:
        connection = http.client.HTTPSConnection("127.0.0.1", api_port(), context=_tls(), timeout=3)
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False


@dataclass(frozen=True)
class Outage:
    """When a fault began and when the control plane was whole again (monotonic seconds)."""

    began: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.began


def restart_apiserver(timeout: float = 120, grace: float = 5) -> Outage:
    """SIGTERM kube-apiserver, start it again with the same command line (scripts/cluster's), and wait
    until it is ready; state.json gets the new pid, so `scripts/cluster status` and `down` know it.
    It stops listening at once but can linger for 30 s before it exits: after `grace` seconds it is
    killed, as a crashed server would be."""
    state = _state()
    pid = int(state["pids"]["kube-apiserver"])
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while Path(f"/proc/{pid}").exists() and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with (STATE / "logs" / "kube-apiserver.log").open("ab") as log:
        process = subprocess.Popen(
            [arg.decode() for arg in argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=STATE,
            env=env,
        )
    state["pids"]["kube-apiserver"] = process.pid
    temporary = STATE / "state.json.tmp"
    temporary.write_text(json.dumps(state, indent=2) + "\n")
    temporary.replace(STATE / "state.json")
    deadline = time.monotonic() + timeout
    while not api_ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"kube-apiserver not ready {timeout:.0f}s after its restart")
        time.sleep(0.1)
    return Outage(began, time.monotonic())


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return status not in ("Z", "X")


def pause_etcd(seconds: float) -> Outage:
    """SIGSTOP etcd for `seconds`, then SIGCONT: every API request that needs storage stalls."""
    pid = int(_state()["pids"]["etcd"])
    began = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return Outage(began, time.monotonic())


# --- the recording proxy -------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed in the middle of a request (the point of some tests) is no error here."""


@dataclass
class Exchange:
    """One request gpudrv sent and what the API server answered (status 0: no answer)."""

    method: str
    path: str
    body: Any
    status: int = 0
    query: str = ""
    at: float = field(default_factory=time.monotonic)
    answered: float | None = None  # when the API server's answer came (monotonic)

    @property
    def waited(self) -> float | None:
        return None if self.answered is None else self.answered - self.at

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def node_patch(self, node: str) -> dict[str, Any] | None:
        """The merge patch body, when this is a PATCH of `node`."""
        if self.method == "PATCH" and self.path == f"/api/v1/nodes/{node}" and isinstance(self.body, dict):
            return self.body
        return None


Hook = Callable[[Exchange], None]
# An answer the proxy gives itself instead of forwarding: (status, reason, headers, body).
Answer = tuple[int, str, list[tuple[str, str]], bytes]
Refuse = Callable[[Exchange], Answer | None]


def priority_and_fairness_429(seconds: int = 1) -> Answer:
    """What a busy API server's Priority and Fairness filter answers a request it will not run: 429,
    `Retry-After`, and a Status without causes (k8s.io/apiserver pkg/server/filters/priority-and-fairness.go
    and pkg/endpoints/handlers/responsewriters: tooManyRequests)."""
    status = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": seconds}, "code": 429,
    }  # fmt: skip
    headers = [("Content-Type", "application/json"), ("Retry-After", str(seconds))]
    return 429, "Too Many Requests", headers, json.dumps(status).encode()


class Proxy:
    """See the module docstring. `before(exchange)` runs before a request is forwarded, `after(exchange)`
    once the API server has answered and before gpudrv gets the answer."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.before: Hook | None = None
        self.after: Hook | None = None
        self.refuse: Refuse | None = None  # answer in the API server's place (a 429), not forwarded
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                target = urlsplit(self.path)
                exchange = Exchange(self.command, target.path, body, query=target.query)
                with proxy.lock:
                    proxy.exchanges.append(exchange)
                if proxy.before is not None:
                    proxy.before(exchange)
                refused = proxy.refuse(exchange) if proxy.refuse is not None else None
                if refused is not None:
                    exchange.status, exchange.answered = refused[0], time.monotonic()
                    self._answer(*refused)
                    return
                headers = {
                    key: value
                    for key, value in self.headers.items()
                    if key.lower() not in ("host", "connection", "authorization")
                }
                if _is_watch(self.path):
                    self._stream(exchange, raw, headers)
                    return
                try:
                    status, reason, answer_headers, answer = upstream(self.command, self.path, raw, headers)
                except (OSError, http.client.HTTPException):
                    self.close_connection = True  # no answer, as from a server that is not there
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                exchange.status, exchange.answered = status, time.monotonic()
                if proxy.after is not None:
                    proxy.after(exchange)
                self._answer(status, reason, answer_headers, answer)

            def _answer(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
                with contextlib.suppress(OSError):  # gpudrv may have been killed by the hook
                    self.send_response_only(status, reason)
                    for key, value in headers:
                        if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def _stream(self, exchange: Exchange, raw: bytes, headers: dict[str, str]) -> None:
                """A watch: its events relayed as they come, until either side closes."""
                connection = http.client.HTTPSConnection("127.0.0.1", api_port(), context=_tls(), timeout=600)
                try:
                    connection.request(self.command, self.path, body=raw or None, headers=headers)
                    response = connection.getresponse()
                    exchange.status, exchange.answered = response.status, time.monotonic()
                    self.send_response_only(response.status, response.reason)
                    for key, value in response.getheaders():
                        if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := response.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (OSError, http.client.HTTPException):
                    self.close_connection = True
                finally:
                    connection.close()

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _forward

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: proxy\n  cluster: {{server: {self.url}}}\n"
            "contexts:\n- name: proxy\n  context: {cluster: proxy, user: none}\n"
            "current-context: proxy\nusers:\n- name: none\n  user: {}\n"
        )
        return path

    def since(self, mark: int) -> list[Exchange]:
        with self.lock:
            return self.exchanges[mark:]

    def mark(self) -> int:
        with self.lock:
            return len(self.exchanges)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _is_watch(target: str) -> bool:
    query = urlsplit(target).query
    return any(part in ("watch=true", "watch=1", "watch=True") for part in query.split("&"))


def upstream(
    method: str, target: str, body: bytes, headers: dict[str, str]
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    connection = http.client.HTTPSConnection("127.0.0.1", api_port(), context=_tls(), timeout=60)
    try:
        connection.request(method, target, body=body or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.reason, response.getheaders(), response.read()
    finally:
        connection.close()


def other_writer(node: str, value: str) -> int:
    """Another writer changes the node (an annotation of its own): the resourceVersion moves on."""
    patch = json.dumps({"metadata": {"annotations": {"e2e.gpudrv.dev/other-writer": value}}}).encode()
    status, _, _, _ = upstream(
        "PATCH", f"/api/v1/nodes/{node}", patch, {"Content-Type": "application/merge-patch+json"}
    )
    return status


@contextlib.contextmanager
def proxy() -> Iterator[Proxy]:
    recording = Proxy()
    try:
        yield recording
    finally:
        recording.close()
