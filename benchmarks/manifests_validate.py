#!/usr/bin/env python3
"""Benchmark `gpudrv manifests validate` on a generated folder of invalid Node manifests.

    python benchmarks/manifests_validate.py [--nodes 10000] [--runs 3] [--keep]

One file per node, as a fleet folder keeps them, each a GPU node with 12 labels of which five are
invalid: four mistakes many nodes share (a driver branch `5x0`, an unquoted minor `90`, a kernel with
a space, the ID `Ubuntu`), one value of the node's own (`rack-N_`, a label value ending in `_`). So
every file yields five problems, all printed. Each output format runs --runs times in a fresh process
(stdout discarded); the table shows the best wall time, the CPU time (user + system) of that run and
the peak RSS. On a loaded machine trust the CPU column over the wall clock.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-{index:05d}
  labels:
    kubernetes.io/hostname: gpu-node-{index:05d}
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: p4d.24xlarge
    topology.kubernetes.io/zone: us-east-1{zone}
    example.com/rack: rack-{index}_
    nvidia.com/gpu.present: "true"
    nvidia.com/cuda.driver.major: 5x0
    nvidia.com/cuda.driver.minor: 90
    feature.node.kubernetes.io/kernel-version.full: "5.15.0 {kernel}"
    feature.node.kubernetes.io/system-os_release.ID: Ubuntu
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "22.04"
"""
PROBLEMS_PER_NODE = 5


def build(folder: Path, nodes: int) -> None:
    folder.mkdir(parents=True)
    for index in range(nodes):
        text = NODE.format(index=index, zone="abc"[index % 3], kernel=100 + index % 40)
        (folder / f"gpu-node-{index:05d}.yaml").write_text(text)


def run(folder: Path, output: str) -> tuple[float, float, int, int]:
    """One run in a new process: wall seconds, CPU seconds, peak RSS (KiB) and lines printed."""
    gpudrv = Path(sys.executable).with_name("gpudrv")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [str(gpudrv), "manifests", "validate", "--from", str(folder), "-o", output],
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 2:
        raise SystemExit(f"expected exit 2 (invalid manifests), got {result.returncode}: {result.stderr!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss, result.stdout.count(b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpudrv-manifests-"))
    folder = work / "nodes"
    try:
        build(folder, args.nodes)
        problems = args.nodes * PROBLEMS_PER_NODE
        print(f"{args.nodes:,} Node manifests, {problems:,} problems, best of {args.runs}")
        print(f"{'command':<48}{'wall s':>8}{'CPU s':>8}{'peak RSS MiB':>14}")
        for output in ("text", "json"):
            runs = [run(folder, output) for _ in range(args.runs)]
            wall, cpu, rss, lines = min(runs)
            if output == "text" and lines != args.nodes * PROBLEMS_PER_NODE:
                raise SystemExit(f"expected {args.nodes * PROBLEMS_PER_NODE} problems, printed {lines}")
            print(f"{'gpudrv manifests validate -o ' + output:<48}{wall:>8.2f}{cpu:>8.2f}{rss / 1024:>14.1f}")
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
