#!/usr/bin/env python3
"""Benchmark `gpudrv matrix history` on a generated repository, beside `git log` alone.

    python benchmarks/history.py [--commits 10000] [--runs 3] [--keep]

The repository is written in one `git fast-import` stream into a temporary directory: squash-merged
PRs that add a row, merge commits of PR branches, commits that touch other files only, old rows
retired once the matrix holds --rows rows, and a re-sort every 1,000 commits. Each command runs
--runs times in a fresh wrapper process; the table shows the best wall time and the peak RSS
(ru_maxrss of the wrapper's children: the largest process of the tree, gpudrv's Python or its git).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HEADER = "driver_branch,kernel,os_tag"
MATRIX = "matrix/support-matrix.csv"
START = 1_700_000_000  # commit timestamps, one minute apart
OS_TAGS = ("ubuntu22.04", "ubuntu24.04")
BRANCHES = ("535", "550", "570", "580")

# Runs a command with stdout discarded; prints its wall time and the peak RSS of its process tree.
WRAPPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
elapsed = time.perf_counter() - start
print(elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

# gpudrv in this process, so ru_maxrss of RUSAGE_SELF is the Python side alone (git is a child).
IN_PROCESS = """
import contextlib, os, resource, sys, time
from reconciler.cli import main
start = time.perf_counter()
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    main(sys.argv[1:])
elapsed = time.perf_counter() - start
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@dataclass
class Generator:
    """Writes the fast-import stream; `rows` is the matrix as of the last commit on main."""

    commits: int
    max_rows: int
    rows: list[str] = field(default_factory=list)
    added: int = 0
    made: int = 0
    pr: int = 0
    last_main: str = ""  # the mark of main's latest commit

    def stream(self) -> Iterator[bytes]:
        while self.made < self.commits:
            yield from self._next()

    def _next(self) -> Iterator[bytes]:
        kind = self.made % 10
        if self.made and self.made % 1000 == 0:
            self.rows.sort()
            yield self._commit("main", "Sort the support matrix", self._matrix())
        elif kind in (3, 7):
            yield self._commit("main", f"Update node manifests ({self.made})", self._other())
        elif kind == 5 and self.commits - self.made >= 2:
            yield from self._merged_pr()
        else:
            self._change_rows()
            self.pr += 1
            yield self._commit("main", f"Add driver image row (#{self.pr})", self._matrix())

    def _merged_pr(self) -> Iterator[bytes]:
        self._change_rows()
        self.pr += 1
        yield self._commit(f"pr-{self.pr}", "Add driver image row", self._matrix())
        subject = f"Merge pull request #{self.pr} from team/pr-{self.pr}"
        yield self._commit("main", subject, self._matrix(), merge=self.made)

    def _change_rows(self) -> None:
        self.added += 1
        n = self.added
        self.rows.append(f"{BRANCHES[n % 4]},{5 + n % 2}.{15 - 7 * (n % 2)}.0-{n}-generic,{OS_TAGS[n % 2]}")
        if len(self.rows) > self.max_rows:
            del self.rows[0]  # the oldest kernel is retired

    def _matrix(self) -> bytes:
        return ("\n".join([HEADER, *self.rows]) + "\n").encode()

    def _other(self) -> bytes:
        return f"apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{self.made % 50}\n".encode()

    def _commit(self, branch: str, message: str, content: bytes, merge: int = 0) -> bytes:
        """One commit on `branch`, from main's latest commit (a PR branch starts there too)."""
        self.made += 1
        when = START + 60 * self.made
        path = MATRIX if content.startswith(HEADER.encode()) else f"nodes/node-{self.made % 50}.yaml"
        lines = [
            f"commit refs/heads/{branch}",
            f"mark :{self.made}",
            f"author Dev {self.made % 7} <dev{self.made % 7}@example.com> {when} +0000",
            f"committer Dev {self.made % 7} <dev{self.made % 7}@example.com> {when} +0000",
            f"data {len(message.encode())}",
            message,
        ]
        lines += [f"from {self.last_main}"] if self.last_main else []
        lines += [f"merge :{merge}"] if merge else []
        header = ("\n".join(lines) + f"\nM 100644 inline {path}\ndata {len(content)}\n").encode()
        if branch == "main":
            self.last_main = f":{self.made}"
        return header + content + b"\n"


def generate(root: Path, commits: int, max_rows: int) -> Generator:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    generator = Generator(commits, max_rows)
    importer = subprocess.Popen(
        ["git", "fast-import", "--quiet"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    assert importer.stdin is not None
    for chunk in generator.stream():
        importer.stdin.write(chunk)
    importer.stdin.close()
    if importer.wait() != 0:
        raise SystemExit("git fast-import failed")
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)
    return generator


def measure(command: list[str], cwd: Path, runs: int) -> tuple[float, int]:
    """Best wall time in seconds and peak RSS in KiB over `runs` fresh runs."""
    results = []
    for _ in range(runs):
        out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
        elapsed, rss = out.stdout.split()
        results.append((float(elapsed), int(rss)))
    return min(t for t, _ in results), max(r for _, r in results)


def gpudrv() -> list[str]:
    script = Path(sys.executable).with_name("gpudrv")
    found = script if script.exists() else shutil.which("gpudrv")
    return [str(found)] if found else [sys.executable, "-m", "reconciler"]


def commands() -> list[tuple[str, list[str]]]:
    log = ["git", "log", "--reverse", "--first-parent", "--diff-merges=first-parent", "--no-renames"]
    log += ["--patch", "--unified=0", "--format=%x01%H%x00%aN%x00%cI%x00%s", "HEAD", "--", MATRIX]
    wrapped = [sys.executable, "-c", WRAPPER]
    return [
        ("git log --oneline (all commits)", [*wrapped, "git", "log", "--oneline"]),
        ("git log -p of the matrix (gpudrv's query)", [*wrapped, *log]),
        ("gpudrv matrix history -o json", [*wrapped, *gpudrv(), "matrix", "history", "-o", "json"]),
        ("gpudrv matrix history (text)", [*wrapped, *gpudrv(), "matrix", "history"]),
        ("  its Python process alone, no startup", [sys.executable, "-c", IN_PROCESS, "matrix", "history"]),
    ]


def report(root: Path, runs: int) -> None:
    print(f"{'command':45} {'best s':>8} {'peak RSS MiB':>13}")
    for name, command in commands():
        seconds, rss = measure(command, root, runs)
        print(f"{name:45} {seconds:8.2f} {rss / 1024:13.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=300, help="matrix size at which old rows retire")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated repository")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpudrv-history-bench-"))
    try:
        generator = generate(root, args.commits, args.rows)
        count = subprocess.run(
            ["git", "rev-list", "--count", "--all"], cwd=root, capture_output=True, text=True, check=True
        )
        lifetimes = subprocess.run(
            [*gpudrv(), "matrix", "history", "-o", "json"], cwd=root, capture_output=True, check=True
        )
        print(f"repository: {root} ({count.stdout.strip()} commits, {generator.added} rows added,")
        stays = len(json.loads(lifetimes.stdout)["rows"])
        print(f"            {len(generator.rows)} in the matrix, {stays} lifetimes)")
        report(root, args.runs)
    finally:
        if not args.keep:
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
