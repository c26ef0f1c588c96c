#!/usr/bin/env python3
"""Benchmark reading the GPU workloads' image configs (adapters/registry/image_config.py, issue 27).

    python benchmarks/image_configs.py [--images 100] [--concurrency 1,8]

Starts a registry of tests/registry (distribution on 127.0.0.1, TLS, token auth), pushes --images
single-platform images with distinct configs (so distinct digests; each config's Env carries
NVIDIA_REQUIRE_CUDA and a number), and --images tags of one more image (all on one digest), then
times `read_configs` in this process:

- cold, per --concurrency: a new call (a new client: the token is fetched again, nothing cached);
- the rerun of the same call at the last concurrency (the cache lives within one call only);
- the tags sharing one digest: a manifest GET each, the config once.

Prints a Markdown table with the wall time and the requests the registry logged: manifest and config
GETs answered 200, the 401 challenges (answered with a token from the token service, another
process), and all of them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reconciler.adapters.registry.image_config import read_configs  # noqa: E402
from tests.registry import harness  # noqa: E402

REQUIRE = "cuda>=12.8 brand=tesla,driver>=535,driver<536"


def timed(registry: harness.Registry, requests: list[tuple[str, str]], concurrency: int) -> tuple[float, ...]:
    before = len(registry.accesses())
    start = time.perf_counter()
    found = read_configs(requests, concurrency)
    elapsed = time.perf_counter() - start
    bad = [config for config in found.values() if config.env is None]
    if bad:
        raise SystemExit(f"{len(bad)} images unread, the first: {bad[0].note}")
    seen = registry.accesses()[before:]
    answered = [item for item in seen if item.method == "GET" and item.status == 200]
    manifests = sum(1 for item in answered if "/manifests/" in item.path)
    configs = sum(1 for item in answered if "/blobs/" in item.path)
    challenged = sum(1 for item in seen if item.status == 401)
    return elapsed, manifests, configs, challenged, len(seen)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--concurrency", default="1,8")
    options = parser.parse_args()
    levels = [int(part) for part in options.concurrency.split(",")]
    rows: list[tuple[str, int, tuple[float, ...]]] = []
    with tempfile.TemporaryDirectory(prefix="gpudrv-image-config-bench-") as scratch:
        root = Path(scratch)
        registry = harness.Registry(harness.ensure_built(), root / "registry", "token")
        registry.prepare()
        registry.start()
        try:
            started = time.perf_counter()
            tags = [f"cuda-12.8-{number:03d}" for number in range(options.images)]
            for number, tag in enumerate(tags):
                registry.push_image(tag, {"NVIDIA_REQUIRE_CUDA": REQUIRE, "IMAGE_NUMBER": str(number)})
            shared = [f"shared-{number:03d}" for number in range(options.images)]
            registry.put_tags(shared)
            pushed = time.perf_counter() - started
            os.environ.update(harness.pair_env(root / "gpudrv", [(registry, harness.USER, harness.PASSWORD)]))
            requests = [(f"{registry.repository}:{tag}", "linux/amd64") for tag in tags]
            for concurrency in levels:
                rows.append(("cold, distinct digests", concurrency, timed(registry, requests, concurrency)))
            rows.append(("rerun, distinct digests", levels[-1], timed(registry, requests, levels[-1])))
            same = [(f"{registry.repository}:{tag}", "linux/amd64") for tag in shared]
            rows.append(("tags on one digest", levels[-1], timed(registry, same, levels[-1])))
        finally:
            registry.stop()
    print(f"{options.images} images, one registry (token auth, TLS, 127.0.0.1); pushed in {pushed:.0f} s\n")
    print("| run | concurrency | wall time | per image | manifest GETs | config GETs | 401s | all requests |")
    print("|---|---|---|---|---|---|---|---|")
    for what, concurrency, (seconds, manifests, configs, challenged, total) in rows:
        per = seconds / options.images * 1000
        counts = f"{manifests} | {configs} | {challenged} | {total}"
        print(f"| {what} | {concurrency} | {seconds:.2f} s | {per:.1f} ms | {counts} |")


if __name__ == "__main__":
    main()
