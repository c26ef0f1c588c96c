#!/usr/bin/env python3
"""Benchmark `gpudrv matrix fill` between two local registries (issue 25): --tags images the fleet
lacks, all of them upstream.

    python benchmarks/fill.py [--tags 20] [--layer-mib 4] [--concurrency 1,8]

Starts two registries of tests/registry (distribution on 127.0.0.1, TLS, token auth: an upstream and a
target), pushes --tags multi-platform images upstream (linux/amd64 and linux/arm64, one layer of
--layer-mib MiB of random bytes each), writes a fleet of one GPU node per image (Node manifests) and an
empty matrix, and times `gpudrv matrix fill` in a new process (Python start-up included):

- the dry run (the audit, a HEAD per tag at the target and upstream);
- the fill into an empty target, per --concurrency (a fresh target for each);
- the rerun after the rows were removed again: everything is in the target, nothing is sent.

Prints a Markdown table with the wall time and the bytes and blobs gpudrv says it sent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.registry import harness  # noqa: E402

GPUDRV = Path(sys.executable).with_name("gpudrv")
HEADER = "driver_branch,kernel,os_tag\n"


def kernels(count: int) -> list[str]:
    return [f"6.8.0-{100 + number}-generic" for number in range(count)]


def timed(
    work: Path, env: dict[str, str], upstream: str, target: str, *extra: str
) -> tuple[float, dict[str, Any]]:
    command = [str(GPUDRV), "matrix", "fill", "--from", "nodes", "--upstream", upstream, "--registry", target]
    start = time.perf_counter()
    result = subprocess.run(
        [*command, *extra, "-o", "json"], cwd=work, env={**os.environ, **env}, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {result.returncode}\n{result.stderr}")
    document: dict[str, Any] = json.loads(result.stdout)
    return elapsed, document


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--layer-mib", type=float, default=4)
    parser.add_argument("--concurrency", default="1,8")
    options = parser.parse_args()
    names = kernels(options.tags)
    tags = [f"550-{kernel}-ubuntu24.04" for kernel in names]
    size = int(options.layer_mib * (1 << 20))
    binaries = harness.ensure_built()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpudrv-fill-bench-") as scratch:
        root = Path(scratch)
        upstream = harness.Registry(binaries, root / "upstream", "token")
        upstream.prepare()
        upstream.start()
        try:
            for tag in tags:
                upstream.push_index(tag, size=size)
            for concurrency in [int(part) for part in options.concurrency.split(",")]:
                target = harness.Registry(binaries, root / f"target-{concurrency}", "token")
                target.prepare()
                target.start()
                try:
                    users = [
                        (upstream, harness.USER, harness.PASSWORD),
                        (target, harness.PUSHER, harness.PUSHER_PASSWORD),
                    ]
                    env = harness.pair_env(root / f"env-{concurrency}", users)
                    work = harness.write_fleet(root / f"fleet-{concurrency}", names, HEADER)
                    flags = ("--concurrency", str(concurrency))
                    if not rows:
                        seconds, _ = timed(
                            work, env, upstream.repository, target.repository, "--dry-run", *flags
                        )
                        rows.append(("dry run (the plan)", concurrency, seconds, 0, 0))
                    seconds, document = timed(work, env, upstream.repository, target.repository, *flags)
                    assert document["ok"] and len(document["images"]) == len(tags), document
                    rows.append(("fill, empty target", concurrency, seconds, document["bytes_sent"],
                                 document["blobs_sent"]))  # fmt: skip
                    (work / "matrix" / "support-matrix.csv").write_text(HEADER)
                    seconds, document = timed(work, env, upstream.repository, target.repository, *flags)
                    assert all(image["action"] == "ADD" for image in document["images"]), document
                    rows.append(("rerun, all in the target", concurrency, seconds, document["bytes_sent"],
                                 document["blobs_sent"]))  # fmt: skip
                finally:
                    target.stop()
        finally:
            upstream.stop()
    print(f"{options.tags} tags, 2 platforms each, {options.layer_mib:g} MiB per platform layer\n")
    print("| run | concurrency | wall time | sent | blobs sent |")
    print("|---|---|---|---|---|")
    for what, concurrency, seconds, sent, blobs in rows:
        print(f"| {what} | {concurrency} | {seconds:.2f} s | {sent / (1 << 20):.1f} MiB | {blobs} |")


if __name__ == "__main__":
    main()
