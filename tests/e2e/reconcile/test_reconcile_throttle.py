"""Issue 30, item 1, in the loop: the node list and the node watch of `gpudrv reconcile` throttled by
API Priority and Fairness (the fault proxy answers 429 with Retry-After in the API server's place). The
loop waits as asked, counts the waits, and still reports the nodes."""

from __future__ import annotations

from pathlib import Path

from tests.e2e import faults
from tests.e2e.conftest import FakeNodes
from tests.e2e.faults import Exchange
from tests.e2e.reconcile.conftest import FAST, Loops, Remote, add_node_now, wait_until


def test_a_throttled_list_and_watch_are_waited_out(
    remote: Remote, loops: Loops, nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    lists: list[float] = []  # when each node list came; the first two are throttled for 1 s
    watches: list[float] = []  # when each watch came; the first is throttled for 3 s

    def busy(exchange: Exchange) -> faults.Answer | None:
        if exchange.method != "GET" or exchange.path != "/api/v1/nodes":
            return None
        if "watch=true" in exchange.query or "watch=True" in exchange.query:
            watches.append(exchange.at)
            return faults.priority_and_fairness_429(3) if len(watches) == 1 else None
        lists.append(exchange.at)
        return faults.priority_and_fairness_429(1) if len(lists) <= 2 else None

    with faults.proxy() as proxy:
        proxy.refuse = busy
        loop = loops.start(
            "a", "--no-leader-election", *FAST, kubeconfig=proxy.kubeconfig(tmp_path / "kc"), remote=remote
        )
        wait_until("the loop ready", lambda: loop.get("/readyz")[0] == 200, 60, [loop])
        name = f"{unique}-throttled"
        add_node_now(nodes, name)
        wait_until(
            "the new node reported",
            lambda: (
                any(s.get("node") == name for s in loop.series("gpudrv_node_image_missing"))
                or (loop.value("gpudrv_gpu_nodes") or 0) >= 1
            ),
            60,
            [loop],
        )
        wait_until("a second watch", lambda: len(watches) >= 2, 30, [loop])
        assert lists[1] - lists[0] >= 0.9 and lists[2] - lists[1] >= 0.9  # the list waited as asked
        assert watches[1] - watches[0] >= 2.9  # the watch too: Retry-After over its own backoff
        assert loop.value("gpudrv_api_server_waits_total", status="429") == 2
        assert (loop.value("gpudrv_watch_restarts_total", reason="error") or 0) >= 1
        assert "the API server asked to wait 1 s (429)" in loop.output()
        assert "PDB" not in loop.output()
        assert loop.stop() == 0
