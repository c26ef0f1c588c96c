"""Issue 30, item 2: `gpudrv apply` on a GPU Operator fleet killed at each of its writes (each hold,
the server-side apply of the ClusterPolicy, each release), then run again. Against the real operator:
whatever the kill point, the rerun holds every moving node but the canary before anything moves, and
the node watch never shows more nodes in progress than the canary or the batch (1 here).

Each round is one upgrade, alternating between the two driver versions, so no round has to undo the
one before it. gpudrv talks to the API server through the fault proxy, which kills it the moment the
API server has taken its k-th write (before gpudrv hears the answer)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

from tests.conftest import gpudrv_command, gpudrv_env
from tests.e2e import faults
from tests.e2e.faults import Exchange
from tests.e2e.gpu_operator import SKIP_LABEL, GpuOperator, StateRecorder
from tests.e2e.test_operator_rollout import NEW, OLD, Fleet, fleet, leftovers, on_image, rows, start_nodes

__all__ = ["fleet"]  # the fixture, shared with the rollout tests

IDLE = {None, "upgrade-done", "upgrade-required"}  # every other state is a node the operator is moving
WRITES = ("hold 1", "hold 2", "apply", "release 1", "release 2")  # a clean run's writes, 3 nodes


def is_write(exchange: Exchange) -> bool:
    """One of the rollout's writes: a node's hold or release, or the ClusterPolicy applied."""
    return exchange.method == "PATCH" and (
        exchange.path.startswith("/api/v1/nodes/") or "/clusterpolicies/" in exchange.path
    )


def killed_after(fleet: Fleet, proxy: faults.Proxy, kubeconfig: Path, writes: int) -> tuple[int, str]:
    """Runs the rollout through the proxy and SIGKILLs it once the API server has taken `writes`
    writes; its exit status and output."""
    process = subprocess.Popen(
        [*gpudrv_command(), *fleet.args("--canary", "1", "--batch", "1")],
        cwd=fleet.root,
        env=gpudrv_env({"KUBECONFIG": str(kubeconfig)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    taken: list[Exchange] = []
    killed = threading.Event()

    def kill(exchange: Exchange) -> None:
        if exchange.ok and is_write(exchange) and not killed.is_set():
            taken.append(exchange)
            if len(taken) == writes:
                killed.set()
                process.send_signal(signal.SIGKILL)

    proxy.after = kill
    try:
        out, _ = process.communicate(timeout=600)
    finally:
        proxy.after = None
    return process.returncode, out


def most_in_progress(recorder: StateRecorder, names: list[str]) -> int:
    """The largest number of nodes the operator was moving at once, from the node watch."""
    state: dict[str, str | None] = dict.fromkeys(names)
    most = 0
    for transition in recorder.transitions:
        if transition.node in state:
            state[transition.node] = transition.state
            most = max(most, sum(value not in IDLE for value in state.values()))
    return most


def test_killed_at_each_write_a_rerun_stages_from_where_it_was(
    fleet: Fleet, gpu_operator: GpuOperator, tmp_path: Path
) -> None:
    names = start_nodes(fleet, gpu_operator, 3)
    figures: dict[str, dict[str, float | int]] = {}
    with faults.proxy() as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "proxy-kubeconfig")
        for round_, point in enumerate(WRITES):
            version = NEW if round_ % 2 == 0 else OLD
            fleet.write(version, rows(OLD) + rows(NEW))
            with gpu_operator.recording(fleet.nodes.selector) as recorder:
                began = time.monotonic()
                code, out = killed_after(fleet, proxy, kubeconfig, round_ + 1)
                assert code == -signal.SIGKILL, f"{point}: {out}"
                killed = time.monotonic() - began
                again = fleet.apply("--canary", "1", "--batch", "1")
                assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
                assert again.stdout.rstrip().endswith("audit: OK"), again.stdout
                for name in names:
                    recorder.caught_up(name, "upgrade-done", timeout=60)
            most = most_in_progress(recorder, names)
            assert most == 1, f"killed after {point}: {most} nodes at once {recorder.transitions}"
            for name in names:
                assert on_image(gpu_operator, name, version), f"{point}: {name} not on {version}"
            assert leftovers(gpu_operator, names) == [], point
            assert all(gpu_operator.node(n)["metadata"]["labels"].get(SKIP_LABEL) is None for n in names)
            figures[point] = {"killed_after_s": round(killed, 1), "most_in_progress": most}
    print(f"\nkill points (3 nodes, canary 1, batch 1): {figures}")
