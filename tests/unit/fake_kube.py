"""A fake transport for the gateway: its HTTP requests answered by a function, each one recorded.

The gateway's own code runs (paths from the resource table, parsing, shape checks, paging, typed
errors); only `Gateway.request`, the one call that would reach the client's pool, is replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException

from reconciler.adapters import kube

HOST = "https://127.0.0.1:6443"


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, Any]
    accept: str
    body: Any
    content_type: str | None
    timeout: tuple[float, float] | None


def refused(status: int, reason: str = "Reason", body: dict[str, Any] | None = None) -> ApiException:
    """The client's exception for an answer outside 2xx, with the server's metav1.Status."""
    exc = ApiException(status=status, reason=reason)
    exc.body = None if body is None else json.dumps(body)
    return exc


class Lines:
    """A streamed HTTP answer (a watch's): the lines, cut in awkward chunks."""

    def __init__(self, lines: list[bytes]) -> None:
        text = b"".join(line + b"\n" for line in lines)
        self.chunks = [text[i : i + 7] for i in range(0, len(text), 7)]

    @classmethod
    def of(cls, events: list[Any]) -> Lines:
        return cls([json.dumps(event).encode() for event in events])

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        pass


@dataclass
class FakeApi:
    """`respond(call)`: a document (sent as JSON), bytes (sent as they are), an exception (raised, as
    the client raises it), or a response object (a watch stream)."""

    respond: Callable[[Call], Any]
    calls: list[Call] = field(default_factory=list)

    def request(
        self,
        method: str,
        path: str,
        query: Any = None,
        *,
        accept: str = kube.JSON,
        body: Any = None,
        content_type: str | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        sent = {key: value for key, value in (query or {}).items() if value is not None}
        call = Call(method, path, sent, accept, body, content_type, timeout)
        self.calls.append(call)
        answer = self.respond(call)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, bytes):
            return SimpleNamespace(data=answer)
        if isinstance(answer, dict | list | str | int | float) or answer is None:
            return SimpleNamespace(data=json.dumps(answer).encode())
        return answer


def gateway(respond: Callable[[Call], Any] = lambda call: {}) -> tuple[kube.Gateway, FakeApi]:
    """A gateway whose requests `respond` answers, and the fake (its `calls`)."""
    fake = FakeApi(respond)
    connected = kube.Gateway(None, HOST)
    connected.request = fake.request  # type: ignore[method-assign]
    return connected, fake


def always(answer: Any) -> Callable[[Call], Any]:
    return lambda call: answer
