"""Connecting: configuration as kubectl finds it (--kubeconfig, KUBECONFIG, ~/.kube/config, else
in-cluster), the kubeconfig checked before the client reads it, and exec credential plugins under a
timeout. With _transport, the only module that imports kubernetes.

The kubeconfig is read as a regular file, parsed with yaml_load's limits and checked against
shapes.KUBECONFIG; any exception of the client's loader is one line naming the file. An exec plugin
gets EXEC_TIMEOUT (or --request-timeout), no stdin, and is killed past it: the client's loader is
given a provider of ours for this client alone (a subclass of its KubeConfigLoader), never a patch
of the kubernetes package, so two clients of one process keep their own timeouts.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.adapters.files import positions, yaml_load
from reconciler.adapters.kube import shapes
from reconciler.adapters.kube._errors import NO_CLUSTER, NoCluster, first_line
from reconciler.adapters.kube._gateway import Gateway
from reconciler.adapters.kube._transport import TIMEOUT, USER_AGENT, BoundedPool, Timeouts, new_client
from reconciler.core.base.flags import Kind, flag
from reconciler.errors import GpudrvError

EXEC_TIMEOUT = 15.0  # an exec credential plugin that has not answered by then never will


@dataclass(frozen=True)
class Options:
    """How a live command reaches its cluster: the one connection type. Its fields carry their flags
    (core/base/flags.py): the parsers, and the child command line `reconcile --apply` starts, come from
    here."""

    kubeconfig: str | None = flag(
        "--kubeconfig",
        Kind.TEXT,
        None,
        what="path",
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    context: str | None = flag(
        "--context", Kind.TEXT, None, what="context name", help="kubeconfig context to use"
    )
    request_timeout: float | None = flag(  # seconds; 0 for none; None for the defaults
        "--request-timeout", Kind.SECONDS, None, metavar="D",
        help="give up on a single API request after D, like kubectl (e.g. 10s; 0: never; "
        "default: connect 5s, each read 15s, one answer 60s)",
    )  # fmt: skip


def exec_timeout(timeouts: Timeouts) -> float:
    """An exec credential plugin's time: --request-timeout when given, else EXEC_TIMEOUT."""
    return timeouts.read if timeouts.read is not None and timeouts != TIMEOUT else EXEC_TIMEOUT


# Every kubernetes module the gateway imports (here and in _transport); urllib3 comes with them.
CLIENT_MODULES = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.exceptions",
    "kubernetes.config",
    "kubernetes.config.config_exception",
    "kubernetes.config.exec_provider",
    "kubernetes.config.kube_config",
)


def preload() -> None:
    """Import the kubernetes client's modules now, on this thread. Several threads that import them
    for the first time at once (clusters read side by side) can meet inside the package's circular
    imports: Python refuses that with a deadlock error or a partly initialized module."""
    import importlib

    for module in CLIENT_MODULES:
        importlib.import_module(module)


def connect(options: Options) -> Gateway:
    """A gateway with its own timeouts (from --request-timeout): reconcile opens several."""
    timeouts = Timeouts.of(options.request_timeout)
    paths = _kubeconfig_files(options)
    if paths:
        for path in paths:
            _check_kubeconfig(path)
        load = partial(_from_files, paths, options.context, exec_timeout(timeouts))
        api = _client(f"kubeconfig {os.pathsep.join(paths)}", load)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        api = _client("in-cluster configuration", _in_cluster)
    else:
        raise NoCluster(f"{NO_CLUSTER}: pass --kubeconfig or --context, or set KUBECONFIG")
    return Gateway(_bounded(api, timeouts), str(api.configuration.host), timeouts)


def _bounded(api: Any, timeouts: Timeouts) -> Any:
    api.rest_client.pool_manager = BoundedPool(api.rest_client.pool_manager, timeouts)
    api.user_agent = USER_AGENT  # the API server's audit log and metrics name gpudrv
    return api


def streaming(gateway: Gateway) -> Gateway:
    """A gateway for watches: a client of its own on the same configuration, whose answers are read
    as they arrive. (A pool that reads each answer whole, with a total time limit, suits every other
    request; a watch's answer lasts minutes and each line of it is news.) Its pool is bounded too: a
    watch is never retried by urllib3, so a silent one ends at its read timeout."""
    api = _bounded(new_client(gateway.api_client.configuration), gateway.timeouts)
    return Gateway(api, gateway.host, gateway.timeouts)


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


def _from_files(paths: list[str], context: str | None, timeout: float) -> Any:
    """What the client's new_client_from_config does (persist_config=False: gpudrv never writes the
    user's kubeconfig, as the client would refreshing tokens), with our loader."""
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    loading: Any = kube_config  # the client's loader module is untyped
    merged = loading.KubeConfigMerger(os.pathsep.join(paths))
    if merged.config is None:
        raise ConfigException("Invalid kube-config file. No configuration found.")
    loader = _timed_loader(timeout)(config_dict=merged.config, active_context=context, config_base_path=None)
    configuration = type.__call__(Configuration)  # as the client makes one: not a copy of the default
    loader.load_and_set(configuration)
    return ApiClient(configuration=configuration)


def _in_cluster() -> Any:
    from kubernetes import client, config

    loading: Any = config
    loading.load_incluster_config()
    return client.ApiClient()


def _client(source: str, load: Callable[[], Any]) -> Any:
    """The client the loader makes; whatever it raises (ConfigException, or anything at all from a
    file it did not expect), or logs as an error (a failed exec plugin), is one line naming `source`."""
    logged = _ErrorLog()
    root = logging.getLogger()
    root.addHandler(logged)
    try:
        api = load()
    except GpudrvError:
        raise
    except Exception as exc:  # the edge: a hostile file must not become a traceback
        raise GpudrvError(f"{source}: {first_line(str(exc)) or type(exc).__name__}") from None
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
        self.messages.append(first_line(record.getMessage()))


def _timed_loader(timeout: float) -> type:
    """The client's KubeConfigLoader, running exec plugins through TimedExecProvider with `timeout`,
    for the first credentials and for every refresh of this client's (its refresh hook calls back)."""
    from kubernetes.config import kube_config

    loading: Any = kube_config  # untyped: its names are Any here
    provider = _timed_exec_provider()

    class TimedLoader(loading.KubeConfigLoader):  # type: ignore[misc]
        def _load_from_exec_plugin(self) -> bool | None:
            # The client's own method (kube_config.py), with our provider in place of its ExecProvider.
            if "exec" not in self._user:
                return None
            try:
                base_path = self._get_base_path(self._cluster.path)
                status = provider(self._user["exec"], base_path, self._cluster, timeout).run()
                if "token" in status:
                    self.token = f"Bearer {status['token']}"
                elif "clientCertificateData" in status:
                    if "clientKeyData" not in status:
                        logging.error("exec: missing clientKeyData field in plugin output")
                        return None
                    for attribute, key in (
                        ("cert_file", "clientCertificateData"),
                        ("key_file", "clientKeyData"),
                    ):
                        data = loading.FileOrData(
                            status,
                            None,
                            data_key_name=key,
                            file_base_path=base_path,
                            base64_file_content=False,
                            temp_file_path=self._temp_file_path,
                        )
                        setattr(self, attribute, data.as_file())
                else:
                    logging.error("exec: missing token or clientCertificateData field in plugin output")
                    return None
                if "expirationTimestamp" in status:
                    self.expiry = loading.parse_rfc3339(status["expirationTimestamp"])
                return True
            except Exception as exc:  # as the client does: logged (and _ErrorLog makes it one line)
                logging.error(str(exc))
                return None

    return TimedLoader


def _timed_exec_provider() -> type:
    """The client's ExecProvider, with the plugin given `timeout` (then killed) and no stdin."""
    from kubernetes.config import exec_provider
    from kubernetes.config.config_exception import ConfigException

    providing: Any = exec_provider

    class TimedExecProvider(providing.ExecProvider):  # type: ignore[misc]
        def __init__(self, exec_config: Any, cwd: Any, cluster: Any, timeout: float) -> None:
            super().__init__(exec_config, cwd, cluster)
            self.timeout = timeout

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
                    timeout=self.timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise ConfigException(
                    f"exec plugin {command} did not answer within {self.timeout:g} s"
                ) from None
            except OSError as exc:
                raise ConfigException(f"exec plugin {command}: {exc.strerror or exc}") from None
            if process.returncode != 0:
                said = first_line(process.stderr.decode("utf-8", "replace"))
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
