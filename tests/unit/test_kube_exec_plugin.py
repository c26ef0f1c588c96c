"""Exec credential plugins run under a timeout scoped to the client being built: the kubernetes
package itself is never patched, so two clients of one process (reconcile opens several) keep their own
--request-timeout, and a token refresh runs the plugin the same way as the first credentials."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import exec_provider, kube_config

from reconciler.adapters import kube
from reconciler.errors import GpudrvError
from tests.hostile.fake_api import kubeconfig_text

CREDENTIAL = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}


def plugin(tmp_path: Path, sleep: float = 0.0, expires: str | None = None) -> Path:
    """An exec plugin that counts its runs, sleeps, then prints a token (expiring at `expires`)."""
    status: dict[str, Any] = {"token": "from-plugin"}
    if expires:
        status["expirationTimestamp"] = expires
    script = tmp_path / "plugin"
    script.write_text(
        f"#!{sys.executable}\n"
        "import time, pathlib\n"
        f"runs = pathlib.Path({str(tmp_path / 'runs')!r})\n"
        "runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else '1')\n"
        f"time.sleep({sleep})\n"
        f"print({json.dumps({**CREDENTIAL, 'status': status})!r})\n"
    )
    script.chmod(0o755)
    return script


def kubeconfig(tmp_path: Path, command: Path, name: str = "kubeconfig") -> str:
    user = "{exec: {apiVersion: client.authentication.k8s.io/v1, command: '" + str(command) + "'}}"
    path = tmp_path / name
    path.write_text(kubeconfig_text("https://127.0.0.1:9", user))
    return str(path)


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def test_a_plugin_that_never_answers_is_killed_at_the_request_timeout(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, plugin(tmp_path, sleep=30))
    started = time.monotonic()
    with pytest.raises(GpudrvError) as caught:
        kube.connect(kube.Options(kubeconfig=config, request_timeout=1))
    assert time.monotonic() - started < 10
    assert (
        str(caught.value)
        == f"kubeconfig {config}: exec plugin {tmp_path / 'plugin'} did not answer within 1 s"
    )


def test_each_client_has_its_own_plugin_timeout(tmp_path: Path) -> None:
    """A client built with a 1 s bound, then one with the default (15 s): the second's plugin, which
    takes 2 s, is not cut at the first's bound (a process-wide patch would have kept the last one)."""
    config = kubeconfig(tmp_path, plugin(tmp_path, sleep=2))
    with pytest.raises(GpudrvError, match="did not answer within 1 s"):
        kube.connect(kube.Options(kubeconfig=config, request_timeout=1))
    connected = kube.connect(kube.Options(kubeconfig=config))
    assert connected.api_client.configuration.api_key["BearerToken"] == "Bearer from-plugin"


def test_the_kubernetes_package_is_not_patched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ours runs the plugin even with the package's own ExecProvider broken, and leaves it as it was."""

    class Broken:
        def __init__(self, *args: Any) -> None:
            raise AssertionError("the package's ExecProvider ran")

    monkeypatch.setattr(kube_config, "ExecProvider", Broken)
    connected = kube.connect(kube.Options(kubeconfig=kubeconfig(tmp_path, plugin(tmp_path))))
    assert connected.api_client.configuration.api_key["BearerToken"] == "Bearer from-plugin"
    assert kube_config.ExecProvider is Broken
    monkeypatch.undo()
    assert kube_config.ExecProvider is exec_provider.ExecProvider


def test_a_refresh_runs_the_plugin_again_under_the_same_bound(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, plugin(tmp_path, expires="2000-01-01T00:00:00Z"))
    connected = kube.connect(kube.Options(kubeconfig=config, request_timeout=3))
    configuration = connected.api_client.configuration
    assert runs(tmp_path) == 1
    configuration.refresh_api_key_hook(configuration)  # the client calls it before each request
    assert runs(tmp_path) == 2
    assert configuration.api_key["BearerToken"] == "Bearer from-plugin"
    (tmp_path / "plugin").write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    started = time.monotonic()
    configuration.refresh_api_key_hook(configuration)  # logs the failure (as the client does)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("not json", "did not print an ExecCredential (JSON)"),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1"}',
            "printed JSON without an ExecCredential status",
        ),
        ('{"apiVersion": "v9", "status": {"token": "t"}}', "answered apiVersion 'v9', not"),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1", "status": {}}',
            "missing token or clientCertificate",
        ),
    ],
)
def test_a_plugin_that_answers_nonsense_is_one_line(tmp_path: Path, output: str, message: str) -> None:
    script = tmp_path / "plugin"
    script.write_text(f"#!{sys.executable}\nprint({output!r})\n")
    script.chmod(0o755)
    with pytest.raises(GpudrvError, match=re.escape(message)) as caught:
        kube.connect(kube.Options(kubeconfig=kubeconfig(tmp_path, script)))
    assert "\n" not in str(caught.value)
