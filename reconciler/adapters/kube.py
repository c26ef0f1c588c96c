"""The one gateway to the Kubernetes API: the client, the JSON it returns as core data, and its errors.

Only this module imports `kubernetes` (an import contract says so), and only inside functions, so
offline commands never pay for it. Every request goes out with `_preload_content=False` and the JSON
is parsed here: the client's model layer is slow for big lists and strict about plain-dict bodies.
HTTP statuses become typed errors once, here; callers catch NotFound or Conflict, never a status.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.core import budget, diff
from reconciler.core.tags import Node
from reconciler.core.upgrade import LiveNode
from reconciler.errors import GpudrvError

PAGE_SIZE = 500
TIMEOUT = (5, 30)  # (connect, read) seconds: an unreachable cluster fails fast, a big list still completes


@dataclass(frozen=True)
class Options:
    kubeconfig: str | None = None
    context: str | None = None


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


_BY_STATUS: Mapping[int, type[ApiError]] = {
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: TooManyRequests,
}


class Gateway:
    """A connected API client: requests in, parsed JSON or typed errors out."""

    def __init__(self, api_client: Any, host: str) -> None:
        self.api_client = api_client
        self.host = host

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

    def read(self, request: Callable[[], Any], missing_ok: bool = False) -> Any:
        """The answer's JSON; None for a 404 when `missing_ok`."""
        try:
            data = self._send(request)
        except NotFound:
            if missing_ok:
                return None
            raise
        try:
            return json.loads(data)
        except ValueError as exc:
            raise GpudrvError(f"the cluster at {self.host} sent a response that is not JSON: {exc}") from None

    def pages(self, request: Callable[[str | None], Any]) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list; `request` takes the continue token (None first)."""
        token: str | None = None
        while True:
            page = self.read(partial(request, token))
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def write(self, request: Callable[[], Any]) -> None:
        self._send(request)

    def _send(self, request: Callable[[], Any]) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            # Read the whole answer: a pooled connection must not keep unread bytes.
            return request().data
        except ApiException as exc:
            raise self._error(exc) from None
        except HTTPError as exc:
            raise Unreachable(f"cannot reach the cluster at {self.host}: {_reason(exc)}") from None

    def _error(self, exc: Any) -> ApiError:
        status = int(exc.status or 0)
        try:
            body = json.loads(exc.body)
        except (TypeError, ValueError):
            body = {}
        body = body if isinstance(body, dict) else {}
        details = body.get("details") or {}
        causes = tuple(str(c["message"]) for c in details.get("causes") or [] if c.get("message"))
        kind = _BY_STATUS.get(status, ApiError)
        return kind(self.host, status, str(exc.reason), str(body.get("message", "")).strip(), causes)


def raw(**extra: Any) -> dict[str, Any]:
    """The keyword arguments every request takes: JSON left unparsed, and a timeout."""
    return {"_preload_content": False, "_request_timeout": TIMEOUT, **extra}


def connect(options: Options) -> Gateway:
    """Configuration as kubectl finds it: --kubeconfig, KUBECONFIG, ~/.kube/config, else in-cluster."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = options.kubeconfig or os.environ.get("KUBECONFIG")
    default = Path("~/.kube/config").expanduser()
    try:
        if path or options.context or default.exists():
            _check_files(path)
            api = config.new_client_from_config(config_file=options.kubeconfig, context=options.context)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
            api = client.ApiClient()
        else:
            raise GpudrvError(
                "no cluster configured: pass --kubeconfig or --context, set KUBECONFIG, or use --from DIR"
            )
    except ConfigException as exc:
        raise GpudrvError(f"kubeconfig: {str(exc).splitlines()[0]}") from None
    return Gateway(api, api.configuration.host)


def _check_files(paths: str | None) -> None:
    for path in (paths or "").split(os.pathsep):
        file = Path(path).expanduser()
        if not path or file.is_file():
            continue
        if file.is_dir():
            raise GpudrvError(f"kubeconfig {path}: is a directory, not a file")
        raise GpudrvError(f"kubeconfig {path}: {'not a regular file' if file.exists() else 'no such file'}")


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    # urllib3 wraps the socket error: keep the last, most specific part on one line.
    return text.rsplit(": ", 1)[-1].strip() if "Errno" in text or "refused" in text else text.splitlines()[0]


# --- objects: the API's JSON as core data ------------------------------------------------------------


def node(document: Mapping[str, Any]) -> Node:
    """A Node (or its PartialObjectMetadata): the name and labels."""
    metadata = document.get("metadata") or {}
    return Node(str(metadata.get("name", "")), dict(metadata.get("labels") or {}))


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
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        if any(budget.GPU_RESOURCE in (resources.get(kind) or {}) for kind in ("limits", "requests")):
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
