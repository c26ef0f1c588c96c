"""`gpudrv reconcile` as a process against a fake API server and a local git remote: the wiring of the
loop's ports (git-sync, the lease, the node list, Node events, /metrics and the probes, SIGTERM)
without a cluster. The decisions themselves are tests/unit/test_reconcile_loop.py's."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import git, gpudrv_command, gpudrv_env
from tests.hostile.fake_api import Answer, FakeApi, Request, serving

HEADER = "driver_branch,kernel,os_tag\n"
ROW = "550,5.15.0-119-generic,ubuntu22.04\n"
LACKED_ROW = "550,6.1.0-9-generic,ubuntu22.04\n"
LACKED = "550-6.1.0-9-generic-ubuntu22.04"
LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.driver.rev": "07",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
NEXT_KERNEL = "gpudrv.dev/kernel-version.next"
NOT_FOUND = Answer(404, b'{"kind": "Status", "code": 404, "message": "not found"}')


def node(name: str, kernel: str, **more: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": "5", "labels": {**LABELS, KERNEL: kernel, **more}}}


class Cluster:
    """The API server's side: two GPU nodes (b's image is not in the first matrix, nor the image of the
    kernel a boots next), a Lease, Events."""

    def __init__(self) -> None:
        self.lease: dict[str, object] | None = None
        self.events: list[dict[str, object]] = []

    def __call__(self, request: Request) -> Answer:
        if request.path.endswith("/nodes") and request.method == "GET":
            return self._nodes(request)
        if "/leases" in request.path:
            return self._lease(request)
        if "/events" in request.path:
            return self._event(request)
        if request.path.endswith(("clusterpolicies", "nvidiadrivers")):
            return Answer(body=b'{"items": [], "metadata": {}}')
        if "selfsubject" in request.path:  # access reviews: allowed, as whoever
            return Answer(201, b'{"status": {"allowed": true, "userInfo": {"username": "tester"}}}')
        return NOT_FOUND

    def _nodes(self, request: Request) -> Answer:
        if "watch" in request.query:
            return Answer(hang=True)
        items = [
            node("a", "5.15.0-119-generic", **{NEXT_KERNEL: "6.1.0-9-generic"}),
            node("b", "6.1.0-9-generic"),
        ]
        listed = {"kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "10"}, "items": items}
        return Answer(body=json.dumps(listed).encode())

    def _event(self, request: Request) -> Answer:
        if request.method == "GET":
            return NOT_FOUND
        self.events.append(json.loads(request.body))
        return Answer(201, request.body)

    def _lease(self, request: Request) -> Answer:
        if request.method == "GET":
            return NOT_FOUND if self.lease is None else Answer(body=json.dumps(self.lease).encode())
        lease = json.loads(request.body)
        lease.setdefault("metadata", {})["resourceVersion"] = str(time.monotonic_ns())
        self.lease = lease
        return Answer(201 if request.method == "POST" else 200, json.dumps(lease).encode())

    def reasons(self, node: str) -> list[tuple[str, str]]:
        return [
            (str(event["reason"]), str(event["type"]))
            for event in self.events
            if isinstance(event.get("involvedObject"), dict) and event["involvedObject"].get("name") == node
        ]


class Process:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process, self.port, self.log = process, port, log

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()
        except OSError:
            return 0, ""

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        status, text = self.get("/metrics")
        if status != 200:
            return {}
        return {
            tuple(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        }

    def until(self, what: str, check: Callable[[], bool], seconds: float = 20) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline or self.process.poll() is not None:
                pytest.fail(f"{what}: not within {seconds}s\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def commit(src: Path, bare: Path, matrix: str, message: str) -> None:
    (src / "matrix").mkdir(exist_ok=True)
    (src / "matrix/support-matrix.csv").write_text(matrix)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", message)
    git(src, "push", "-q", str(bare), "main")


def fleet_remote(tmp_path: Path) -> tuple[Path, Path]:
    """A working clone and the bare remote the loop follows, holding the fleet's first commit."""
    src, bare = tmp_path / "src", tmp_path / "bare.git"
    src.mkdir()
    git(src, "init", "-q")
    git(tmp_path, "init", "-q", "--bare", str(bare))
    commit(src, bare, HEADER + ROW, "the fleet")
    return src, bare


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Process, Cluster, Path, Path]]:
    src, bare = fleet_remote(tmp_path)
    cluster = Cluster()
    api: FakeApi
    with serving(cluster) as api:
        port, log, kubeconfig = free_port(), tmp_path / "reconcile.log", api.kubeconfig(tmp_path / "kc")
        command = [
            *gpudrv_command(), "reconcile", "--repo", str(bare), "--kubeconfig", str(kubeconfig),
            "--listen", f"127.0.0.1:{port}", "--workdir", str(tmp_path / "work"), "--identity", "me",
            "--interval", "1s", "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "1s",
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=gpudrv_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            yield Process(process, port, log), cluster, src, bare
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def test_the_loop_reports_a_missing_image_clears_it_refuses_a_broken_commit_and_stops_on_sigterm(
    running: tuple[Process, Cluster, Path, Path],
) -> None:
    loop, cluster, src, bare = running
    missing = (("node", "b"), ("tag", LACKED))
    loop.until(
        "the missing image's series", lambda: loop.series("gpudrv_node_image_missing").get(missing) == 1
    )
    assert loop.series("gpudrv_leader") == {(): 1} and loop.series("gpudrv_gpu_nodes") == {(): 2}
    status, text = loop.get("/readyz")
    assert status == 200 and text.startswith("ok: leading, commit ")
    loop.until("its event", lambda: cluster.reasons("b") == [("DriverImageMissing", "Warning")])
    upcoming = (("kernel", "6.1.0-9-generic"), ("node", "a"), ("tag", LACKED))
    assert loop.series("gpudrv_node_next_kernel_image_missing") == {upcoming: 1}
    assert cluster.reasons("a") == []
    commit(src, bare, HEADER + ROW + LACKED_ROW, "b's image")
    loop.until("the series gone", lambda: loop.series("gpudrv_node_image_missing") == {})
    assert loop.series("gpudrv_node_next_kernel_image_missing") == {}
    loop.until("the news", lambda: cluster.reasons("b")[-1:] == [("DriverImageAvailable", "Normal")])
    in_force = loop.series("gpudrv_commit_info")
    commit(src, bare, "garbage\n", "a broken matrix")
    loop.until("the refusal", lambda: loop.series("gpudrv_commit_rejected_total") == {(): 1})
    assert loop.series("gpudrv_commit_info") == in_force and loop.get("/healthz")[0] == 200
    loop.process.send_signal(signal.SIGTERM)
    assert loop.process.wait(30) == 0
    output = loop.log.read_text()
    assert "SIGTERM: stopping after this step" in output and "released the lease" in output
    assert output.rstrip().endswith("gpudrv.reconcile: stopped")
    assert "Traceback" not in output


APF_429 = Answer(
    429,
    json.dumps(
        {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "Too many requests"}
    ).encode(),
    {"Content-Type": "application/json", "Retry-After": "1"},
)
BUSY_SECONDS = 60.0  # issue 30: a server that throttles every request for a minute


class Busy(Cluster):
    """The same cluster, until `busy()`: then every request is API Priority and Fairness's 429 with
    Retry-After 1, for BUSY_SECONDS."""

    def __init__(self) -> None:
        super().__init__()
        self.until = 0.0
        self.refused = 0

    def busy(self) -> None:
        self.until = time.monotonic() + BUSY_SECONDS

    def __call__(self, request: Request) -> Answer:
        if time.monotonic() < self.until:
            self.refused += 1
            return APF_429
        return super().__call__(request)


def test_a_minute_of_throttling_keeps_the_last_good_state_and_never_spins(tmp_path: Path) -> None:
    bare = fleet_remote(tmp_path)[1]
    cluster = Busy()
    with serving(cluster) as api:
        port, log, kubeconfig = free_port(), tmp_path / "reconcile.log", api.kubeconfig(tmp_path / "kc")
        command = [
            *gpudrv_command(), "reconcile", "--repo", str(bare), "--kubeconfig", str(kubeconfig),
            "--listen", f"127.0.0.1:{port}", "--workdir", str(tmp_path / "work"), "--no-leader-election",
            "--interval", "1s", "--resync", "5s",  # a full audit, and a contract read, every 5 s
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=gpudrv_env(), stdout=out, stderr=subprocess.STDOUT)
        loop = Process(process, port, log)
        try:
            missing = (("node", "b"), ("tag", LACKED))
            loop.until("the audit", lambda: loop.series("gpudrv_node_image_missing").get(missing) == 1)
            before = len(api.requests)
            cluster.busy()
            health = []
            while time.monotonic() < cluster.until:
                health.append(loop.get("/healthz")[0])
                assert loop.series("gpudrv_node_image_missing").get(missing) == 1  # the last good state
                time.sleep(1)
            assert process.poll() is None and set(health) == {200}, health
            sent = len(api.requests) - before
            waits = sum(loop.series("gpudrv_api_server_waits_total").values())
            errors = loop.series("gpudrv_audit_errors_total").get((), 0)
            # Never spins: each request waits the second it is asked to, so a minute holds few of them.
            assert 10 <= sent <= 150 and waits >= 10 and errors >= 1, (sent, waits, errors)
            output = log.read_text()
            assert output.count("waiting for the cluster: the API server asked to wait 1 s (429)") == waits
            assert "Traceback" not in output and "PDB" not in output
            loop.until("a full audit again", lambda: loop.get("/readyz")[0] == 200, 30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    print(f"\na minute of 429s: {sent} requests, {waits:.0f} waits, {errors:.0f} audits that could not run")


def test_once_posts_events_for_the_running_kernel_only_and_prints_the_next_kernels_finding(
    tmp_path: Path,
) -> None:
    bare = fleet_remote(tmp_path)[1]
    cluster = Cluster()
    with serving(cluster) as api:
        command = [
            *gpudrv_command(), "reconcile", "--once", "--repo", str(bare),
            "--kubeconfig", str(api.kubeconfig(tmp_path / "kc")), "--workdir", str(tmp_path / "work"),
        ]  # fmt: skip
        proc = subprocess.run(
            command, env=gpudrv_env(), capture_output=True, text=True, timeout=120, check=False
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"a NEXT-MISSING {LACKED} (kernel 6.1.0-9-generic, at its next reboot)" in proc.stdout
    assert f"b MISSING {LACKED}" in proc.stdout
    assert cluster.reasons("b") == [("DriverImageMissing", "Warning")]
    assert cluster.reasons("a") == []  # no event of a wrong kind for the next kernel


class NoGpuNodes(Cluster):
    """An API server whose cluster has no GPU node (the label gone, the nodes scaled away)."""

    def _nodes(self, request: Request) -> Answer:
        if "watch" in request.query:
            return Answer(hang=True)
        listed = {"kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "10"}, "items": []}
        return Answer(body=json.dumps(listed).encode())


def test_once_on_a_cluster_with_no_gpu_node_is_no_pass(tmp_path: Path) -> None:
    """The CronJob's run never says OK having checked nothing: exit 2, one line; --allow-empty makes it
    exit 0 and say NOTHING CHECKED."""
    bare = fleet_remote(tmp_path)[1]
    with serving(NoGpuNodes()) as api:
        command = [
            *gpudrv_command(), "reconcile", "--once", "--repo", str(bare),
            "--kubeconfig", str(api.kubeconfig(tmp_path / "kc")), "--workdir", str(tmp_path / "work"),
        ]  # fmt: skip
        refused = subprocess.run(
            command, env=gpudrv_env(), capture_output=True, text=True, timeout=120, check=False
        )
        allowed = subprocess.run(
            [*command, "--allow-empty"],
            env=gpudrv_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "OK" not in refused.stdout
    [line] = refused.stderr.splitlines()
    assert line.startswith("gpudrv: no GPU node in the cluster at http://127.0.0.1:"), line
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert allowed.stdout.splitlines()[-1] == "NOTHING CHECKED: 0 GPU nodes"
    assert "OK" not in allowed.stdout
