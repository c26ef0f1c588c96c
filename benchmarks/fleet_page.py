#!/usr/bin/env python3
"""Benchmark the fleet page (`gpudrv report -o html`) on a generated fleet: 5,000 GPU nodes, a matrix of
1,000 rows grown over 1,000 commits.

    python benchmarks/fleet_page.py [--nodes 5000] [--rows 1000] [--runs 3] [--keep]

The repository is written in one `git fast-import` stream: 4 OS versions x 50 kernels x 5 driver
branches, a row a commit (every tenth a squash-merged PR, every fiftieth retiring a row), and the nodes
as one List manifest. 2% of the nodes run a kernel the matrix lacks, 1% failed an upgrade (with a
recorded reason), 6% are mid-upgrade, 30% done. Timed, best of --runs:

- render: the page from data already read (core.fleet_page + render.fleet_page), in this process;
- gpudrv: the whole command in a new process, `gpudrv report --from DIR -o html` (reading and parsing
  5,000 Node manifests, the matrix, and its git history), with its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HEADER = "driver_branch,kernel,os_tag"
MATRIX = "matrix/support-matrix.csv"
NODES = "clusters/fleet/nodes.yaml"
START = 1_700_000_000
OS = {
    "ubuntu20.04": ("ubuntu", "20.04"),
    "ubuntu22.04": ("ubuntu", "22.04"),
    "ubuntu24.04": ("ubuntu", "24.04"),
}
OS["rhel9"] = ("rhel", "9.4")
BRANCHES = ("535", "550", "560", "570", "580")
AUTHORS = ("Ana Ops", "Bo Builder", "Chen Kernel", "Dee Release", "dependabot[bot]")
FAILURE = "gpudrv.dev/upgrade-failure"
IN_PROGRESS = (
    "upgrade-required",
    "cordon-required",
    "drain-required",
    "pod-restart-required",
    "validation-required",
)


def kernel(os_tag: str, index: int) -> str:
    return f"5.14.0-{400 + index}.el9.x86_64" if os_tag == "rhel9" else f"5.15.0-{100 + index}-generic"


def all_rows(count: int) -> list[str]:
    rows = [
        f"{branch},{kernel(os_tag, index)},{os_tag}"
        for index in range(50)
        for os_tag in OS
        for branch in BRANCHES
    ]
    return rows[:count]


def fast_import(rows: list[str]) -> bytes:
    """A commit a row, oldest first; every fiftieth commit also retires the oldest row still there."""
    out: list[bytes] = []
    present: list[str] = []
    for number, row in enumerate(rows, start=1):
        present.append(row)
        subject = f"Add {row}" + (f" (#{number})" if number % 10 == 0 else "")
        if number % 50 == 0:
            present.pop(0)
            subject += " and retire the oldest row"
        text = ("\n".join((HEADER, *present)) + "\n").encode()
        message = subject.encode()
        author = AUTHORS[number % len(AUTHORS)]
        stamp = START + number * 3600
        out += [
            b"commit refs/heads/main\n",
            f"committer {author} <ci@example.com> {stamp} +0000\n".encode(),
            f"data {len(message)}\n".encode() + message + b"\n",
            f"M 644 inline {MATRIX}\n".encode(),
            f"data {len(text)}\n".encode() + text + b"\n",
        ]
    return b"".join(out)


def node_list(count: int, rows: list[str], seed: int = 7) -> dict[str, object]:
    """`count` GPU nodes on the matrix's images, but 2% on kernels it lacks."""
    chance = random.Random(seed)
    items = []
    for number in range(count):
        branch, kern, os_tag = chance.choice(rows).split(",")
        if chance.random() < 0.02:
            kern = kernel(os_tag, 60 + chance.randrange(5))  # not in the matrix
        os_id, version = OS[os_tag]
        labels = {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/cuda.driver.major": branch,
            "feature.node.kubernetes.io/kernel-version.full": kern,
            "feature.node.kubernetes.io/system-os_release.ID": os_id,
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
        }
        metadata: dict[str, object] = {
            "name": f"gpu-{os_tag.replace('.', '')}-{number:05d}",
            "labels": labels,
        }
        roll = chance.random()
        if roll < 0.01:
            labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
            metadata["annotations"] = {
                FAILURE: f"drain-required: PDB ml/trainer-{number % 7} allows 0 disruptions"
            }
        elif roll < 0.07:
            labels["nvidia.com/gpu-driver-upgrade-state"] = IN_PROGRESS[number % len(IN_PROGRESS)]
        elif roll < 0.37:
            labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": metadata})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def block_yaml(value: object, indent: int = 0) -> str:
    """Block-style YAML, as manifests are written (every scalar a JSON-quoted string)."""
    pad = " " * indent
    if isinstance(value, dict):
        return "".join(
            f"{pad}{key}:\n{block_yaml(item, indent + 2)}"
            if isinstance(item, dict | list)
            else f"{pad}{key}: {json.dumps(item)}\n"
            for key, item in value.items()
        )
    assert isinstance(value, list)
    return "".join(f"{pad}-\n{block_yaml(item, indent + 2)}" for item in value)


def build(root: Path, nodes: int, rows: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    matrix_rows = all_rows(rows)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=fast_import(matrix_rows), check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)
    target = root / NODES
    target.parent.mkdir(parents=True)
    target.write_text(block_yaml(node_list(nodes, matrix_rows)))


def time_render(root: Path, runs: int) -> tuple[float, int]:
    """The page from data already in memory: the pictures' data and the HTML."""
    from reconciler.adapters import git
    from reconciler.adapters.files import declared_nodes, operator_contract
    from reconciler.adapters.sources import valid_matrix
    from reconciler.core.views import fleet_page
    from reconciler.render import fleet_page as page

    parsed = valid_matrix(root / MATRIX)
    live = declared_nodes.gpu_nodes(root / "clusters/fleet")
    found = operator_contract.wants(
        operator_contract.offline_contract(root / "clusters/fleet", None), [n.node for n in live]
    )
    repo, repo_path = git.locate(root / MATRIX)
    lifetimes = git.matrix_history(repo, repo_path)
    reasons = fleet_page.reasons_by_node({node.name: node.annotations for node in live})
    facts = page.Facts(
        generated=datetime.now(UTC),
        source="benchmark",
        matrix=MATRIX,
        matrix_rows=len(parsed.rows),
        mode="lab",
        version="bench",
    )
    best, html = float("inf"), ""
    for _ in range(runs):
        start = time.perf_counter()
        grid = fleet_page.coverage((row.key for row in parsed.rows), found.wants)
        states = fleet_page.progress(
            fleet_page.NodeState(
                n.name, n.node.labels.get("nvidia.com/gpu-driver-upgrade-state"), reasons.get(n.name)
            )
            for n in live
        )
        rows = fleet_page.node_rows(found.wants, parsed.tags(), states)
        html = page.html(facts, grid, states, fleet_page.changes(lifetimes), nodes=rows)
        best = min(best, time.perf_counter() - start)
    return best, len(html.encode())


def time_command(root: Path, runs: int, *args: str) -> tuple[float, bytes, int]:
    """`gpudrv ARGS` in a new process: the best wall time, its output, the peak RSS of the children."""
    gpudrv = Path(sys.executable).with_name("gpudrv")
    best, output = float("inf"), b""
    for _ in range(runs):
        start = time.perf_counter()
        output = subprocess.run([str(gpudrv), *args], cwd=root, capture_output=True, check=False).stdout
        best = min(best, time.perf_counter() - start)
    return best, output, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--keep", action="store_true", help="keep the generated repository and print its path"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpudrv-fleet-page-"))
    try:
        build(root, args.nodes, args.rows)
        render_time, render_size = time_render(root, args.runs)
        audit_time, _, _ = time_command(root, args.runs, "audit", "--from", "clusters/fleet")
        page_time, page, rss = time_command(
            root, args.runs, "report", "--from", "clusters/fleet", "-o", "html"
        )
        (root / "fleet.html").write_bytes(page)
        print(
            f"{args.nodes} GPU nodes, {args.rows} matrix rows over {args.rows} commits (best of {args.runs})"
        )
        print(f"render, data in memory -> HTML:   {render_time:6.3f} s  {render_size / 1024:5.0f} KiB")
        size = f"{len(page) / 1024:5.0f} KiB  peak RSS {rss / 1024:.0f} MiB"
        print(f"gpudrv report --from DIR -o html: {page_time:6.3f} s  {size}")
        print(f"gpudrv audit --from DIR, beside:  {audit_time:6.3f} s")
        if args.keep:
            print(root / "fleet.html")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
