"""A fake Kubernetes API server for the hostile-server cases: a loopback HTTP server that answers every
request with whatever the test asks for (garbage JSON, lies, a hang, a repeated continue token).

Loopback only, and bounded: a hanging answer waits at most until the server stops.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    hang: bool = False  # accept the request and never answer (until the server stops)
    close: bool = False  # close the connection without a word


Responder = Callable[[Request], Answer]


class FakeApi:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(self.command, parts.path, parse_qs(parts.query), body)
                fake.requests.append(request)
                answer = fake.responder(request)
                if answer.hang:
                    fake.stopping.wait(60)
                    self.close_connection = True
                    return
                if answer.close:
                    self.close_connection = True
                    return
                self.send_response_only(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, path: Path, server: str | None = None) -> Path:
        path.write_text(kubeconfig_text(server or self.url))
        return path

    def __enter__(self) -> FakeApi:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def kubeconfig_text(server: str, user: str = "{token: abc}") -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster: {{server: {server!r}}}\n"
        "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
        f"users:\n- name: u\n  user: {user}\n"
    )


@contextlib.contextmanager
def serving(responder: Responder) -> Iterator[FakeApi]:
    with FakeApi(responder) as fake:
        yield fake
