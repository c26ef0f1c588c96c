"""The live cluster, through the official kubernetes client.

`kubernetes` is imported inside `connect` only, so offline commands never pay for it. Node reads
ask for metadata only (PartialObjectMetadata) and parse the JSON themselves: labels are all that
tags and audits need, and the client's model deserialization dominates the cost of bulk lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.core.tags import GPU_PRESENT, Node
from reconciler.errors import GpudrvError

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PAGE_SIZE = 500
TIMEOUT = (5, 30)  # (connect, read) seconds: an unreachable cluster fails fast, a big list still completes


@dataclass(frozen=True)
class Options:
    kubeconfig: str | None = None
    context: str | None = None


class Cluster:
    """A connected cluster; every method reads fresh from the API server."""

    def __init__(self, api_client: Any, host: str) -> None:
        self.api_client = api_client
        self.host = host

    def gpu_nodes(self) -> list[Node]:
        """All nodes labelled gpu.present=true: one paginated metadata-only list."""
        return list(self._list_nodes(f"{GPU_PRESENT}=true"))

    def nodes(self) -> list[Node]:
        """Every node, whatever its labels: one paginated metadata-only list."""
        return list(self._list_nodes(""))

    def disruption_budgets(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's PodDisruptionBudgets (policy/v1) as plain JSON documents."""
        from kubernetes.client import PolicyV1Api

        def read() -> Any:
            return PolicyV1Api(self.api_client).list_namespaced_pod_disruption_budget_with_http_info(
                namespace, _preload_content=False, _request_timeout=TIMEOUT
            )

        return list(self._call(read).get("items") or [])

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's pods as plain JSON documents (spec and status are needed, not only metadata)."""
        pods: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._call(partial(self._pod_page, namespace, token))
            pods.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return pods

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client import CoreV1Api

        def read() -> Any:
            return CoreV1Api(self.api_client).read_namespaced_pod_with_http_info(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT
            )

        document: dict[str, Any] | None = self._call(read, missing_ok=True)
        return document

    def _pod_page(self, namespace: str, token: str | None) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.api_client).list_namespaced_pod_with_http_info(
            namespace, limit=PAGE_SIZE, _continue=token, _preload_content=False, _request_timeout=TIMEOUT
        )

    def node(self, name: str) -> Node | None:
        from kubernetes.client import CoreV1Api

        def read() -> Any:
            return CoreV1Api(self.api_client).read_node_with_http_info(
                name, _preload_content=False, _headers={"Accept": METADATA_ONE}, _request_timeout=TIMEOUT
            )

        document = self._call(read, missing_ok=True)
        return None if document is None else _node(document)

    def _list_nodes(self, selector: str) -> Iterator[Node]:
        token: str | None = None
        while True:
            page = self._call(partial(self._node_page, selector, token))
            yield from (_node(item) for item in page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def _node_page(self, selector: str, token: str | None) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.api_client).list_node_with_http_info(
            label_selector=selector,
            limit=PAGE_SIZE,
            _continue=token,
            _preload_content=False,
            _headers={"Accept": METADATA_LIST},
            _request_timeout=TIMEOUT,
        )

    def _call(self, request: Callable[[], Any], missing_ok: bool = False) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = request()
            return json.loads(response.data)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise GpudrvError(
                f"the cluster at {self.host} answered {exc.status} {exc.reason}: {_message(exc)}"
            ) from None
        except HTTPError as exc:
            raise GpudrvError(f"cannot reach the cluster at {self.host}: {_reason(exc)}") from None
        except ValueError as exc:
            raise GpudrvError(f"the cluster at {self.host} sent a response that is not JSON: {exc}") from None


def connect(options: Options) -> Cluster:
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
    return Cluster(api, api.configuration.host)


def _check_files(paths: str | None) -> None:
    for path in (paths or "").split(os.pathsep):
        file = Path(path).expanduser()
        if not path or file.is_file():
            continue
        if file.is_dir():
            raise GpudrvError(f"kubeconfig {path}: is a directory, not a file")
        raise GpudrvError(f"kubeconfig {path}: {'not a regular file' if file.exists() else 'no such file'}")


def _node(document: dict[str, Any]) -> Node:
    metadata = document.get("metadata") or {}
    return Node(str(metadata.get("name", "")), dict(metadata.get("labels") or {}))


def _message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message", "")).strip() or "no message"
    except (TypeError, ValueError, AttributeError):
        return "no message"


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    # urllib3 wraps the socket error: keep the last, most specific part on one line.
    return text.rsplit(": ", 1)[-1].strip() if "Errno" in text or "refused" in text else text.splitlines()[0]
