#!/usr/bin/env python3
"""Measure `gpudrv reconcile` against a running cluster: memory and CPU idle and at N GPU nodes, the
time from a node joining to its metric, the first list and full audit of N nodes, and a takeover.

    export KUBECONFIG=$(scripts/cluster up)
    python benchmarks/reconcile.py [--nodes 5000] [--window 60] [--probes 20] [--workers 16]

The N nodes are created in parallel (--workers threads) as plain Node objects labelled like GPU
nodes (2% with a kernel no image is built for); they are not kwok-managed, so nothing heartbeats
them, but the node lifecycle controller still marks them NotReady and taints them (watch events
without label changes, as status updates are). The loop runs as its own process with
leader election, pulling a bare copy of this repository's matrix. CPU is utime+stime of that
process over --window seconds (percent of one core), memory its RSS (VmRSS; VmHWM for the peak).
Everything created is deleted at the end (label gpudrv-bench=true).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GPUDRV = Path(sys.executable).with_name("gpudrv")
BENCH_LABEL = "gpudrv-bench"
KERNELS_OK = ("5.15.0-119-generic",)
KERNEL_MISSING = "6.1.0-999-generic"
TICKS = os.sysconf("SC_CLK_TCK")


def labels(index: int) -> dict[str, str]:
    missing = index % 50 == 0  # 2%
    return {
        BENCH_LABEL: "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "feature.node.kubernetes.io/kernel-version.full": KERNEL_MISSING if missing else KERNELS_OK[0],
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "kubernetes.io/hostname": f"bench-{index:05d}",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/zone": f"zone-{index % 3}",
    }


def core_api() -> Any:
    from kubernetes import client, config

    api = config.new_client_from_config()
    api.configuration.connection_pool_maxsize = 64
    return client.CoreV1Api(api)


def create_nodes(api: Any, first: int, count: int, workers: int) -> float:
    def create(index: int) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"bench-{index:05d}", "labels": labels(index)}}  # fmt: skip
        for _ in range(5):
            try:
                api.create_node(body, _preload_content=False)
                return
            except Exception as exc:
                if getattr(exc, "status", None) == 409:
                    return
                time.sleep(0.5)

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, range(first, first + count)))
    return time.monotonic() - started


def delete_nodes(api: Any) -> None:
    api.delete_collection_node(label_selector=f"{BENCH_LABEL}=true", _preload_content=False)


class Loop:
    def __init__(self, work: Path, repo: Path, name: str, *extra: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = (work / f"{name}.log").open("wb")
        command = [str(GPUDRV), "reconcile", "--repo", str(repo), "--workdir", str(work / f"work-{name}"),
                   "--listen", f"127.0.0.1:{self.port}", "--identity", name, "--lease-namespace", "default",
                   "--lease-name", "gpudrv-bench", *extra]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def metrics(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
                return answer.read().decode()
        except OSError:
            return ""

    def value(self, name: str) -> float | None:
        for line in self.metrics().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def has(self, fragment: str) -> bool:
        return fragment in self.metrics()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def memory(self) -> tuple[float, float]:
        """VmRSS and VmHWM in MiB."""
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
        )
        return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


def wait(what: str, predicate: Any, timeout: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def window(loop: Loop, seconds: float) -> dict[str, float]:
    cpu, started = loop.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    used, elapsed = loop.cpu_seconds() - cpu, time.monotonic() - started
    rss, peak = loop.memory()
    return {
        "cpu_percent": round(100 * used / elapsed, 2),
        "rss_mib": round(rss, 1),
        "peak_mib": round(peak, 1),
    }


def join_latencies(api: Any, loop: Loop, probes: int, first: int) -> list[float]:
    """kubectl-free: from the create request's start to the node's series in /metrics."""
    found = []
    for index in range(first, first + probes):
        name = f"bench-{index:05d}"
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels(0)}}
        started = time.monotonic()
        api.create_node(body, _preload_content=False)
        wait(f"{name}'s series", lambda name=name: f'node="{name}"' in loop.metrics(), 30)
        found.append(time.monotonic() - started)
        time.sleep(0.5)
    return found


def histogram_sum(loop: Loop, scope: str) -> tuple[float, float]:
    total = count = 0.0
    for line in loop.metrics().splitlines():
        if line.startswith(f'gpudrv_audit_duration_seconds_sum{{scope="{scope}"}}'):
            total = float(line.split()[1])
        if line.startswith(f'gpudrv_audit_duration_seconds_count{{scope="{scope}"}}'):
            count = float(line.split()[1])
    return total, count


def fleet_repository(work: Path) -> Path:
    """A bare copy of this repository's matrix, as the loop's remote."""
    fleet = work / "fleet"
    shutil.copytree(REPO / "matrix", fleet / "matrix")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=fleet, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*git, "commit", "-qm", "fleet"], cwd=fleet, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(fleet), str(work / "fleet.git")], check=True)
    return work / "fleet.git"


def joining(api: Any, loop: Loop, options: argparse.Namespace, results: dict[str, Any]) -> None:
    cpu = loop.cpu_seconds()
    took = create_nodes(api, 0, options.nodes, options.workers)
    seen = wait("every node audited", lambda: (loop.value("gpudrv_gpu_nodes") or 0) >= options.nodes, 600)
    results["create_seconds"] = round(took, 1)
    results["all_audited_after_create_seconds"] = round(seen, 1)
    results["cpu_seconds_while_joining"] = round(loop.cpu_seconds() - cpu, 1)
    results["missing"] = loop.value("gpudrv_gpu_nodes_missing_image")
    print(f"created {options.nodes} nodes in {took:.1f}s; all audited {seen:.1f}s later", flush=True)


def takeover(loop: Loop, standby: Loop, expected: int, results: dict[str, Any]) -> None:
    """The leader is killed; the standby waits out the lease, lists the fleet and audits it."""
    wait("standby ready", lambda: standby.value("gpudrv_leader") == 0, 120)
    loop.process.kill()
    loop.process.wait()
    took = wait(
        "standby leading with every node", lambda: (standby.value("gpudrv_gpu_nodes") or 0) >= expected, 120
    )
    total, count = histogram_sum(standby, "fleet")
    results["takeover_to_all_audited_seconds"] = round(took, 2)
    results["first_full_audit_seconds"] = round(total / count, 3) if count else None
    rss, peak = standby.memory()
    results["standby_after_takeover"] = {"rss_mib": round(rss, 1), "peak_mib": round(peak, 1)}
    print(f"leader killed -> standby leading with all nodes audited: {took:.1f}s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--workers", type=int, default=16)
    options = parser.parse_args()
    api = core_api()
    work = Path(tempfile.mkdtemp(prefix="gpudrv-bench-"))
    remote = fleet_repository(work)
    results: dict[str, Any] = {"nodes": options.nodes, "window_seconds": options.window}
    loop = Loop(work, remote, "a")
    standby: Loop | None = None
    try:
        wait(
            "ready",
            lambda: loop.value("gpudrv_leader") == 1 and loop.value("gpudrv_gpu_nodes") is not None,
            120,
        )
        time.sleep(5)
        results["idle"] = window(loop, options.window)
        print("idle:", results["idle"], flush=True)
        joining(api, loop, options, results)
        time.sleep(10)
        results["steady"] = window(loop, options.window)
        print("steady:", results["steady"], flush=True)
        latencies = join_latencies(api, loop, options.probes, options.nodes)
        results["join_to_metric_seconds"] = {
            "p50": round(statistics.median(latencies), 3),
            "max": round(max(latencies), 3),
            "min": round(min(latencies), 3),
            "samples": len(latencies),
        }
        print("join -> metric:", results["join_to_metric_seconds"], flush=True)
        standby = Loop(work, remote, "b")
        takeover(loop, standby, options.nodes + options.probes, results)
    finally:
        for running in (loop, standby):
            if running is not None:
                running.stop()
        delete_nodes(api)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
