"""The wire: one HTTP request through the client's ApiClient (its configuration, auth and pool), the
pool that bounds every answer, the timeouts (held by each client, never by the process), and the
client's exceptions as typed errors. With _config, the only module that imports kubernetes or urllib3.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from reconciler import __version__
from reconciler.adapters.kube._errors import ApiError, BadAnswer, Gone, Unreachable, first_line, refusal
from reconciler.core.base import throttle
from reconciler.core.base.throttle import Throttled
from reconciler.errors import GpudrvError

MAX_BODY = 256 * 1024 * 1024  # bytes of one answer, decompressed
JSON = "application/json"
# Node and pod lists ask for metadata only where labels and annotations are all a command reads.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
USER_AGENT = f"gpudrv/{__version__}"


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, to wait for each read, and for a whole answer; None waits for ever."""

    connect: float | None = 5.0
    read: float | None = 15.0
    total: float | None = 60.0

    @classmethod
    def of(cls, request_timeout: float | None) -> Timeouts:
        """--request-timeout as kubectl reads it: unset, the defaults; 0, no timeout; else the bound of
        each request, whole (connecting within at most 5 s of it)."""
        if request_timeout is None:
            return cls()
        if request_timeout == 0:
            return cls(None, None, None)
        return cls(min(5.0, request_timeout), request_timeout, request_timeout)

    def pair(self) -> tuple[float, float] | None:
        if self.connect is None or self.read is None:
            return None
        return (self.connect, self.read)

    def shown(self) -> str:
        return "no timeout" if self.read is None else f"{self.read:g} s"


TIMEOUT = Timeouts()
Query = Mapping[str, str | bool | None]
# Set while Gateway.items sends its request: that answer is read as it arrives (Streamed), not whole.
STREAMED: ContextVar[bool] = ContextVar("gpudrv_streamed", default=False)


class Transport:
    """A connected API client: requests in, bytes or typed errors out.

    `patience` (seconds, 0 by default): once the cluster has answered, how long a request keeps being
    sent again while the cluster does not answer or answers 503/504 (an API server restarting, etcd
    stalled). Commands that change the cluster (apply, drain) are patient, so an outage in the middle
    of a drain is waited out; read-only commands fail at once. `notice` hears of each outage once."""

    def __init__(self, api_client: Any, host: str, timeouts: Timeouts = TIMEOUT) -> None:
        self.api_client = api_client
        self.host = host
        self.timeouts = timeouts
        self.patience = 0.0
        self.notice: Callable[[str], None] | None = None
        self.reached = False
        # Hears of each wait the server asked for (the reconciler counts them); else a line on stderr.
        self.on_throttle: Callable[[Throttled], None] | None = None

    def request(
        self,
        method: str,
        path: str,
        query: Query | None = None,
        *,
        accept: str = JSON,
        body: Any = None,
        content_type: str | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        """One HTTP request through the ApiClient, as the client's generated API methods made it
        (configuration, auth, timeout, pool; the answer left unparsed), and the same answer: the unread
        urllib3 response, or the client's ApiException for a status outside 2xx.
        None values in `query` are left out; `timeout` (connect, read) replaces this client's."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": accept, **({"Content-Type": content_type} if content_type else {})}
        params = [(key, value) for key, value in (query or {}).items() if value is not None]
        serialized = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        bound = timeout or self.timeouts.pair()
        answer = self.api_client.call_api(*serialized, _request_timeout=bound)
        if not 200 <= answer.status <= 299:
            answer.read()
            refused = ApiException(http_resp=answer)
            refused.method = method  # type: ignore[attr-defined]  # what the retry policy asks (core/base/throttle.py)
            raise refused
        return answer.response

    def send(self, request: Callable[[], Any], *, whole: bool = True) -> Any:
        """One request; while patient, sent again through an outage (see the class). The answer's
        bytes, or (`whole` false) the unread answer."""
        deadline: float | None = None
        delay = 0.5
        started, waits = time.monotonic(), 0
        while True:
            try:
                data = self._once(request, whole)
            except (Unreachable, ApiError) as exc:
                asked = self._throttled(exc, waits + 1, started)
                if asked is not None:
                    waits += 1
                    self._wait_as_asked(asked)
                    continue
                if not self._transient(exc):
                    raise
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self.patience
                if now >= deadline:
                    raise
                if delay == 0.5 and self.notice is not None:
                    self.notice(f"{exc}; retrying for up to {self.patience:g} s")
                time.sleep(min(delay, max(deadline - now, 0.05)))
                delay = min(delay * 2, 5.0)
                continue
            self.reached = True
            return data

    def _throttled(self, exc: GpudrvError, attempt: int, started: float) -> Throttled | None:
        """The wait the server asked for, when the policy retries this answer (core/base/throttle.py); the
        request's total timeout bounds the whole of it, retries included."""
        if not isinstance(exc, ApiError):
            return None
        total = self.timeouts.total
        remaining = None if total is None else total - (time.monotonic() - started)
        return throttle.wait(exc.refusal(), attempt, remaining)

    def _wait_as_asked(self, asked: Throttled) -> None:
        if self.on_throttle is not None:
            self.on_throttle(asked)
        elif self.notice is not None:
            self.notice(asked.shown())
        else:
            print(f"gpudrv: waiting for the cluster: {asked.shown()}", file=sys.stderr, flush=True)
        time.sleep(asked.seconds)

    def _transient(self, exc: GpudrvError) -> bool:
        if not self.patience or not self.reached:
            return False
        return isinstance(exc, Unreachable) or (isinstance(exc, ApiError) and exc.status in (503, 504))

    def _once(self, request: Callable[[], Any], whole: bool = True) -> Any:
        with self.answers():
            # Read the whole answer: a pooled connection must not keep unread bytes.
            return request().data if whole else request()

    @contextlib.contextmanager
    def answers(self) -> Iterator[None]:
        """The client's exceptions, and answers gpudrv will not read, as typed errors."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            if not exc.status:  # no HTTP answer: TLS failed (the client's status 0)
                raise Unreachable(f"cannot reach the cluster at {self.host}: {_tls_reason(exc)}") from None
            raise self.error(exc) from None
        except HTTPError as exc:
            raise Unreachable(f"cannot reach the cluster at {self.host}: {self.reason(exc)}") from None
        except BadAnswer as exc:
            raise Unreachable(f"the cluster at {self.host} {exc}") from None

    def error(self, exc: Any) -> ApiError:
        """The client's ApiException as the typed error of its status."""
        method = getattr(exc, "method", "GET")
        return refusal(
            self.host, int(exc.status or 0), str(exc.reason), exc.body, method=method, headers=exc.headers
        )

    def reason(self, exc: BaseException, read: float | None = None) -> str:
        """Why no answer came, on one line, in the words of --request-timeout where it is a timeout
        (`read`: the request's own read timeout, when it had one)."""
        from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError

        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, ReadTimeoutError):
            if read is not None:
                return f"no answer within {read:g} s"
            return f"no answer within {self.timeouts.shown()} (--request-timeout)"
        if isinstance(reason, ConnectTimeoutError) and not isinstance(reason, NewConnectionError):
            return f"no connection within {self.timeouts.connect or 0:g} s"
        text = str(reason)
        # urllib3 wraps the socket error: keep the last, most specific part on one line.
        return text.rsplit(": ", 1)[-1].strip() if "Errno" in text or "refused" in text else first_line(text)

    @contextlib.contextmanager
    def stream_errors(self, closed: Callable[[], bool], read: float | None = None) -> Iterator[None]:
        """A watch's errors: typed (410 is Gone); a broken stream is Unreachable unless `closed()`, when
        it is the end that close() asked for. `read`: the watch's own read timeout, for the message."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            error = self.error(exc)
            if error.status == 410:
                raise Gone(self.host, 410, error.reason, error.detail) from None
            raise error from None
        except (HTTPError, OSError) as exc:
            if not closed():
                raise Unreachable(
                    f"watch on the cluster at {self.host} broke: {self.reason(exc, read)}"
                ) from None


def _tls_reason(exc: Any) -> str:
    """The client reports a TLS failure as status 0 with "SSLError\n<details>": the details."""
    lines = [line for line in str(exc.reason or "").splitlines() if line.strip()]
    return first_line(lines[-1] if lines else "TLS failed")[:300]


class BoundedPool:
    """The client's urllib3 pool with every answer read here: at most MAX_BODY bytes, within the total
    timeout, and urllib3's own retries off (a retried read timeout would multiply the wait). A list
    that Gateway.items streams is bounded the same way as it is read (Streamed)."""

    def __init__(self, pool: Any, timeouts: Timeouts = TIMEOUT) -> None:
        self._pool, self._timeouts = pool, timeouts

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        kwargs["retries"] = False
        if _is_watch(url):
            # A watch is a stream that stays open for minutes: its events must reach the caller as
            # they come (kube.Stream reads it line by line, under its own timeouts), not at its end.
            # Not retried either: a silent watch is cut at its read timeout, not at three of them.
            return self._pool.request(method, url, **kwargs)
        kwargs["preload_content"] = False
        started = time.monotonic()
        response = self._pool.request(method, url, **kwargs)
        total = self._timeouts.total
        if STREAMED.get() and 200 <= response.status <= 299:
            return Streamed(response, None if total is None else started + total, total)
        try:
            body = read_body(response, total)
        finally:
            response.release_conn()
        return _Answer(response.status, response.reason, response.headers, body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def _is_watch(url: str) -> bool:
    query = url.partition("?")[2]
    return any(part == "watch=true" for part in query.split("&"))


@dataclass
class _Answer:
    """A whole answer, as the client's RESTResponse and ApiException read it."""

    status: int
    reason: str
    headers: Any
    data: bytes = field(repr=False)

    def getheaders(self) -> Any:
        return self.headers

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name, default)

    def stream(self, amt: int) -> Iterator[bytes]:
        yield from (self.data[at : at + amt] for at in range(0, len(self.data), amt))

    def release_conn(self) -> None:
        """Read whole: the connection is back in the pool already."""

    close = release_conn


class Streamed:
    """A list's answer read as it arrives (Gateway.items), with the bounds of a whole answer: at most
    MAX_BODY bytes, all of them by `deadline`."""

    def __init__(self, response: Any, deadline: float | None, total: float | None = None) -> None:
        self._response, self._deadline, self._total = response, deadline, total
        self.status, self.reason, self.headers = response.status, response.reason, response.headers

    @property
    def data(self) -> bytes:
        try:
            return b"".join(self.stream(64 * 1024))
        finally:
            self._response.release_conn()

    def stream(self, amt: int) -> Iterator[bytes]:
        size = 0
        while chunk := self._response.read(amt):
            size += len(chunk)
            if size > MAX_BODY:
                raise BadAnswer(f"sent an answer of more than {MAX_BODY // (1024 * 1024)} MiB")
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise BadAnswer(f"took more than {self._total:g} s to send one answer (--request-timeout)")
            yield chunk

    def getheaders(self) -> Any:
        return self.headers

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name, default)

    def release_conn(self) -> None:
        self._response.release_conn()

    def close(self) -> None:
        self._response.close()


def read_body(response: Any, total: float | None) -> bytes:
    deadline = None if total is None else time.monotonic() + total
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY:
            raise BadAnswer(f"sent an answer of more than {MAX_BODY // (1024 * 1024)} MiB")
        if deadline is not None and time.monotonic() > deadline:
            raise BadAnswer(f"took more than {total:g} s to send one answer (--request-timeout)")
        chunks.append(chunk)
    return b"".join(chunks)


def new_client(configuration: Any) -> Any:
    """A client of its own on `configuration` (a watch's: see kube.streaming)."""
    from kubernetes.client import ApiClient

    return ApiClient(configuration=configuration)
