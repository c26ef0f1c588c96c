"""Issue 30, item 1: a busy API server on the real control plane. The fault proxy answers in the API
server's place with API Priority and Fairness's 429 and `Retry-After` (faults.priority_and_fairness_429)
on lists, patches, evictions and watches; the runs finish as they would have, say that the server
asked to wait, and never call it a disruption budget's doing. That an eviction a real
PodDisruptionBudget refuses (its cause DisruptionBudget) is still named as such is
test_upgrade_live.py's test_drain_command."""

from __future__ import annotations

from collections import Counter

from tests.e2e import faults
from tests.e2e.faults import Exchange
from tests.e2e.test_faults_live import NODE, Faulty, Writes, assert_left_clean, faulty, report
from tests.e2e.test_upgrade_live import merged_upgrade

__all__ = ["faulty"]  # the fixture, shared with the other fault tests


class Throttle:
    """Refuse the first `times` requests of each kind `kinds` picks, then let them through."""

    def __init__(self, times: int, seconds: int = 1) -> None:
        self.times, self.seconds = times, seconds
        self.refused: Counter[str] = Counter()

    def kind(self, exchange: Exchange) -> str | None:
        if exchange.method == "GET" and exchange.path == "/api/v1/nodes":
            return "node list"
        if exchange.node_patch(NODE) is not None:
            return "node patch"
        if exchange.method == "POST" and exchange.path.endswith("/eviction"):
            return "eviction"
        return None

    def __call__(self, exchange: Exchange) -> faults.Answer | None:
        kind = self.kind(exchange)
        if kind is None or self.refused[kind] >= self.times:
            return None
        self.refused[kind] += 1
        return faults.priority_and_fairness_429(self.seconds)


def test_a_throttled_upgrade_finishes_and_blames_no_budget(faulty: Faulty) -> None:
    lab, proxy = faulty.lab, faulty.proxy
    merged_upgrade(lab, min_available=3)
    throttle = Throttle(times=3)
    proxy.refuse = throttle
    mark = proxy.mark()
    done = faulty.apply()
    proxy.refuse = None
    assert done.returncode == 0, done.stdout
    assert throttle.refused == Counter({"node list": 3, "node patch": 3, "eviction": 3}), throttle.refused
    assert "the API server asked to wait 1 s (429)" in done.stdout, done.stdout
    blamed = [line for line in done.stdout.splitlines() if "refused" in line or "throttling" in line]
    assert blamed == [], blamed  # every throttled request was waited out, none blamed on a budget
    Writes.of([e for e in proxy.since(mark) if e.status != 429]).assert_each_step_once()
    assert_left_clean(lab)
    report("throttled-upgrade", dict(throttle.refused))


def test_a_throttled_read_only_command_waits_it_out(faulty: Faulty) -> None:
    lab, proxy = faulty.lab, faulty.proxy
    throttle = Throttle(times=2)
    proxy.refuse = throttle
    process = faulty.start("audit", "--matrix", "matrix/support-matrix.csv")
    out, _ = process.communicate(timeout=120)
    proxy.refuse = None
    assert throttle.refused["node list"] == 2
    assert out.count("gpudrv: waiting for the cluster: the API server asked to wait 1 s (429)") == 2, out
    assert (process.returncode, out.splitlines()[-1]) == (0, "OK"), out  # the answer it would have given
    assert lab.labels(NODE)
