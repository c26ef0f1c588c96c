#!/usr/bin/env python3
"""Simulate a kernel bump on a pool of GPU nodes, without and with gpudrv's reboot gate.

    .venv/bin/python benchmarks/kernel_bump.py [--nodes 20] [--add-after 3] [--period 0] [--keep]

It starts a control plane of its own with scripts/cluster (state in $GPUDRV_CLUSTER_STATE, by default
~/.cache/gpudrv/state-kernel-bump, never the e2e tier's) unless one is running there already, and
stops the one it started at the end unless --keep. The pool is --nodes kwok nodes with the lab's
labels: one OS (ubuntu 22.04), one driver (550.90.07), running kernel K1 (5.15.0-119-generic), whose
image is the one row of a matrix in a temporary git repository. Then, for each scenario, on a fresh pool:

1. The next kernel K2 (5.15.0-122-generic) is published on every node as NFD publishes it from
   `gpudrv probe`'s features.d file: the label gpudrv.dev/kernel-version.next=K2. Here the label is set
   directly; the path through the real NFD is the e2e tier's. No image for K2 is in the matrix.
2. A simulated reboot daemon, as kured with --concurrency 1, ticks: each tick the nodes that need a
   reboot (their next kernel differs from the running one: kured's sentinel) ask the gate, and one of
   them reboots. A reboot moves feature.node.kubernetes.io/kernel-version.full to K2 and drops the
   next-kernel label, as NFD relabels a node that came back on its new kernel.
   - A, "the operator alone": no gate. Every node reboots in turn.
   - B, "with the gate": before each reboot the daemon asks gpudrv, as kured asks Prometheus with
     --prometheus-url --alert-filter-regexp --alert-filter-match-only (cluster-wide: one matching
     alert holds every node; docs/research/kured.md). The gate is `gpudrv audit -o json`: any
     NEXT-MISSING finding holds every reboot. After --add-after held checks the platform team adds
     the K2 row (`gpudrv matrix add`, committed), the gate opens and the nodes reboot in turn.
3. `gpudrv audit -o json` (live, the real CLI) says how many nodes are MISSING: a MISSING node is
   one that lost its driver (its driver pod would be in ImagePullBackOff).

Every count in the report is gpudrv's own answer (`missing_count` and the findings of its JSON); the
script only moves labels and reads those answers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "scripts" / "cluster"
GPUDRV = Path(sys.executable).with_name("gpudrv")
POOL_LABEL = "gpudrv.dev/benchmark"
POOL = "kernel-bump"
SELECTOR = f"{POOL_LABEL}={POOL}"
PREFIX = "bump-"

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
NEXT_KERNEL = "gpudrv.dev/kernel-version.next"
GPU_PRESENT = "nvidia.com/gpu.present"
K1 = "5.15.0-119-generic"
K2 = "5.15.0-122-generic"
OS_ID, OS_VERSION, OS_TAG = "ubuntu", "22.04", "ubuntu22.04"
DRIVER = ("550", "90", "07")
NEXT_MISSING = "NEXT-MISSING"
TIMEOUT = 30  # seconds, each API request


# --- the pool ---------------------------------------------------------------------------------------


def node_name(index: int) -> str:
    return f"{PREFIX}{index:02d}"


def node_labels(index: int) -> dict[str, str]:
    """The lab's labels (examples/lab-node-3.yaml), on kernel K1, and the pool's label."""
    major, minor, rev = DRIVER
    return {
        "kubernetes.io/hostname": node_name(index),
        "type": "kwok",
        POOL_LABEL: POOL,
        GPU_PRESENT: "true",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        KERNEL: K1,
        "feature.node.kubernetes.io/system-os_release.ID": OS_ID,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": OS_VERSION,
    }


def node_document(index: int) -> dict[str, Any]:
    """A kwok node: kwok makes it Ready and renews its lease."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node_name(index),
            "labels": node_labels(index),
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
    }


# --- the simulated reboot daemon (pure: labels in, a decision out) ----------------------------------


@dataclass(frozen=True)
class Gate:
    """gpudrv's answer to "may a node reboot now?": closed while any node's next kernel has no image."""

    open: bool
    blocking: tuple[str, ...] = ()  # the nodes with a NEXT-MISSING finding


@dataclass(frozen=True)
class Decision:
    reboot: str | None  # the node that reboots this tick
    held: tuple[str, ...] = ()  # the nodes whose reboot the gate held this tick


def needs_reboot(labels: Mapping[str, str]) -> bool:
    """kured's sentinel, as the labels tell it: a next kernel that is not the running one."""
    upcoming = labels.get(NEXT_KERNEL)
    return upcoming is not None and upcoming != labels.get(KERNEL)


def decide(pool: Mapping[str, Mapping[str, str]], gate: Gate | None) -> Decision:
    """One tick of a kured-like daemon with --concurrency 1: the nodes that need a reboot check the
    blockers (the gate; None: no gate) before the lock; if none blocks, the first by name reboots."""
    waiting = sorted(name for name, labels in pool.items() if needs_reboot(labels))
    if not waiting:
        return Decision(None)
    if gate is not None and not gate.open:
        return Decision(None, tuple(waiting))
    return Decision(waiting[0])


def reboot_patch(labels: Mapping[str, str]) -> dict[str, str | None]:
    """The label change of a node that came back on its next kernel: running kernel moved, next dropped."""
    return {KERNEL: labels[NEXT_KERNEL], NEXT_KERNEL: None}


# --- gpudrv's answers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Audit:
    """What one `gpudrv audit -o json` said."""

    nodes: int
    missing: int  # gpudrv's missing_count: nodes whose image for the running kernel is not there
    missing_nodes: tuple[str, ...]
    next_missing_nodes: tuple[str, ...]
    exit_code: int
    seconds: float = 0.0


def read_audit(text: str, exit_code: int, seconds: float = 0.0) -> Audit:
    """gpudrv audit's JSON document (render/audit.py as_json); ValueError when it is not one."""
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("kind") != "audit":
        raise ValueError("not a gpudrv audit document")
    findings = document["findings"]

    def named(status: str) -> tuple[str, ...]:
        return tuple(sorted({finding["node"] for finding in findings if finding["status"] == status}))

    return Audit(
        nodes=int(document["node_count"]),
        missing=int(document["missing_count"]),
        missing_nodes=named("MISSING"),
        next_missing_nodes=named(NEXT_MISSING),
        exit_code=exit_code,
        seconds=seconds,
    )


def gate_of(audit: Audit) -> Gate:
    """The gate, as a kured alert filter matching only gpudrv's next-kernel alert: closed while gpudrv
    reports any NEXT-MISSING node, wherever it is (kured's alert check is cluster-wide)."""
    return Gate(not audit.next_missing_nodes, audit.next_missing_nodes)


# --- one scenario ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    gated: bool
    before: Audit | None = None
    after: Audit | None = None
    ticks: int = 0
    rebooted: list[str] = field(default_factory=list)
    held_nodes: set[str] = field(default_factory=set)
    held_checks: int = 0  # gate checks that said hold
    gate_checks: list[Audit] = field(default_factory=list)
    row_added_after: int | None = None  # held checks before the K2 row went in
    seconds: float = 0.0


@dataclass
class Scene:
    api: Any
    work: Path
    env: dict[str, str]
    nodes: int

    @property
    def matrix(self) -> Path:
        return self.work / "matrix" / "support-matrix.csv"

    def gpudrv(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GPUDRV), *args], cwd=self.work, env=self.env, capture_output=True, text=True, check=False,
            timeout=300,
        )  # fmt: skip

    def audit(self) -> Audit:
        started = time.monotonic()
        done = self.gpudrv("audit", "--matrix", str(self.matrix), "-l", SELECTOR, "-o", "json")
        took = time.monotonic() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"gpudrv audit failed (exit {done.returncode}): {done.stderr.strip()}")
        return read_audit(done.stdout, done.returncode, took)

    def fresh(self) -> None:
        """The pool on K1 and the matrix with K1's row only, committed."""
        self.api.delete_collection_node(label_selector=SELECTOR, _request_timeout=TIMEOUT)
        wait("the old pool gone", lambda: not self.pool(), 60)
        for index in range(self.nodes):
            self.api.create_node(node_document(index), _request_timeout=TIMEOUT)
        self.matrix.parent.mkdir(parents=True, exist_ok=True)
        self.matrix.write_text(f"driver_branch,kernel,os_tag\n{DRIVER[0]},{K1},{OS_TAG}\n")
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", f"matrix: {DRIVER[0]} on {K1} only")

    def pool(self) -> dict[str, dict[str, str]]:
        listed = self.api.list_node(label_selector=SELECTOR, _request_timeout=TIMEOUT)
        return {item.metadata.name: dict(item.metadata.labels or {}) for item in listed.items}

    def label(self, name: str, labels: Mapping[str, str | None]) -> None:
        self.api.patch_node(name, {"metadata": {"labels": dict(labels)}}, _request_timeout=TIMEOUT)

    def publish_next(self) -> None:
        """What NFD does with `gpudrv probe`'s features.d file, set directly."""
        for name in sorted(self.pool()):
            self.label(name, {NEXT_KERNEL: K2})

    def add_row(self) -> None:
        """The platform team builds K2's image and adds its row."""
        done = self.gpudrv("matrix", "add", "--matrix", str(self.matrix), DRIVER[0], K2, OS_TAG)
        if done.returncode != 0:
            raise SystemExit(f"gpudrv matrix add failed (exit {done.returncode}): {done.stderr.strip()}")
        git(self.work, "commit", "-q", "-am", f"matrix: {DRIVER[0]} on {K2}")


def run(scene: Scene, outcome: Outcome, add_after: int, period: float) -> Outcome:
    scene.fresh()
    scene.publish_next()
    outcome.before = scene.audit()
    if len(outcome.before.next_missing_nodes) != scene.nodes:
        raise SystemExit(
            f"{outcome.name}: before the bump gpudrv audit reports {len(outcome.before.next_missing_nodes)} "
            f"of {scene.nodes} nodes NEXT-MISSING, not all: it does not see the next kernel"
        )
    started = time.monotonic()
    limit = 4 * scene.nodes + add_after + 10
    while True:
        pool = scene.pool()
        gate = None
        if outcome.gated and any(needs_reboot(labels) for labels in pool.values()):
            if outcome.row_added_after is None and outcome.held_checks >= add_after:
                scene.add_row()
                outcome.row_added_after = outcome.held_checks
                log(f"  the platform team added the {K2} row after {outcome.held_checks} held checks")
            check = scene.audit()
            outcome.gate_checks.append(check)
            gate = gate_of(check)
        decision = decide(pool, gate)
        if decision.reboot is None and not decision.held:
            break
        outcome.ticks += 1
        if decision.reboot is not None:
            scene.label(decision.reboot, reboot_patch(pool[decision.reboot]))
            outcome.rebooted.append(decision.reboot)
        else:
            outcome.held_checks += 1
            outcome.held_nodes.update(decision.held)
            log(f"  tick {outcome.ticks}: gate closed ({len(gate.blocking) if gate else 0} NEXT-MISSING)")
        if outcome.ticks > limit:
            raise SystemExit(f"{outcome.name}: no end after {limit} ticks")
        time.sleep(period)
    outcome.seconds = time.monotonic() - started
    outcome.after = scene.audit()
    return outcome


# --- the report ---------------------------------------------------------------------------------------------


def summary(nodes: int, unguarded: Audit, guarded: Audit) -> str:
    """The README's line, from gpudrv's counts after each scenario."""
    return (
        f"{nodes}-node pool, kernel {K1} → {K2} with no {K2} image: without the gate "
        f"{unguarded.missing} of {unguarded.nodes} nodes lose their driver; with it {guarded.missing} "
        "(reboots held until the image is in the matrix)"
    )


def report(nodes: int, outcomes: Iterable[Outcome], command: str) -> list[str]:
    outcomes = list(outcomes)
    first = outcomes[0].before
    assert first is not None
    lines = [
        f"pool: {nodes} kwok GPU nodes, {OS_ID} {OS_VERSION}, driver {'.'.join(DRIVER)}; "
        f"kernel K1 {K1} (its image in the matrix) → K2 {K2} (no image)",
        f"next kernel: {NEXT_KERNEL}={K2} set directly on each node, as NFD publishes it from gpudrv "
        "probe's features.d file (the path through the real NFD is tested in the e2e tier)",
        f"before the bump, gpudrv audit: {first.nodes} GPU nodes, {first.missing} MISSING, "
        f"{len(first.next_missing_nodes)} NEXT-MISSING",
        "",
        "scenario                rebooted  lost their driver  reboots held  held gate checks  "
        "gate checks  wall s",
    ]
    for outcome in outcomes:
        after = outcome.after
        assert after is not None
        held = f"{len(outcome.held_nodes)}" if outcome.gated else "-"
        checks = f"{outcome.held_checks}" if outcome.gated else "-"
        total = f"{len(outcome.gate_checks)}" if outcome.gated else "-"
        lines.append(
            f"{outcome.name:<24}{len(outcome.rebooted):>3}/{nodes:<5}{after.missing:>10} MISSING"
            f"{held:>10}{checks:>18}{total:>13}{outcome.seconds:>8.1f}"
        )
    lines.append("")
    for outcome in outcomes:
        after = outcome.after
        assert after is not None
        lines.append(
            f"{outcome.name}: after, gpudrv audit: {after.missing} MISSING, "
            f"{len(after.next_missing_nodes)} NEXT-MISSING (exit {after.exit_code})"
        )
        if outcome.gated and outcome.gate_checks:
            seconds = statistics.median(check.seconds for check in outcome.gate_checks)
            lines.append(
                f"{outcome.name}: the {K2} row added after {outcome.row_added_after} held gate checks; "
                f"a gate check (gpudrv audit -o json) took {seconds:.2f} s (median)"
            )
    unguarded, guarded = outcomes[0].after, outcomes[-1].after
    assert unguarded is not None and guarded is not None
    lines += ["", f"summary: {summary(nodes, unguarded, guarded)}"]
    lines.append(f"command: {command}")
    lines.append(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    return lines


# --- main ---------------------------------------------------------------------------------------------------


def git(work: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=work, check=True, timeout=60,
    )  # fmt: skip


def wait(what: str, predicate: Any, timeout: float) -> None:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def log(message: str) -> None:
    print(f"[kernel-bump] {message}", file=sys.stderr, flush=True)


def cluster_up(env: dict[str, str]) -> tuple[Path, bool]:
    """(kubeconfig, was it running already)."""
    running = (
        subprocess.run([str(CLUSTER), "status"], env=env, capture_output=True, check=False).returncode == 0
    )
    up = subprocess.run([str(CLUSTER), "up"], env=env, capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise SystemExit(f"scripts/cluster up failed:\n{up.stderr[-2000:]}")
    return Path(up.stdout.split()[-1]), running


def core_api(kubeconfig: Path) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20, help="GPU nodes in the pool (default 20)")
    parser.add_argument(
        "--add-after", type=int, default=3, help="held gate checks before the K2 row is added (default 3)"
    )
    parser.add_argument("--period", type=float, default=0.0, help="seconds between the daemon's ticks")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and the pool running")
    args = parser.parse_args()
    if args.nodes < 1 or args.add_after < 0 or args.period < 0:
        parser.error("--nodes must be at least 1, --add-after and --period at least 0")
    if not GPUDRV.exists():
        raise SystemExit(f"no gpudrv beside {sys.executable}: pip install -e . in this venv")
    state = os.environ.get("GPUDRV_CLUSTER_STATE") or str(
        Path.home() / ".cache" / "gpudrv" / "state-kernel-bump"
    )
    env = {**os.environ, "GPUDRV_CLUSTER_STATE": state}
    log(f"control plane in {state}")
    kubeconfig, was_running = cluster_up(env)
    env = {**env, "KUBECONFIG": str(kubeconfig)}
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GPUDRV_CONFIG"):
        env.pop(name, None)
    command = "benchmarks/kernel_bump.py " + " ".join(sys.argv[1:])
    api = core_api(kubeconfig)
    work = Path(tempfile.mkdtemp(prefix="gpudrv-kernel-bump-"))
    try:
        git(work, "init", "-q", "-b", "main")
        scene = Scene(api, work, env, args.nodes)
        outcomes = []
        for name, gated in (("A: the operator alone", False), ("B: with the gate", True)):
            log(f"{name}: {args.nodes} nodes on {K1}, next kernel {K2} published")
            outcomes.append(run(scene, Outcome(name, gated), args.add_after, args.period))
        lines = report(args.nodes, outcomes, command.strip())
    finally:
        if not args.keep:
            api.delete_collection_node(label_selector=SELECTOR, _request_timeout=TIMEOUT)
            if not was_running:
                subprocess.run([str(CLUSTER), "down"], env=env, capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
