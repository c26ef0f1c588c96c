#!/usr/bin/env python3
"""Benchmark `gpudrv audit --all-clusters` on 3 clusters side by side against 3 single-cluster runs.

    .venv/bin/python benchmarks/clusters.py [--nodes 2000] [--runs 5] [--keep] [--profile]

It starts 3 control planes of their own (etcd and kube-apiserver only, no controller, no audit log)
with scripts/cluster, each with its own state in ~/.cache/gpudrv/bench-clusters/NAME (never the e2e
tier's ~/.cache/gpudrv/cluster-state) and its own kubeconfig context, and stops them at the end unless
--keep. In each it creates --nodes GPU nodes with benchmarks/fleet.py's generator and fast creator
(112 labels, a kubelet's status), their drivers, kernels and OS releases moved onto the rows of the
repository's matrix, except a few per cluster (3, 4 and 5) on a kernel the matrix lacks: the findings.

A work folder holds a copy of matrix/support-matrix.csv and a gpudrv.yaml naming the 3 clusters by
their kubeconfigs. After one untimed round that checks the outputs, it runs --runs rounds, each in
a rotated order: `gpudrv audit --all-clusters`, then `gpudrv audit --kubeconfig K` for each cluster.
Every run must exit 1 with the expected findings (the side-by-side run's count equal to the sum of
the single runs'). It prints the median and the minimum of each wall time, of the three single runs
one after another (their sum, per round), of the slowest single run (their max, per round) and of the
fixed cost of reading them side by side (--all-clusters minus the slowest single run, per round),
with the CPU seconds of gpudrv and of the 3 control planes beside them. --profile also prints where
one --all-clusters run spends its time (cProfile of the main thread and of the cluster threads).
gpudrv runs with its bytecode cached in ~/.cache/gpudrv/bench-clusters/pycache, as an installed one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fleet  # benchmarks/fleet.py, beside this file: the node generator, the creator, scripts/cluster

REPO = fleet.REPO
GPUDRV = Path(sys.executable).with_name("gpudrv")
NAMES = ("eu", "us", "ap")
MISSING = (3, 4, 5)  # nodes on a kernel the matrix lacks, in each cluster
STATE_ROOT = Path.home() / ".cache" / "gpudrv" / "bench-clusters"
SHARED_STATE = Path.home() / ".cache" / "gpudrv" / "cluster-state"  # the e2e tier's: never touched
NFD = "feature.node.kubernetes.io"
TICKS = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(f"[clusters] {message}", file=sys.stderr, flush=True)


# --- the nodes: fleet.py's, on the matrix's rows ----------------------------------------------------------

Row = tuple[str, str, str]  # driver branch, kernel, OS tag (as in the matrix)


def matrix_rows(matrix: Path) -> list[Row]:
    lines = [line.split(",") for line in matrix.read_text().splitlines()[1:] if line.strip()]
    return [(branch, kernel, os_tag) for branch, kernel, os_tag in lines]


def place(document: dict[str, Any], row: Row) -> None:
    """The node's driver, kernel and OS release labels (and node info) as `row` says."""
    branch, kernel, os_tag = row
    found = re.fullmatch(r"([a-z]+)(\d+(?:\.\d+)?)", os_tag)
    if found is None:
        raise SystemExit(f"the matrix's OS tag {os_tag!r} is not NAME and VERSION")
    os_id, version = found[1], found[2]
    if os_id in {"rhel", "rocky", "ol"} and "." not in version:
        version += ".4"  # these tags carry the major release only
    major, minor, rev = next((d for d in fleet.DRIVERS if d[0] == branch), (branch, "0", "0"))
    numbers = kernel.split("-")[0].split(".")
    labels: dict[str, str] = document["metadata"]["labels"]
    labels |= {
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.driver-version.full": f"{major}.{minor}.{rev}",
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        f"{NFD}/kernel-version.full": kernel,
        f"{NFD}/kernel-version.major": numbers[0],
        f"{NFD}/kernel-version.minor": numbers[1],
        f"{NFD}/kernel-version.revision": numbers[2],
        f"{NFD}/system-os_release.ID": os_id,
        f"{NFD}/system-os_release.VERSION_ID": version,
        f"{NFD}/system-os_release.VERSION_ID.major": version.split(".")[0],
        f"{NFD}/system-os_release.VERSION_ID.minor": version.split(".")[1],
    }
    info = document["status"]["nodeInfo"]
    info["kernelVersion"], info["osImage"] = kernel, f"{os_id} {version}"


def missing_indices(count: int, missing: int) -> set[int]:
    """`missing` node indices spread over the fleet."""
    return {int((number + 0.5) * count / missing) for number in range(missing)}


def documents(rows: list[Row], count: int, plane: int) -> Callable[[int], dict[str, Any]]:
    """fleet.node_document for one cluster: every node on a matrix row, except MISSING[plane] of them
    on a kernel no row has (5.15.0-99P-generic)."""
    gaps = missing_indices(count, MISSING[plane])
    original = ORIGINAL_NODE_DOCUMENT

    def document(index: int) -> dict[str, Any]:
        node = original(index)
        branch, _, os_tag = rows[0]
        row = (branch, f"5.15.0-99{plane}-generic", os_tag) if index in gaps else rows[index % len(rows)]
        place(node, row)
        return node

    return document


ORIGINAL_NODE_DOCUMENT = fleet.node_document


@contextmanager
def nodes_made_by(document: Callable[[int], dict[str, Any]]) -> Iterator[None]:
    """fleet.create_nodes builds each node with fleet.node_document, looked up when it runs: this
    cluster's variant stands in for it meanwhile (the creator itself is reused as it is)."""
    fleet.node_document = document  # type: ignore[assignment]  # same signature, a closure
    try:
        yield
    finally:
        fleet.node_document = ORIGINAL_NODE_DOCUMENT


# --- the control planes -----------------------------------------------------------------------------------


@dataclass
class Plane:
    name: str
    env: dict[str, str]  # scripts/cluster's, for `up` and `down`
    kubeconfig: Path
    cluster: fleet.Cluster
    missing: int  # the findings expected in this cluster

    @property
    def state(self) -> Path:
        return Path(self.env["GPUDRV_CLUSTER_STATE"])

    def cpu(self) -> float:
        """CPU seconds used so far by this plane's etcd and kube-apiserver."""
        pids = json.loads((self.state / "state.json").read_text()).get("pids", {})
        total = 0
        for pid in pids.values():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / TICKS


def plane_env(name: str) -> dict[str, str]:
    state = STATE_ROOT / name
    if state.resolve() == SHARED_STATE.resolve():
        raise SystemExit(f"refusing the e2e tier's state dir {SHARED_STATE}")
    env = {key: value for key, value in os.environ.items() if not key.startswith("GPUDRV_CLUSTER_")}
    if os.environ.get("GPUDRV_CLUSTER_CACHE"):  # the binaries may be shared; the state never is
        env["GPUDRV_CLUSTER_CACHE"] = os.environ["GPUDRV_CLUSTER_CACHE"]
    env.pop("KUBECONFIG", None)
    return env | {
        "GPUDRV_CLUSTER_STATE": str(state),
        "GPUDRV_CLUSTER_COMPONENTS": "etcd,kube-apiserver",
        "GPUDRV_CLUSTER_CONTEXT": name,
        "GPUDRV_CLUSTER_AUDIT": "",
        "GPUDRV_CLUSTER_CONTROLLERS": "",
    }


def start(name: str, plane: int, work: Path) -> Plane:
    env = plane_env(name)
    log(f"{name}: control plane in {env['GPUDRV_CLUSTER_STATE']}")
    kubeconfig, _, _ = fleet.cluster_up(env)
    cluster = fleet.Cluster.load(kubeconfig, work / "certs" / name)
    return Plane(name, env, kubeconfig, cluster, MISSING[plane])


def stop(plane: Plane) -> None:
    subprocess.run([str(fleet.CLUSTER), "down"], env=plane.env, capture_output=True, check=False)


def fill(plane: Plane, number: int, rows: list[Row], count: int) -> None:
    """`count` GPU nodes (no controller runs, so nothing rewrites them: no need to wait for quiet)."""
    with nodes_made_by(documents(rows, count, number)):
        seconds = fleet.create_nodes(plane.cluster, count)
    log(f"{plane.name}: {count:,} nodes there ({seconds:.0f} s to create the missing ones)")
    plane.missing = len(missing_indices(count, MISSING[number]))


# --- the runs ---------------------------------------------------------------------------------------------


@dataclass
class Sample:
    wall: float
    cpu: float  # gpudrv's own (user + system)
    planes: float  # the 3 control planes' (etcd + kube-apiserver)


@dataclass
class Figures:
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, key: str, sample: Sample) -> None:
        self.samples.setdefault(key, []).append(sample)

    def walls(self, key: str) -> list[float]:
        return [sample.wall for sample in self.samples[key]]


def audit(argv: list[str], work: Path, env: dict[str, str], planes: list[Plane]) -> tuple[Sample, list[str]]:
    """One gpudrv audit: its sample and its MISSING lines (it must exit 1, with nothing on stderr)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    serving = sum(plane.cpu() for plane in planes)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    sample = Sample(wall, cpu, sum(plane.cpu() for plane in planes) - serving)
    if done.returncode != 1 or done.stderr:
        raise SystemExit(f"{' '.join(argv[1:])}: exit {done.returncode}, want 1\n{done.stderr[-2000:]}")
    return sample, [line for line in done.stdout.splitlines() if " MISSING " in line]


def commands(planes: list[Plane]) -> dict[str, list[str]]:
    commands = {"all": [str(GPUDRV), "audit", "--all-clusters"]}
    for plane in planes:
        commands[plane.name] = [str(GPUDRV), "audit", "--kubeconfig", str(plane.kubeconfig)]
    return commands


def check(found: dict[str, list[str]], planes: list[Plane]) -> None:
    """Each cluster's findings alone, and all of them under CLUSTER/NODE side by side."""
    for plane in planes:
        if len(found[plane.name]) != plane.missing:
            raise SystemExit(f"{plane.name}: {len(found[plane.name])} findings, want {plane.missing}")
    want = sorted(f"{plane.name}/{line}" for plane in planes for line in found[plane.name])
    if sorted(found["all"]) != want:
        raise SystemExit(f"--all-clusters found {len(found['all'])} findings, the singles {len(want)}")


def measure(planes: list[Plane], work: Path, env: dict[str, str], runs: int) -> Figures:
    argvs = commands(planes)
    found = {key: audit(argv, work, env, planes)[1] for key, argv in argvs.items()}  # untimed
    check(found, planes)
    log(f"outputs checked: {len(found['all'])} findings side by side, as the 3 single runs")
    figures = Figures()
    keys = list(argvs)
    for run in range(runs):
        for key in keys[run % len(keys) :] + keys[: run % len(keys)]:  # a rotated order
            sample, found[key] = audit(argvs[key], work, env, planes)
            figures.add(key, sample)
        check(found, planes)
        log(f"run {run + 1}/{runs}: all {figures.samples['all'][-1].wall:.2f} s")
    singles = [plane.name for plane in planes]
    for number in range(runs):  # per round: the sequential sum, the slowest, the fixed cost
        ones = [figures.samples[name][number] for name in singles]
        whole = figures.samples["all"][number]
        figures.add("sum", Sample(*(sum(values) for values in zip(*map(astuple, ones), strict=True))))
        slowest = max(ones, key=lambda sample: sample.wall)
        figures.add("max", slowest)
        figures.add("fixed", Sample(whole.wall - slowest.wall, 0.0, 0.0))  # wall clock only
    return figures


def astuple(sample: Sample) -> tuple[float, float, float]:
    return sample.wall, sample.cpu, sample.planes


def table(figures: Figures, planes: list[Plane], nodes: int, runs: int) -> list[str]:
    rows = [
        ("gpudrv audit --all-clusters", "all"),
        *((f"gpudrv audit --kubeconfig {plane.name}", plane.name) for plane in planes),
        ("the 3 single runs in a row (sum)", "sum"),
        ("the slowest single run (max)", "max"),
        ("fixed cost: all - slowest", "fixed"),
    ]
    lines = [
        f"{len(planes)} clusters x {nodes:,} GPU nodes, {runs} runs    median s   min s"
        "   gpudrv CPU s   planes CPU s"
    ]
    for label, key in rows:
        walls = figures.walls(key)
        cpu = statistics.median(sample.cpu for sample in figures.samples[key])
        serving = statistics.median(sample.planes for sample in figures.samples[key])
        cpus = f"{cpu:14.2f} {serving:14.2f}" if key != "fixed" else ""
        lines.append(f"  {label:<38}{statistics.median(walls):8.2f} {min(walls):7.2f} {cpus}")
    whole, total, slowest = (statistics.median(figures.walls(key)) for key in ("all", "sum", "max"))
    lines.append(f"  --all-clusters / sum {whole / total:.2f}, / slowest {whole / slowest:.2f} (medians)")
    return lines


# --- where one side-by-side run spends its time ----------------------------------------------------------

# cProfile sees one thread: every thread (the clusters' pool) gets a profiler of its own, merged after.
PROFILE = """
import cProfile, pstats, runpy, sys, threading
threads = []
run = threading.Thread.run
def profiled(self):
    profile = cProfile.Profile()
    threads.append(profile)
    profile.runcall(run, self)
threading.Thread.run = profiled
sys.argv = ["gpudrv", "audit", "--all-clusters"]
main = cProfile.Profile()
main.enable()
try:
    runpy.run_module("reconciler", run_name="__main__")
except SystemExit:
    pass
main.disable()
sys.stdout = sys.__stderr__
print("== main thread, by cumulative time (top 25)")
pstats.Stats(main, stream=sys.stderr).sort_stats("cumtime").print_stats(25)
merged = pstats.Stats(threads[0], stream=sys.stderr)
for profile in threads[1:]:
    merged.add(profile)
print(f"== the {len(threads)} cluster threads merged, by own time (top 25)")
merged.sort_stats("tottime").print_stats(25)
"""


def profile(work: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROFILE], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    return done.stderr


# --- main -------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000, help="GPU nodes in each cluster")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds (medians and minimums)")
    parser.add_argument("--keep", action="store_true", help="leave the control planes and nodes running")
    parser.add_argument("--profile", action="store_true", help="also profile one --all-clusters run")
    args = parser.parse_args()
    if args.nodes < max(MISSING):
        raise SystemExit(f"--nodes: at least {max(MISSING)}")
    if not GPUDRV.exists():
        raise SystemExit(f"no gpudrv beside {sys.executable}: pip install -e . in this venv")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "GPUDRV_"))}
    env["KUBECONFIG"] = ""  # each run names its clusters: gpudrv.yaml's entries, or --kubeconfig
    # Bytecode, as an installed gpudrv has it (kept outside the repository): with PYTHONDONTWRITEBYTECODE
    # every run would compile reconciler's sources again, 0.14 s more per process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(STATE_ROOT / "pycache")
    planes: list[Plane] = []
    with tempfile.TemporaryDirectory(prefix="gpudrv-clusters-") as folder:
        work = Path(folder)
        (work / "matrix").mkdir()
        shutil.copy(REPO / "matrix" / "support-matrix.csv", work / "matrix" / "support-matrix.csv")
        rows = matrix_rows(work / "matrix" / "support-matrix.csv")
        try:
            for number, name in enumerate(NAMES):
                planes.append(start(name, number, work))
                fill(planes[-1], number, rows, args.nodes)
            entries = [json.dumps({"name": p.name, "kubeconfig": str(p.kubeconfig)}) for p in planes]
            (work / "gpudrv.yaml").write_text(
                "matrix: matrix/support-matrix.csv\nclusters:\n" + "".join(f"  - {e}\n" for e in entries)
            )
            load = os.getloadavg()[0]
            figures = measure(planes, work, env, args.runs)
            lines = table(figures, planes, args.nodes, args.runs)
            machine = (
                f"{os.cpu_count()} cores; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
            )
            print("\n".join([*lines, f"  ({machine})"]), flush=True)
            if args.profile:
                print(profile(work, env), flush=True)
        finally:
            if not args.keep:
                for plane in planes:
                    stop(plane)
                log("control planes stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
