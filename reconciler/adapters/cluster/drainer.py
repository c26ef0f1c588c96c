"""Emptying a node through the eviction API, the way `kubectl drain` does, but saying which budget waits.

Evictions refused by a budget (HTTP 429 with the cause DisruptionBudget) are retried every 5 s until
the deadline; a 429 without that cause is a busy API server, said as such and never blamed on a
budget. Pods are never deleted, except pods with no controller when the user asked for --force.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from reconciler.adapters.cluster.fleet import Eviction, EvictionOutcome, Fleet
from reconciler.core.base.duration import show
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.budget import Role

RETRY_SECONDS = 5.0
POLL_SECONDS = 0.5


class DrainTimeout(Exception):
    """The deadline passed with pods still on the node; the message names what held them."""


@dataclass
class Drain:
    fleet: Fleet
    node: str
    roles: Collection[Role]
    timeout: float
    force: bool = False
    say: Callable[[str], None] = print
    wait: Callable[[str], None] = print
    evicted: list[str] = field(default_factory=list)

    def run(self) -> list[str]:
        """Evict until none of the pods in `roles` is left; the pods evicted, in order."""
        deadline = time.monotonic() + self.timeout
        while True:
            pods = [p for p in self.fleet.pods_on(self.node) if self._ours(p)]
            if not pods:
                return self.evicted
            refusals = self._evict_round(pods)
            left = deadline - time.monotonic()
            if left <= 0:
                raise DrainTimeout(self._stuck(pods, refusals))
            if refusals:
                self.wait(f"{self._why(refusals)}; retrying every {show(RETRY_SECONDS)} ({show(left)} left)")
            time.sleep(min(RETRY_SECONDS if refusals else POLL_SECONDS, max(left, 0.1)))

    def _ours(self, pod: budget.Pod) -> bool:
        kind = budget.role(pod)
        return kind in self.roles or (self.force and kind is Role.UNMANAGED)

    def _evict_round(self, pods: list[budget.Pod]) -> dict[str, Eviction]:
        refusals: dict[str, Eviction] = {}
        for pod in pods:
            if pod.terminating or pod.ref in self.evicted:
                continue  # already on its way out
            if budget.role(pod) is Role.UNMANAGED:
                self.fleet.delete_pod(pod)
                self._done(pod, "deleted (no controller, --force)")
                continue
            answer = self.fleet.evict(pod)
            if answer.outcome in (EvictionOutcome.REFUSED, EvictionOutcome.THROTTLED):
                refusals[pod.ref] = answer
            else:
                self._done(pod, "evicted")
        return refusals

    def _done(self, pod: budget.Pod, how: str) -> None:
        self.evicted.append(pod.ref)
        self.say(f"pod {pod.ref} {how}")

    def _why(self, refusals: dict[str, Eviction]) -> str:
        by_budget = any(answer.outcome is EvictionOutcome.REFUSED for answer in refusals.values())
        budgets = self.fleet.budgets() if by_budget else []  # a busy server is not asked for more
        pods = {p.ref: p for p in self.fleet.pods_on(self.node)} if by_budget else {}
        reasons = []
        for ref, answer in sorted(refusals.items()):
            message = answer.message
            if answer.outcome is EvictionOutcome.THROTTLED:  # no budget's doing: never name one
                reasons.append(f"eviction of {ref} not taken: the API server is throttling (429): {message}")
                continue
            covering = [b for b in budgets if ref in pods and b.covers(pods[ref])]
            named = "; ".join(
                f"PDB {b.ref} allows {b.disruptions_allowed} disruptions ({b.numbers()})" for b in covering
            )
            reasons.append(f"eviction of {ref} refused: {named or message}")
        return "; ".join(reasons)

    def _stuck(self, pods: list[budget.Pod], refusals: dict[str, Eviction]) -> str:
        if refusals:
            return f"drain of {self.node} timed out after {show(self.timeout)}: {self._why(refusals)}"
        names = ", ".join(p.ref for p in pods)
        return f"drain of {self.node} timed out after {show(self.timeout)} waiting for pods to go: {names}"
