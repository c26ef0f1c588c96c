#!/usr/bin/env python3
"""Benchmark `gpudrv matrix verify` against a local registry (issue 15): a matrix of --rows rows.

    python benchmarks/registry.py [--rows 1000] [--runs 3] [--concurrency 1,8,16]

Starts the reference registry of tests/registry (distribution on 127.0.0.1, TLS; htpasswd auth, then
token auth through regtool's token server), puts one small image under each row's tag, and times
`gpudrv matrix verify` in a new process (Python start-up included): every row present, with
--list-tags, and every row missing. Prints a Markdown table of the best of --runs wall times. The
binaries are built from the pinned Go modules on first use, like the registry tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.registry import harness  # noqa: E402

GPUDRV = Path(sys.executable).with_name("gpudrv")
HEADER = "driver_branch,kernel,os_tag"


def rows(count: int) -> list[tuple[str, str, str]]:
    branches, os_tags = ("535", "550", "570", "580"), ("ubuntu22.04", "ubuntu24.04")
    return [
        (branches[n % 4], f"{5 + n // 500}.{(n // 50) % 10}.0-{n % 50 + 100}-generic", os_tags[(n // 4) % 2])
        for n in range(count)
    ]


def best(command: list[str], env: dict[str, str], cwd: Path, runs: int, expect: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if result.returncode != expect:
            raise SystemExit(f"{' '.join(command)}: exit {result.returncode}\n{result.stderr}")
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", default="1,8,16")
    options = parser.parse_args()
    table = rows(options.rows)
    tags = [f"{branch}-{kernel}-{os_tag}" for branch, kernel, os_tag in table]
    assert len(set(tags)) == len(tags)
    print(f"gpudrv matrix verify, {options.rows} rows, best of {options.runs}, {os.cpu_count()} cores\n")
    print("| registry auth | rows in the registry | command | wall time |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gpudrv-bench-registry-") as folder:
        work = Path(folder)
        matrix = work / "matrix.csv"
        matrix.write_text(HEADER + "\n" + "".join(",".join(row) + "\n" for row in table))
        for auth in ("htpasswd", "token"):
            with harness.running(work / auth, auth) as registry:
                env = {**os.environ, **registry.env()}
                base = [str(GPUDRV), "matrix", "verify", "--matrix", str(matrix), "--registry"]
                empty = [*base, registry.repository, "-o", "text"]
                seconds = best(empty, env, work, options.runs, expect=1)
                print(f"| {auth} | none | `matrix verify` (all {options.rows} MISSING) | {seconds:.2f} s |")
                registry.put_tags(tags)
                for concurrency in options.concurrency.split(","):
                    command = [*base, registry.repository, "--concurrency", concurrency]
                    seconds = best(command, env, work, options.runs, expect=0)
                    print(f"| {auth} | all | `matrix verify --concurrency {concurrency}` | {seconds:.2f} s |")
                command = [*base, registry.repository, "--list-tags"]
                seconds = best(command, env, work, options.runs, expect=0)
                print(f"| {auth} | all | `matrix verify --list-tags` | {seconds:.2f} s |")
    version = subprocess.run([str(GPUDRV), "--version"], capture_output=True, text=True, check=False).stdout
    print(f"\n{version.strip()}; registry {harness.versions()}")


if __name__ == "__main__":
    main()
