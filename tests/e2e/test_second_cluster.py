"""The second and the spare control plane (conftest's second_kube, spare_kube) beside the main one: each is
a cluster of its own, their kubeconfigs merge and stay apart, and a spare stopped mid-test is gone at
once (connection refused, not a timeout)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import TEST_LABEL, FakeNodes, Kube, PlaneKube

CLUSTER_LABEL = "e2e.gpudrv.dev/cluster"


def test_a_node_of_the_second_cluster_is_not_in_the_main_one(
    kube: Kube, second_kube: PlaneKube, second_nodes: FakeNodes, unique: str
) -> None:
    name = second_nodes.add(f"{unique}-second", **{CLUSTER_LABEL: "second", "nvidia.com/gpu.present": "true"})

    node = second_kube.get("node", name)
    assert node["metadata"]["labels"][CLUSTER_LABEL] == "second"
    assert node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    listed = second_kube.get("nodes", "-l", second_nodes.selector)
    assert [item["metadata"]["name"] for item in listed["items"]] == [name]

    in_main = kube.run("get", "node", name, check=False)
    assert in_main.returncode != 0
    assert "NotFound" in in_main.stderr
    assert kube.get("nodes", "-l", f"{TEST_LABEL}={second_nodes.id}")["items"] == []


def test_merged_kubeconfigs_keep_the_clusters_apart(
    kube: Kube, second_kube: PlaneKube, second_nodes: FakeNodes, unique: str
) -> None:
    name = second_nodes.add(f"{unique}-merged", **{CLUSTER_LABEL: "second"})
    merged = os.pathsep.join(str(k.kubeconfig) for k in (kube, second_kube))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kube.kubectl_path), *args],
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": merged},
            timeout=60,
            check=False,
        )

    contexts = kubectl("config", "get-contexts", "-o", "name").stdout.split()
    assert {"gpudrv-test", "gpudrv-second"} <= set(contexts)
    found = kubectl("--context", "gpudrv-second", "get", "node", name, "-o", "json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["metadata"]["labels"][CLUSTER_LABEL] == "second"
    in_main = kubectl("--context", "gpudrv-test", "get", "node", name)
    assert in_main.returncode != 0
    assert "NotFound" in in_main.stderr


def _api_port(plane: Kube) -> int:
    server = plane.run("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    port = urlsplit(server).port
    assert port, f"no port in the kubeconfig's server {server!r}"
    return port


def test_a_stopped_spare_cluster_refuses_connections_at_once(
    kube: Kube, second_kube: PlaneKube, spare_kube: PlaneKube
) -> None:
    assert spare_kube.context == "gpudrv-spare"
    assert spare_kube.get("namespace", "default")["metadata"]["name"] == "default"
    port = _api_port(spare_kube)

    spare_kube.stop()

    started = time.monotonic()
    gone = spare_kube.run("get", "--raw", "/readyz", "--request-timeout=10s", check=False)
    took = time.monotonic() - started
    assert gone.returncode != 0
    assert "refused" in gone.stderr, gone.stderr  # "The connection to the server ... was refused"
    assert took < 5, f"kubectl took {took:.1f}s to fail against the stopped API server"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()

    # Only the spare went away.
    assert second_kube.run("get", "--raw", "/readyz").stdout == "ok"
    assert kube.run("get", "--raw", "/readyz").stdout == "ok"
