"""The one gateway to the Kubernetes API: the client, the JSON it returns as core data, and its errors.

Only this module imports `kubernetes` (an import contract says so), and only inside functions, so
offline commands never pay for it. Requests go through the client's `ApiClient` (`Gateway.request`:
its configuration, auth and connection pool) without the generated API classes: importing
`CoreV1Api` alone costs about 1.5 s and 20 MiB of pydantic models, more than a 5,000-node list.
The JSON is parsed here, never by the client's model layer: a big list is streamed item by item
(`Gateway.items`, jsonstream) so only the fields a command keeps stay in memory (docs/scale.md).
HTTP statuses become typed errors once, here; callers catch NotFound or Conflict, never a status.

Everything from outside is checked at this edge (issue 12): the kubeconfig (read as a regular file,
parsed with yaml_load's limits, checked against shapes.KUBECONFIG before the client sees it, and
any exception of the client's loader one line naming the file; an exec credential plugin gets
EXEC_TIMEOUT or --request-timeout), every answer (at most MAX_BODY bytes, read within the request's
total timeout, JSON, an object, and of the shape the adapters read: api_shapes), and every list (a
continue token sent twice, or more than MAX_PAGES pages, is an error). Requests have connect and
read timeouts, `--request-timeout` as kubectl's; urllib3 retries nothing on its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from reconciler import __version__
from reconciler.adapters import files
from reconciler.adapters.files import positions, yaml_load
from reconciler.adapters.kube import jsonstream, shapes
from reconciler.adapters.kube.shapes import Shape
from reconciler.core import budget, diff
from reconciler.core.tags import Node
from reconciler.core.upgrade import LiveNode
from reconciler.errors import GpudrvError

PAGE_SIZE = 500
MAX_PAGES = 10_000  # 5,000,000 objects: a list longer than that is a server that never stops
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
# The timeouts of this run's requests: raw() puts them in each, connect() sets them from the options.
_timeouts = TIMEOUT
EXEC_TIMEOUT = 15.0  # an exec credential plugin that has not answered by then never will


def _exec_timeout() -> float:
    """An exec credential plugin's time: --request-timeout when given, else EXEC_TIMEOUT."""
    return _timeouts.read if _timeouts.read is not None and _timeouts != TIMEOUT else EXEC_TIMEOUT


@dataclass(frozen=True)
class Options:
    kubeconfig: str | None = None
    context: str | None = None
    request_timeout: float | None = None  # --request-timeout, seconds; 0 for none; None for the defaults


# --- errors: one per HTTP status a caller acts on --------------------------------------------------


class ApiError(GpudrvError):
    """The API server refused a request; `detail` and `causes` are its own words."""

    def __init__(
        self, host: str, status: int, reason: str, detail: str, causes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(f"the cluster at {host} answered {status} {reason}: {detail or 'no message'}")
        self.status, self.reason, self.detail, self.causes = status, reason, detail, causes

    def explanation(self) -> str:
        """The server's message with its causes (an eviction names the budget there)."""
        return " ".join([self.detail, *self.causes]).strip() or self.reason


class NotFound(ApiError):
    """404: no such object."""


class Conflict(ApiError):
    """409: a write lost a race, someone changed the object since we read it."""


class TooManyRequests(ApiError):
    """429: for an eviction, a disruption budget said no."""


class Forbidden(ApiError):
    """401 or 403: the credentials may not do this."""


class Unreachable(GpudrvError):
    """No answer from the API server at all."""


class _BadAnswer(Exception):
    """An answer gpudrv will not read: too big, or too slow to arrive."""


_BY_STATUS: Mapping[int, type[ApiError]] = {
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: TooManyRequests,
}


class Gateway:
    """A connected API client: requests in, parsed and shape-checked JSON or typed errors out.

    `patience` (seconds, 0 by default): once the cluster has answered, how long a request keeps being
    sent again while the cluster does not answer or answers 503/504 (an API server restarting, etcd
    stalled). Commands that change the cluster (apply, drain) are patient, so an outage in the middle
    of a drain is waited out; read-only commands fail at once. `notice` hears of each outage once."""

    def __init__(self, api_client: Any, host: str) -> None:
        self.api_client = api_client
        self.host = host
        self.patience = 0.0
        self.notice: Callable[[str], None] | None = None
        self.reached = False

    def core(self) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.api_client)

    def policy(self) -> Any:
        from kubernetes.client import PolicyV1Api

        return PolicyV1Api(self.api_client)

    def apps(self) -> Any:
        from kubernetes.client import AppsV1Api

        return AppsV1Api(self.api_client)

    def custom(self) -> Any:
        from kubernetes.client import CustomObjectsApi

        return CustomObjectsApi(self.api_client)

    def read(self, request: Callable[[], Any], missing_ok: bool = False, shape: Shape | None = None) -> Any:
        """The answer's JSON, an object (of `shape` when given); None for a 404 when `missing_ok`. An
        answer with `items` is a list, whoever reads it: a list of objects, each with its name."""
        document = self._read(request, missing_ok, shape)
        if document is not None and "items" in document:
            for index, item in enumerate(self._items(document, None)):
                self.check(shapes.CUSTOM, item, "a list", ("items", index))
        return document

    def _read(self, request: Callable[[], Any], missing_ok: bool, shape: Shape | None) -> Any:
        try:
            data = self._send(request)
        except NotFound:
            if missing_ok:
                return None
            raise
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as exc:
            reason = (
                "nested too deeply" if isinstance(exc, RecursionError) else jsonstream.number_problem(exc)
            )
            raise GpudrvError(
                f"the cluster at {self.host} sent a response that is not JSON: {reason}"
            ) from None
        if not isinstance(document, dict):
            raise self.lied("an answer", (), f"is {shapes.describe(document)}, not an object")
        if shape is not None:
            self.check(shape, document, shape.kind)
        return document

    def items(self, request: Callable[[], Any], shape: Shape | None = None) -> Iterator[dict[str, Any]]:
        """Every item of one list answer (not paginated), each an object of `shape`, each as soon as it
        has arrived: the body is never held whole (jsonstream). `request` is one list request without
        `limit`, so there is no continue token to follow: one request whatever the size of the list
        (docs/scale.md says why). The answer is bounded as every other (MAX_BODY, the total timeout)."""
        token = _STREAMED.set(True)
        try:
            response = self._send(request, whole=False)
        finally:
            _STREAMED.reset(token)
        what = f"{shape.one} list" if shape else "a list"
        finished = False
        try:
            with self._answers():
                stream = jsonstream.ListStream(_chunks(response))
                for index, item in enumerate(stream):
                    if not isinstance(item, dict):
                        raise self.lied(what, ("items", index), f"is {shapes.describe(item)}, not an object")
                    if shape is not None:
                        self.check(shape, item, what, ("items", index))
                    yield item
            rest = stream.members.get("items")
            if rest is not None:  # not an array, so not streamed
                raise self.lied(what, ("items",), f"is {shapes.describe(rest)}, not a list")
            self._whole_list(stream.members.get("metadata"), what)
            finished = True
        except (jsonstream.StreamError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise GpudrvError(f"the cluster at {self.host} sent a list that is not JSON: {reason}") from None
        finally:
            # A connection with unread bytes must not go back to the pool.
            with contextlib.suppress(AttributeError):  # an answer read whole has no connection
                response.release_conn() if finished else response.close()

    def pages(
        self, request: Callable[[str | None], Any], shape: Shape | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list; `request` takes the continue token (None first). A token the
        server sent before, or more than MAX_PAGES pages, is a list that would never end: an error."""
        token: str | None = None
        seen: set[str] = set()
        while True:
            page = self._read(partial(request, token), False, None)
            yield from self._items(page, shape)  # each item of `shape`
            metadata = page.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise self.lied("a list", ("metadata",), f"is {shapes.describe(metadata)}, not an object")
            token = (metadata or {}).get("continue")
            if token is not None and not isinstance(token, str):
                raise self.lied(
                    "a list", ("metadata", "continue"), f"is {shapes.describe(token)}, not a string"
                )
            if not token:
                return
            if token in seen:
                raise GpudrvError(
                    f"the cluster at {self.host} sent the same continue token twice "
                    f"({token[:40]!r}): a list that would never end"
                )
            seen.add(token)
            if len(seen) >= MAX_PAGES:
                raise GpudrvError(
                    f"the cluster at {self.host} sent more than {MAX_PAGES:,} pages of one list"
                )

    def _whole_list(self, metadata: Any, what: str) -> None:
        """A list asked for whole (no limit) ends there: a continue token would mean items left out."""
        if metadata is not None and not isinstance(metadata, dict):
            raise self.lied(what, ("metadata",), f"is {shapes.describe(metadata)}, not an object")
        token = (metadata or {}).get("continue")
        if token is not None and not isinstance(token, str):
            raise self.lied(what, ("metadata", "continue"), f"is {shapes.describe(token)}, not a string")
        if token:
            raise GpudrvError(
                f"the cluster at {self.host} sent part of a list asked for whole (a continue token, "
                f"{token[:40]!r}, to a request without limit): gpudrv will not act on a partial list"
            )

    def _items(self, page: dict[str, Any], shape: Shape | None) -> list[dict[str, Any]]:
        items = page.get("items")
        if items is None:
            return []
        what = f"{shape.one} list" if shape else "a list"
        if not isinstance(items, list):
            raise self.lied(what, ("items",), f"is {shapes.describe(items)}, not a list")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.lied(what, ("items", index), f"is {shapes.describe(item)}, not an object")
            if shape is not None:
                self.check(shape, item, what, ("items", index))
        return items

    def check(self, shape: Shape, document: Any, what: str, at: tuple[str | int, ...] = ()) -> None:
        """The document has the shape, or one error naming the server, the field and what it holds."""
        found = shapes.problem(shape, document)
        if found is not None:
            path, reason = found
            raise self.lied(what if at else shape.one, (*at, *path), reason)

    def lied(self, what: str, path: tuple[str | int, ...], reason: str) -> GpudrvError:
        field_name = shapes.dotted(path) if path else "it"
        return GpudrvError(
            f"the cluster at {self.host} sent {what} the API never sends: {field_name} {reason}"
        )

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | bool | None] | None = None,
        *,
        accept: str = JSON,
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        """One HTTP request through the ApiClient, as a generated `*_with_http_info(...,
        _preload_content=False)` method makes it (configuration, auth, timeout, pool), and the same
        answer: the unread urllib3 response, or the client's ApiException for a status outside 2xx.
        None values in `query` are left out."""
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
        answer = self.api_client.call_api(*serialized, _request_timeout=raw()["_request_timeout"])
        if not 200 <= answer.status <= 299:
            answer.read()
            raise ApiException(http_resp=answer)
        return answer.response

    def write(self, request: Callable[[], Any]) -> None:
        self._send(request)

    def _send(self, request: Callable[[], Any], *, whole: bool = True) -> Any:
        """One request; while patient, sent again through an outage (see the class). The answer's
        bytes, or (`whole` false) the unread answer."""
        deadline: float | None = None
        delay = 0.5
        while True:
            try:
                data = self._once(request, whole)
            except (Unreachable, ApiError) as exc:
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

    def _transient(self, exc: GpudrvError) -> bool:
        if not self.patience or not self.reached:
            return False
        return isinstance(exc, Unreachable) or (isinstance(exc, ApiError) and exc.status in (503, 504))

    def _once(self, request: Callable[[], Any], whole: bool = True) -> Any:
        with self._answers():
            # Read the whole answer: a pooled connection must not keep unread bytes.
            return request().data if whole else request()

    @contextlib.contextmanager
    def _answers(self) -> Iterator[None]:
        """The client's exceptions, and answers gpudrv will not read, as typed errors."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            if not exc.status:  # no HTTP answer: TLS failed (the client's status 0)
                raise Unreachable(f"cannot reach the cluster at {self.host}: {_tls_reason(exc)}") from None
            raise self._error(exc) from None
        except HTTPError as exc:
            raise Unreachable(f"cannot reach the cluster at {self.host}: {_reason(exc)}") from None
        except _BadAnswer as exc:
            raise Unreachable(f"the cluster at {self.host} {exc}") from None

    def _error(self, exc: Any) -> ApiError:
        status = int(exc.status or 0)
        try:
            body = json.loads(exc.body)
        except (TypeError, ValueError, RecursionError):
            body = {}
        body = body if isinstance(body, dict) else {}
        details = body.get("details")
        details = details if isinstance(details, dict) else {}
        causes = details.get("causes")
        causes = tuple(
            str(c["message"])
            for c in (causes if isinstance(causes, list) else [])
            if isinstance(c, dict) and c.get("message")
        )
        kind = _BY_STATUS.get(status, ApiError)
        return kind(
            self.host, status, _first_line(str(exc.reason)), str(body.get("message", "")).strip(), causes
        )


def _chunks(response: Any) -> Iterator[bytes]:
    """The answer's bytes as they arrive (one piece when it was read whole)."""
    if hasattr(response, "stream"):
        yield from response.stream(jsonstream.CHUNK)
    else:
        yield response.data


def segment(name: str) -> str:
    """A name as one URL path segment, quoted as the generated API methods quote path parameters."""
    return quote(name, safe="")


def raw(**extra: Any) -> dict[str, Any]:
    """The keyword arguments every request takes: JSON left unparsed, and the run's timeouts."""
    return {"_preload_content": False, "_request_timeout": _timeouts.pair(), **extra}


NO_CLUSTER = "no cluster configured"


class NoCluster(GpudrvError):
    """No kubeconfig and not in a pod: the CLI says what the command would have read (cli._no_cluster)."""


def connect(options: Options) -> Gateway:
    """Configuration as kubectl finds it: --kubeconfig, KUBECONFIG, ~/.kube/config, else in-cluster."""
    global _timeouts  # noqa: PLW0603 - one run, one set of timeouts (apply's worker threads share them)
    _timeouts = Timeouts.of(options.request_timeout)
    paths = _kubeconfig_files(options)
    if paths:
        for path in paths:
            _check_kubeconfig(path)
        api = _client(f"kubeconfig {os.pathsep.join(paths)}", partial(_from_files, paths, options.context))
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        api = _client("in-cluster configuration", _in_cluster)
    else:
        raise NoCluster(f"{NO_CLUSTER}: pass --kubeconfig or --context, or set KUBECONFIG")
    api.rest_client.pool_manager = _BoundedPool(api.rest_client.pool_manager)
    api.user_agent = USER_AGENT  # the API server's audit log and metrics name gpudrv
    return Gateway(api, str(api.configuration.host))


def _kubeconfig_files(options: Options) -> list[str]:
    """The kubeconfig files to merge, in order; [] for in-cluster configuration."""
    given = options.kubeconfig or os.environ.get("KUBECONFIG")
    if given:
        paths = [path for path in given.split(os.pathsep) if path]
        _check_files(paths)
        return paths
    default = Path("~/.kube/config").expanduser()
    if default.exists():
        _check_files([str(default)])
        return [str(default)]
    if options.context:
        raise GpudrvError(
            f"--context {options.context}: no kubeconfig (no --kubeconfig, KUBECONFIG or {default})"
        )
    return []


def _check_files(paths: list[str]) -> None:
    for path in paths:
        file = Path(path).expanduser()
        if file.is_file():
            continue
        if file.is_dir():
            raise GpudrvError(f"kubeconfig {path}: is a directory, not a file")
        raise GpudrvError(f"kubeconfig {path}: {'not a regular file' if file.exists() else 'no such file'}")


def _check_kubeconfig(path: str) -> None:
    """The file is one YAML mapping of the shape the client reads, within yaml_load's limits: the
    client's own loader (PyYAML, then plain dict access) would raise anything at all on another."""
    try:
        text = files.read_text(Path(path).expanduser())
    except GpudrvError as exc:
        raise GpudrvError(f"kubeconfig {exc}") from None
    try:
        documents = list(yaml_load.documents(text, version=(1, 1)))  # client-go reads YAML 1.1
    except yaml_load.Problem as exc:
        raise GpudrvError(f"kubeconfig {path}:{exc.line or 1}: {exc.message}") from None
    if not documents or documents == [None]:
        raise GpudrvError(f"kubeconfig {path}: the file is empty")
    if len(documents) > 1:
        raise GpudrvError(f"kubeconfig {path}: {len(documents)} YAML documents; a kubeconfig is one")
    (document,) = documents
    if not isinstance(document, dict):
        raise GpudrvError(f"kubeconfig {path}: not a kubeconfig: {shapes.describe(document)}, not a mapping")
    found = shapes.problem(shapes.KUBECONFIG, document)
    if found is not None:
        at, reason = found
        line = positions.line_of(document, list(at), 1)
        raise GpudrvError(f"kubeconfig {path}:{line}: {shapes.dotted(at)} {reason}")


def _from_files(paths: list[str], context: str | None) -> Any:
    from kubernetes import config

    # persist_config=False: gpudrv never writes the user's kubeconfig (the client would, refreshing tokens).
    return config.new_client_from_config(
        config_file=os.pathsep.join(paths), context=context, persist_config=False
    )


def _in_cluster() -> Any:
    from kubernetes import client, config

    config.load_incluster_config()
    return client.ApiClient()


def _client(source: str, load: Callable[[], Any]) -> Any:
    """The client the loader makes; whatever it raises (ConfigException, or anything at all from a
    file it did not expect), or logs as an error (a failed exec plugin), is one line naming `source`."""
    from kubernetes.config import kube_config

    # Also for the token refreshes of later requests.
    kube_config.ExecProvider = _timed_exec_provider()  # type: ignore[attr-defined,assignment]
    logged = _ErrorLog()
    root = logging.getLogger()
    root.addHandler(logged)
    try:
        api = load()
    except GpudrvError:
        raise
    except Exception as exc:  # the edge: a hostile file must not become a traceback
        raise GpudrvError(f"{source}: {_first_line(str(exc)) or type(exc).__name__}") from None
    finally:
        root.removeHandler(logged)
    if logged.messages:
        raise GpudrvError(f"{source}: {logged.messages[0]}")
    return api


class _ErrorLog(logging.Handler):
    """The kubernetes client reports a failed exec plugin with logging.error and goes on without
    credentials: collect those messages instead of letting them reach stderr."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(_first_line(record.getMessage()))


def _timed_exec_provider() -> type:
    """The client's ExecProvider, with the plugin given EXEC_TIMEOUT (then killed) and no stdin."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.exec_provider import ExecProvider

    class TimedExecProvider(ExecProvider):
        def run(self, previous_response: Any = None) -> Any:
            info: dict[str, Any] = {
                "apiVersion": self.api_version,
                "kind": "ExecCredential",
                "spec": {"interactive": False},
            }
            if previous_response:
                info["spec"]["response"] = previous_response
            if self.cluster:
                info["spec"]["cluster"] = self.cluster.value
            self.env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
            command = str(self.args[0])
            try:
                process = subprocess.run(
                    [str(arg) for arg in self.args],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    cwd=self.cwd,
                    env={str(k): str(v) for k, v in self.env.items()},
                    timeout=_exec_timeout(),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise ConfigException(
                    f"exec plugin {command} did not answer within {_exec_timeout():g} s"
                ) from None
            except OSError as exc:
                raise ConfigException(f"exec plugin {command}: {exc.strerror or exc}") from None
            if process.returncode != 0:
                said = _first_line(process.stderr.decode("utf-8", "replace"))
                raise ConfigException(f"exec plugin {command} exited with {process.returncode}: {said}")
            try:
                data = json.loads(process.stdout)
            except (ValueError, RecursionError):
                raise ConfigException(
                    f"exec plugin {command} did not print an ExecCredential (JSON)"
                ) from None
            if not isinstance(data, dict) or not isinstance(data.get("status"), dict):
                raise ConfigException(f"exec plugin {command} printed JSON without an ExecCredential status")
            if data.get("apiVersion") != self.api_version:
                found = data.get("apiVersion")
                raise ConfigException(
                    f"exec plugin {command} answered apiVersion {found!r}, not {self.api_version}"
                )
            return data["status"]

    return TimedExecProvider


# Set while Gateway.items sends its request: that answer is read as it arrives (_Streamed), not here.
_STREAMED: ContextVar[bool] = ContextVar("gpudrv_streamed", default=False)


class _BoundedPool:
    """The client's urllib3 pool with every answer read here: at most MAX_BODY bytes, within the total
    timeout, and urllib3's own retries off (a retried read timeout would multiply the wait). A list
    that Gateway.items streams is bounded the same way as it is read (_Streamed)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        if _is_watch(url):
            # A watch is a stream that stays open for minutes: its events must reach the caller as
            # they come (kube.Stream reads it line by line, under its own timeouts), not at its end.
            return self._pool.request(method, url, **kwargs)
        kwargs["preload_content"] = False
        kwargs["retries"] = False
        started = time.monotonic()
        response = self._pool.request(method, url, **kwargs)
        if _STREAMED.get() and 200 <= response.status <= 299:
            return _Streamed(response, None if _timeouts.total is None else started + _timeouts.total)
        try:
            body = _read_body(response, _timeouts.total)
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


class _Streamed:
    """A list's answer read as it arrives (Gateway.items), with the bounds of a whole answer: at most
    MAX_BODY bytes, all of them by `deadline`."""

    def __init__(self, response: Any, deadline: float | None) -> None:
        self._response, self._deadline = response, deadline
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
                raise _BadAnswer(f"sent an answer of more than {MAX_BODY // (1024 * 1024)} MiB")
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise _BadAnswer(
                    f"took more than {_timeouts.total:g} s to send one answer (--request-timeout)"
                )
            yield chunk

    def getheaders(self) -> Any:
        return self.headers

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name, default)

    def release_conn(self) -> None:
        self._response.release_conn()

    def close(self) -> None:
        self._response.close()


def _read_body(response: Any, total: float | None) -> bytes:
    deadline = None if total is None else time.monotonic() + total
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY:
            raise _BadAnswer(f"sent an answer of more than {MAX_BODY // (1024 * 1024)} MiB")
        if deadline is not None and time.monotonic() > deadline:
            raise _BadAnswer(f"took more than {total:g} s to send one answer (--request-timeout)")
        chunks.append(chunk)
    return b"".join(chunks)


def _reason(exc: BaseException) -> str:
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError

    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, ReadTimeoutError):
        return f"no answer within {_timeouts.shown()} (--request-timeout)"
    if isinstance(reason, ConnectTimeoutError) and not isinstance(reason, NewConnectionError):
        return f"no connection within {_timeouts.connect or 0:g} s"
    text = str(reason)
    # urllib3 wraps the socket error: keep the last, most specific part on one line.
    return text.rsplit(": ", 1)[-1].strip() if "Errno" in text or "refused" in text else _first_line(text)


def _tls_reason(exc: Any) -> str:
    """The client reports a TLS failure as status 0 with "SSLError\n<details>": the details."""
    lines = [line for line in str(exc.reason or "").splitlines() if line.strip()]
    return _first_line(lines[-1] if lines else "TLS failed")[:300]


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


# --- objects: the API's JSON as core data ------------------------------------------------------------


def node(document: Mapping[str, Any]) -> Node:
    """A Node (or its PartialObjectMetadata): the name and labels."""
    metadata = document.get("metadata") or {}
    return Node(str(metadata.get("name", "")), dict(metadata.get("labels") or {}))


def kept(node: Node, labels: Collection[str] | None, shared: dict[str, str] | None = None) -> Node:
    """The node with only the labels a command reads (None: all of them). Label values repeat across
    a fleet: with `shared`, one string object per distinct value (10,000 nodes hold ~100 strings,
    not 10,000 copies of "true" and the same kernel)."""
    if labels is None:
        return node
    found = node.labels
    memo = {} if shared is None else shared
    return Node(node.name, {key: memo.setdefault(found[key], found[key]) for key in labels if key in found})


def kept_annotations(document: Mapping[str, Any], keys: Collection[str]) -> dict[str, str]:
    """Only these annotations of an object (gpudrv's own: NFD's alone can be kilobytes)."""
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    return {key: str(annotations[key]) for key in keys if key in annotations}


def live_node(document: Mapping[str, Any]) -> LiveNode:
    """A whole Node, with what an upgrade needs besides the labels."""
    metadata = document.get("metadata") or {}
    spec = document.get("spec") or {}
    return LiveNode(node(document), bool(spec.get("unschedulable")), dict(metadata.get("annotations") or {}))


def pod(document: Mapping[str, Any]) -> budget.Pod:
    metadata = document.get("metadata") or {}
    owners = [ref for ref in metadata.get("ownerReferences") or [] if ref.get("controller")]
    return budget.Pod(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        labels=dict(metadata.get("labels") or {}),
        owner_kind=str(owners[0].get("kind")) if owners else None,
        mirror="kubernetes.io/config.mirror" in (metadata.get("annotations") or {}),
        phase=str((document.get("status") or {}).get("phase", "")),
        gpu=_requests_gpu(document.get("spec") or {}),
        terminating=bool(metadata.get("deletionTimestamp")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (document.get("status") or {}).get("conditions") or []
        ),
    )


def _requests_gpu(spec: Mapping[str, Any]) -> bool:
    """A GPU pod as the GPU Operator tells one: a container (not an init container) whose limits or
    requests name a resource starting with nvidia.com/gpu or nvidia.com/mig-."""
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            if any(budget.gpu_resource(str(name)) for name in resources.get(kind) or {}):
                return True
    return False


def disruption_budget(document: Mapping[str, Any]) -> budget.Budget:
    """A live PodDisruptionBudget as the drain and the upgrade gates see it: selector and status."""
    metadata, spec, status = (document.get(key) or {} for key in ("metadata", "spec", "status"))
    return budget.Budget(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        selector=budget.selector(spec.get("selector")),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        current_healthy=int(status.get("currentHealthy", 0)),
        desired_healthy=int(status.get("desiredHealthy", 0)),
        disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
        fresh=int(status.get("observedGeneration", 0)) >= int(metadata.get("generation", 0)),
    )


def budget_spec(document: Mapping[str, Any]) -> diff.Budget:
    """A live PodDisruptionBudget as the diff sees it: identity and spec, to compare with git."""
    metadata = document.get("metadata") or {}
    return diff.Budget(
        str(metadata.get("namespace", "")), str(metadata.get("name", "")), document.get("spec") or {}
    )


# --- long-running requests: watch streams, leases, access reviews (gpudrv reconcile) ------------------


class Gone(ApiError):
    """410: the resourceVersion a watch or list asked for is too old; list again."""


def coordination(gateway: Gateway) -> Any:
    from kubernetes.client import CoordinationV1Api

    return CoordinationV1Api(gateway.api_client)


def authorization(gateway: Gateway) -> Any:
    from kubernetes.client import AuthorizationV1Api

    return AuthorizationV1Api(gateway.api_client)


class Stream:
    """A watch: one JSON event per line as the API server sends them, until it ends the stream, an
    error (typed as above; 410 is Gone) or `close()` from another thread."""

    def __init__(self, gateway: Gateway, request: Callable[[], Any]) -> None:
        self.gateway, self.request = gateway, request
        self.response: Any = None
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            self.response = self.request()
            if self.closed:
                return
            for line in _lines(self.response):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    raise _status_error(self.gateway.host, event.get("object") or {})
                yield event
        except ApiException as exc:
            error = self.gateway._error(exc)
            if error.status == 410:
                raise Gone(self.gateway.host, 410, error.reason, error.detail) from None
            raise error from None
        except (HTTPError, OSError) as exc:
            if not self.closed:
                raise Unreachable(
                    f"watch on the cluster at {self.gateway.host} broke: {_reason(exc)}"
                ) from None
        except ValueError as exc:
            raise GpudrvError(
                f"the cluster at {self.gateway.host} sent a watch event that is not JSON: {exc}"
            ) from None
        finally:
            self._release()

    def close(self) -> None:
        """Ends the stream from another thread: the reading thread sees its end, not an error."""
        self.closed = True
        self._release()

    def _release(self) -> None:
        import contextlib

        response, self.response = self.response, None
        for action in ("shutdown", "close"):  # shutdown (urllib3 2.3) wakes a read blocked in another thread
            with contextlib.suppress(Exception):
                getattr(response, action, lambda: None)()


def _lines(response: Any) -> Iterator[bytes]:
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        yield buffer


def _status_error(host: str, status: Mapping[str, Any]) -> ApiError:
    """A watch's ERROR event carries a metav1.Status."""
    code = int(status.get("code") or 0)
    kind = Gone if code == 410 else _BY_STATUS.get(code, ApiError)
    return kind(host, code, str(status.get("reason", "")), str(status.get("message", "")).strip())


def authentication(gateway: Gateway) -> Any:
    from kubernetes.client import AuthenticationV1Api

    return AuthenticationV1Api(gateway.api_client)


def streaming(gateway: Gateway) -> Gateway:
    """A gateway for watches: a client of its own on the same configuration, whose answers are read
    as they arrive. (A pool that reads each answer whole, with a total time limit, suits every other
    request; a watch's answer lasts minutes and each line of it is news.)"""
    from kubernetes.client import ApiClient

    return Gateway(ApiClient(configuration=gateway.api_client.configuration), gateway.host)
