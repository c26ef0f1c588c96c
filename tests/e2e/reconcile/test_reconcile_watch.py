"""The node watch against the real API server: a resourceVersion it has forgotten is 410 Gone, and the
watch lists again instead of failing."""

from __future__ import annotations

import queue
from typing import Any

from reconciler.adapters import kube
from reconciler.adapters.cluster import node_watch
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.faults import restart_apiserver


class Forgetful(node_watch.NodeWatch):
    """Its first list claims a resourceVersion long compacted away, as after a long disconnect."""

    lists = 0

    def _list(self) -> str:
        version = super()._list()
        self.lists += 1
        return "1" if self.lists == 1 else version


def test_a_forgotten_resource_version_is_gone_and_the_watch_lists_again(
    kube: Kube, nodes: FakeNodes, unique: str
) -> None:
    # Version "1" must really be forgotten. The API server's watch cache serves every event since it
    # first listed the nodes, and on a fresh cluster that was at revision 1: it would replay them all.
    # Restarted, it lists again at today's revision, as a long-running server has long since moved on.
    restart_apiserver()
    gateway = kube_gateway(kube)
    posted: queue.Queue[Any] = queue.Queue()
    restarts: list[str] = []
    watcher = Forgetful(gateway, posted.put, restarts.append).start()
    try:
        first = posted.get(timeout=30)
        second = posted.get(timeout=30)  # the list again, after 410 Gone
        assert isinstance(first, node_watch.Listed) and isinstance(second, node_watch.Listed)
        assert restarts == ["gone"]
        # And the watch from the fresh list's version sees a node join.
        nodes.add_gpu(f"{unique}-after-gone")
        while True:
            event = posted.get(timeout=30)
            if isinstance(event, node_watch.Changed) and event.node.name == f"{unique}-after-gone":
                break
    finally:
        watcher.stop()


def kube_gateway(cluster: Kube) -> kube.Gateway:
    return kube.connect(kube.Options(kubeconfig=str(cluster.kubeconfig)))
