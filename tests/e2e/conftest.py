"""The end-to-end tier: one real control plane per run (scripts/cluster), fresh namespace and nodes per test.

Multi-cluster tests get more: `second_kube`, a second control plane for the whole session, and
`spare_kube`, a third one per test that the test may stop. Both are minimal (etcd and kube-apiserver
only: no kwok, nodes are plain API objects) with state of their own under the session's tmp dir.

Nothing here skips: if a control plane cannot be built or started, every e2e test that needs it fails
with the reason, so CI fails loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.conftest import REPO, run_gpudrv

CLUSTER = REPO / "scripts" / "cluster"
# The tier's cluster writes an audit log: tests/e2e/test_request_counts.py counts gpudrv's requests there.
CLUSTER_ENV = {"GPUDRV_CLUSTER_AUDIT": "1"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)


def _cluster(
    verb: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """scripts/cluster `verb` with `env` over the environment (default: the main cluster's CLUSTER_ENV)."""
    env = CLUSTER_ENV if env is None else env
    result = subprocess.run(
        [str(CLUSTER), verb], capture_output=True, text=True, check=False, env={**os.environ, **env}
    )
    if check and result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        state = env.get("GPUDRV_CLUSTER_STATE")
        what = f"GPUDRV_CLUSTER_STATE={state} scripts/cluster {verb}" if state else f"scripts/cluster {verb}"
        pytest.fail(f"{what} failed (exit {result.returncode}):\n{tail}", pytrace=False)
    return result


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Request:
    """One request as the API server logged it: verb (list, get, ...), path, sorted query, status."""

    verb: str
    path: str
    query: tuple[tuple[str, str], ...]
    status: int

    @classmethod
    def of(cls, event: dict[str, Any]) -> Request:
        url = urlsplit(event["requestURI"])
        query = tuple(sorted(parse_qsl(url.query, keep_blank_values=True)))
        return cls(event["verb"], url.path, query, int((event.get("responseStatus") or {}).get("code", 0)))

    def __str__(self) -> str:
        query = "&".join(f"{key}={value}" for key, value in self.query)
        return f"{self.verb} {self.path}{'?' + query if query else ''}"


@dataclass
class Kube:
    """kubectl (the one built with the control plane) against the test cluster."""

    kubeconfig: Path
    kubectl_path: Path

    @property
    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.kubectl_path), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=180,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def apply(self, manifest: str, *args: str) -> None:
        self.run("apply", "-f", "-", *args, stdin=manifest)

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", *args, "-o", "json").stdout)

    def gpudrv(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return run_gpudrv(*args, cwd=cwd, env=self.env)

    @property
    def audit_log(self) -> Path:
        return self.kubeconfig.parent / "audit.log"

    def requests_of(self, action: Callable[[], object], agent: str = "gpudrv/") -> list[Request]:
        """The API requests that `action` made, from the API server's audit log: those whose user
        agent starts with `agent`, in order. A request of the test's own (a sentinel) marks the end:
        once it is logged, every request made before it is too."""
        start = self.audit_log.stat().st_size
        action()
        sentinel = f"/version?gpudrv-e2e-sentinel={uuid.uuid4().hex}"
        self.run("get", "--raw", sentinel)
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while not any(sentinel in line for line in lines):
            if time.monotonic() > deadline:
                raise AssertionError(f"the audit log {self.audit_log} never logged {sentinel}")
            time.sleep(0.1)
            with self.audit_log.open("rb") as log:
                log.seek(start)
                lines = log.read().decode().splitlines()
        events = [json.loads(line) for line in lines]
        return [
            Request.of(event)
            for event in events
            if event.get("stage") == "ResponseComplete" and str(event.get("userAgent", "")).startswith(agent)
        ]

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.25)


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    was_running = _cluster("status", check=False).returncode == 0
    kubeconfig = Path(_last_line(_cluster("up")))
    bin_dir = Path(_last_line(_cluster("build")))
    yield Kube(kubeconfig, bin_dir / "kubectl")
    if not was_running and os.environ.get("GPUDRV_KEEP_CLUSTER") != "1":
        _cluster("down", check=False)


MINIMAL_COMPONENTS = "etcd,kube-apiserver"


@dataclass
class PlaneKube(Kube):
    """A Kube for a minimal control plane of its own: etcd and kube-apiserver (no controller-manager,
    scheduler or kwok), with its state (ports, PKI, etcd data, pid files) in `root`/state and its
    kubeconfig context and cluster named `context`. The kubeconfig is a copy in `root`, outside the state
    dir, so after stop() it still names the stopped API server: a client gets connection refused, as
    from a cluster that went away."""

    root: Path = field(kw_only=True)
    context: str = field(kw_only=True)

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def cluster_env(self) -> dict[str, str]:
        """scripts/cluster's environment for this plane (the main cluster's options reset)."""
        return {
            "GPUDRV_CLUSTER_STATE": str(self.state),
            "GPUDRV_CLUSTER_COMPONENTS": MINIMAL_COMPONENTS,
            "GPUDRV_CLUSTER_CONTEXT": self.context,
            "GPUDRV_CLUSTER_AUDIT": "",
            "GPUDRV_CLUSTER_CONTROLLERS": "",
        }

    @classmethod
    def start(cls, root: Path, context: str) -> PlaneKube:
        """`scripts/cluster up` for a new plane in `root` (an empty directory); fails the test with
        the script's stderr if it does not come up, leaving no process behind."""
        bin_dir = Path(_last_line(_cluster("build")))
        plane = cls(root / "kubeconfig", bin_dir / "kubectl", root=root, context=context)
        try:
            started = Path(_last_line(_cluster("up", env=plane.cluster_env)))
        except BaseException:
            _cluster("down", check=False, env=plane.cluster_env)
            raise
        shutil.copyfile(started, plane.kubeconfig)
        plane.kubeconfig.chmod(0o600)
        return plane

    def stop(self) -> None:
        """`scripts/cluster down` for this plane only: its API server is gone when this returns.
        Stopping a stopped plane does nothing."""
        _cluster("down", env=self.cluster_env)


def _plane(root: Path, context: str) -> Iterator[PlaneKube]:
    plane = PlaneKube.start(root, context)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def second_kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaneKube]:
    """A second control plane beside `kube` for the whole session (context gpudrv-second), stopped at
    its end. Its nodes: `second_nodes`."""
    yield from _plane(tmp_path_factory.mktemp("second-cluster"), "gpudrv-second")


@pytest.fixture
def spare_kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaneKube]:
    """A third control plane for this test only (context gpudrv-spare): `spare_kube.stop()` takes it
    away mid-test; it is stopped after the test in any case."""
    yield from _plane(tmp_path_factory.mktemp("spare-cluster"), "gpudrv-spare")


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)


GPU_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.driver.rev": "07",
    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-119-generic",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}


def node_manifest(name: str, labels: dict[str, str]) -> str:
    document = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", **labels},
        },
    }
    return json.dumps(document)


TEST_LABEL = "e2e.gpudrv.dev/nodes"


@dataclass
class FakeNodes:
    """Creates kwok fake nodes, waits until they are Ready, and deletes them after the test. Each node
    carries TEST_LABEL=<this test's id>: `selector` scopes a command to them (`-l`), whatever other
    GPU nodes the cluster has (a developer's own experiments, another test's). With wait_ready=False
    (a cluster without kwok, such as `second_kube`) the nodes are plain API objects, never Ready, and
    `add` returns as soon as the API server has stored them."""

    kube: Kube
    created: list[str] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    wait_ready: bool = field(default=True, kw_only=True)

    @property
    def selector(self) -> str:
        return f"{TEST_LABEL}={self.id}"

    def add(self, name: str, **labels: str) -> str:
        self.kube.apply(node_manifest(name, {TEST_LABEL: self.id, **labels}))
        self.created.append(name)
        if self.wait_ready:
            self.kube.wait_for(f"node {name} Ready", lambda: self.ready(name))
        return name

    def add_gpu(self, name: str, changes: dict[str, str | None] | None = None) -> str:
        """A GPU node with the lab's labels, each change applied (None drops the label)."""
        labels: dict[str, str | None] = {**GPU_LABELS, **(changes or {})}
        return self.add(name, **{key: value for key, value in labels.items() if value is not None})

    def ready(self, name: str) -> bool:
        conditions = self.kube.get("node", name)["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def delete_all(self) -> None:
        if self.created:
            self.kube.run("delete", "node", *self.created, "--ignore-not-found", "--wait=true", check=False)


@pytest.fixture
def nodes(kube: Kube) -> Iterator[FakeNodes]:
    fake = FakeNodes(kube)
    yield fake
    fake.delete_all()


@pytest.fixture
def second_nodes(second_kube: PlaneKube) -> Iterator[FakeNodes]:
    """FakeNodes in the second cluster: plain Node objects (no kwok there), deleted after the test."""
    fake = FakeNodes(second_kube, wait_ready=False)
    yield fake
    fake.delete_all()


@pytest.fixture
def unique() -> str:
    """A short prefix that keeps this test's node names its own."""
    return f"t{uuid.uuid4().hex[:6]}"


# The real GPU Operator (scripts/operator) for the modules that ask for it; imported last because
# tests/e2e/gpu_operator.py builds on the helpers above.
from tests.e2e.gpu_operator import gpu_operator, operator_nodes  # noqa: E402, F401

# The real Node Feature Discovery (scripts/nfd) for tests/e2e/test_nfd_live.py.
from tests.e2e.nfd import nfd, nfd_bin, nfd_module  # noqa: E402, F401

# The reconciler's harness (tests/e2e/reconcile/conftest.py) for tests/e2e/test_nfd_live.py too: its
# loop reads the next-kernel label NFD publishes.
from tests.e2e.reconcile.conftest import deployed, loops, remote  # noqa: E402, F401
