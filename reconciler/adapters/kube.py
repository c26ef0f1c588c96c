"""The one gateway to the Kubernetes API: the client, the JSON it returns as core data, and its errors.

Only this module imports `kubernetes` (an import contract says so), and only inside functions, so
offline commands never pay for it. Requests go through the client's `ApiClient` (`Gateway.request`:
its configuration, auth and connection pool) without the generated API classes: importing
`CoreV1Api` alone costs about 1.5 s and 20 MiB of pydantic models, more than a 5,000-node list.
The JSON is parsed here, never by the client's model layer: a big list is streamed item by item
(`Gateway.items`, jsonstream) so only the fields a command keeps stay in memory (docs/scale.md).
HTTP statuses become typed errors once, here; callers catch NotFound or Conflict, never a status.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from reconciler import __version__
from reconciler.adapters import jsonstream
from reconciler.core import budget, diff
from reconciler.core.tags import Node
from reconciler.core.upgrade import LiveNode
from reconciler.errors import GpudrvError

PAGE_SIZE = 500
TIMEOUT = (5, 30)  # (connect, read) seconds: an unreachable cluster fails fast, a big list still completes
JSON = "application/json"
# Node and pod lists ask for metadata only where labels and annotations are all a command reads.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
USER_AGENT = f"gpudrv/{__version__}"


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

    def items(self, request: Callable[[], Any]) -> Iterator[dict[str, Any]]:
        """Every item of one list response, each as soon as it has arrived: the body is never held
        whole (jsonstream). `request` is one list request without `limit`, so there is no continue
        token to follow: one request whatever the size of the list (docs/scale.md says why)."""
        with self._answers():
            response = request()
        finished = False
        try:
            with self._answers():
                yield from jsonstream.ListStream(response.stream(jsonstream.CHUNK))
            finished = True
        except jsonstream.StreamError as exc:
            raise GpudrvError(f"the cluster at {self.host} sent a list that is not JSON: {exc}") from None
        finally:
            # A connection with unread bytes must not go back to the pool.
            response.release_conn() if finished else response.close()

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

    def _send(self, request: Callable[[], Any]) -> Any:
        with self._answers():
            # Read the whole answer: a pooled connection must not keep unread bytes.
            return request().data

    @contextlib.contextmanager
    def _answers(self) -> Iterator[None]:
        """The client's exceptions as typed errors."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
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


def segment(name: str) -> str:
    """A name as one URL path segment, quoted as the generated API methods quote path parameters."""
    return quote(name, safe="")


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
    api.user_agent = USER_AGENT  # the API server's audit log and metrics name gpudrv
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
