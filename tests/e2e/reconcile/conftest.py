"""gpudrv reconcile on the real control plane: deploy/'s roles under a ServiceAccount token, a fleet
repository as a bare git remote, and the loop as a process whose /metrics the tests read."""

from __future__ import annotations

import copy
import io
import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from tests.conftest import REPO, gpudrv_command, gpudrv_env
from tests.e2e.conftest import GPU_LABELS, FakeNodes, Kube, node_manifest

DEPLOY = REPO / "deploy"
NAMESPACE = "gpudrv-system"  # as deploy/ names it
SERVICE_ACCOUNT = "gpudrv"
LEASE = "gpudrv-reconcile"
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# Short timings, so a test sees a takeover in seconds; the defaults are 15s/10s/2s.
FAST = ["--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "1s"]
UNKNOWN_KERNEL = "6.1.0-999-generic"  # in no matrix row


# --- deploy/, rendered by kubectl kustomize and applied under names of the test's own ---------------


def render(kube: Kube, directory: Path) -> list[dict[str, Any]]:
    text = kube.run("kustomize", str(directory)).stdout
    return [dict(doc) for doc in YAML(typ="safe", pure=True).load_all(io.StringIO(text)) if doc]


def isolate(documents: list[dict[str, Any]], namespace: str, suffix: str) -> list[dict[str, Any]]:
    """deploy/'s objects in `namespace` instead of gpudrv-system, cluster-wide and default-namespace
    names with `-suffix`, so tests never share a role. Rules, verbs and resources are untouched."""
    renamed_roles: set[tuple[str, str | None]] = set()  # (kind, namespace) of roles renamed
    result = []
    for original in documents:
        doc = copy.deepcopy(original)
        kind, metadata = doc["kind"], doc["metadata"]
        if kind == "Namespace":
            metadata["name"] = namespace
        elif metadata.get("namespace") == NAMESPACE:
            metadata["namespace"] = namespace
        if kind in ("ClusterRole", "ClusterRoleBinding") or metadata.get("namespace") == "default":
            metadata["name"] += f"-{suffix}"
            if kind in ("ClusterRole", "Role"):
                renamed_roles.add((kind, metadata.get("namespace")))
        result.append(doc)
    for doc in result:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = doc["roleRef"]
        if ref["kind"] == "ClusterRole" or (ref["kind"], doc["metadata"].get("namespace")) in renamed_roles:
            ref["name"] += f"-{suffix}"
        for subject in doc.get("subjects") or []:
            if subject.get("namespace") == NAMESPACE:
                subject["namespace"] = namespace
    return result


def as_list(documents: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})


@dataclass
class Deployed:
    """deploy/'s RBAC applied for real, and a kubeconfig with its ServiceAccount's token."""

    kube: Kube
    namespace: str
    suffix: str
    documents: list[dict[str, Any]]
    kubeconfig: Path

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{SERVICE_ACCOUNT}"

    def objects(self, *kinds: str) -> list[dict[str, Any]]:
        return [doc for doc in self.documents if doc["kind"] in kinds]

    def remove(self) -> None:
        for doc in self.objects("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            namespace = doc["metadata"].get("namespace")
            self.kube.run(
                "delete",
                doc["kind"].lower(),
                doc["metadata"]["name"],
                *(["-n", namespace] if namespace else []),
                "--ignore-not-found",
                check=False,
            )
        self.kube.run(
            "delete", "namespace", self.namespace, "--wait=false", "--ignore-not-found", check=False
        )


def deploy(kube: Kube, directory: Path, folder: Path) -> Deployed:
    """Render `directory` with kubectl kustomize and apply its namespace, service account and roles
    (renamed by `isolate`); then a kubeconfig from a TokenRequest for the service account."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"gpudrv-e2e-{suffix}"
    documents = isolate(render(kube, directory), namespace, suffix)
    rbac = [doc for doc in documents if doc["kind"] in RBAC_KINDS]
    kube.apply(as_list([doc for doc in rbac if doc["kind"] == "Namespace"]))
    kube.apply(as_list([doc for doc in rbac if doc["kind"] != "Namespace"]))
    kubeconfig = token_kubeconfig(kube, namespace, folder / f"sa-{suffix}.kubeconfig")
    return Deployed(kube, namespace, suffix, documents, kubeconfig)


def token_kubeconfig(kube: Kube, namespace: str, path: Path) -> Path:
    """`kubectl create token` is a TokenRequest: a bound token, as the kubelet mounts in a pod."""
    token = kube.run("create", "token", SERVICE_ACCOUNT, "-n", namespace, "--duration=2h").stdout.strip()
    admin = YAML(typ="safe", pure=True).load(kube.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": SERVICE_ACCOUNT}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@pytest.fixture
def deployed(kube: Kube, tmp_path: Path) -> Iterator[Deployed]:
    """deploy/ (the base: audit only) for this test."""
    found = deploy(kube, DEPLOY, tmp_path)
    yield found
    found.remove()


# --- the fleet repository: a bare remote the loop pulls from ---------------------------------------


@dataclass
class Remote:
    """A bare repository with the fleet's matrix, and a working clone to push changes from."""

    bare: Path
    work: Path

    @classmethod
    def create(cls, folder: Path) -> Remote:
        work, bare = folder / "fleet-work", folder / "fleet.git"
        shutil.copytree(REPO / "matrix", work / "matrix")
        remote = cls(bare, work)
        remote.git("init", "-q", "-b", "main")
        remote.commit("the fleet")
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        remote.git("push", "-q", str(bare), "main")
        return remote

    def git(self, *args: str) -> str:
        identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
        result = subprocess.run(
            ["git", *identity, *args], cwd=self.work, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    @property
    def matrix(self) -> Path:
        """The working clone's support matrix."""
        return self.work / "matrix/support-matrix.csv"

    def push(self, message: str, branch: str = "main") -> str:
        """Commit the working clone's changes, push to `branch`: the new commit."""
        commit = self.commit(message)
        self.git("push", "-q", str(self.bare), f"HEAD:{branch}")
        return commit

    def push_row(self, row: str, branch: str = "main") -> str:
        """Append a matrix row, commit, push to `branch`: the new commit."""
        with self.matrix.open("a") as handle:
            handle.write(row + "\n")
        return self.push(f"matrix: {row}", branch)


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return Remote.create(tmp_path)


# --- the loop ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SYNC_TOKEN = "e2e-sync-token"  # every loop's POST /sync bearer token (--sync-token-file)
SYNC_SECRET = "e2e-webhook-secret"  # and its webhook secret (--sync-secret-file)


@dataclass
class Loop:
    """One `gpudrv reconcile` process and its endpoints."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    token: str = SYNC_TOKEN

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def post(self, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> int:
        """POST with the loop's bearer token, unless `headers` say otherwise; the status."""
        sent = {"Authorization": f"Bearer {self.token}"} if headers is None else headers
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body, headers=sent, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    def samples(self) -> Samples:
        status, text = self.get("/metrics")
        if status != 200:
            return {}
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples().get((name, tuple(sorted(labels.items()))))

    def series(self, name: str, **labels: str) -> list[dict[str, str]]:
        """The label sets of `name`'s samples that carry all of `labels`."""
        return [
            dict(found)
            for (sample, found), _value in self.samples().items()
            if sample == name and set(labels.items()) <= set(found)
        ]

    def leading(self) -> bool:
        return self.value("gpudrv_leader") == 1

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout)


@dataclass
class Loops:
    kube: Kube
    folder: Path
    started: list[Loop] = field(default_factory=list)

    def start(self, name: str, *args: str, kubeconfig: Path, remote: Remote | None = None) -> Loop:
        port = free_port()
        log = self.folder / f"{name}.log"
        repo = ["--repo", str(remote.bare)] if remote else []
        (self.folder / "sync-token").write_text(SYNC_TOKEN + "\n")
        (self.folder / "sync-secret").write_text(SYNC_SECRET + "\n")
        command = [
            *gpudrv_command(),
            "reconcile",
            *repo,
            "--kubeconfig",
            str(kubeconfig),
            "--listen",
            f"127.0.0.1:{port}",
            "--workdir",
            str(self.folder / f"work-{name}"),
            "--identity",
            name,
            "--interval",
            "1s",
            "--sync-token-file",
            str(self.folder / "sync-token"),
            "--sync-secret-file",
            str(self.folder / "sync-secret"),
            *args,
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=gpudrv_env(), stdout=out, stderr=subprocess.STDOUT)
        loop = Loop(name, process, port, log)
        self.started.append(loop)
        return loop

    def stop_all(self) -> None:
        for loop in self.started:
            if loop.process.poll() is None:
                loop.process.kill()
                loop.process.wait(10)


@pytest.fixture
def loops(kube: Kube, tmp_path: Path) -> Iterator[Loops]:
    running = Loops(kube, tmp_path)
    yield running
    running.stop_all()


def wait_until(
    what: str, predicate: Callable[[], Any], timeout: float, loops: list[Loop] | None = None
) -> float:
    """Seconds it took; on timeout, fails with the loops' logs."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            logs = "\n".join(f"--- {loop.name}\n{loop.output()[-4000:]}" for loop in loops or [])
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{logs}")
        time.sleep(0.05)
    return time.monotonic() - started


def add_node_now(nodes: FakeNodes, name: str, **changes: str) -> None:
    """A GPU node created at once (not waiting for kwok to make it Ready): the clock starts here."""
    nodes.kube.apply(node_manifest(name, {**GPU_LABELS, **changes}))
    nodes.created.append(name)


def node_events(kube: Kube, node: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.kind=Node,involvedObject.name={node},reason={reason}"
    items: list[dict[str, Any]] = kube.get("events", "-n", "default", "--field-selector", selector)["items"]
    return items


def lease_holder(kube: Kube, namespace: str) -> str | None:
    found = kube.run("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    holder: str | None = json.loads(found.stdout)["spec"].get("holderIdentity")
    return holder
