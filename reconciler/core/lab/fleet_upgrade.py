"""The fleet's upgrade in rounds: each round reads the fleet, settles the nodes no wait can help and
drives the next batch (upgrade.batch) in parallel, each node a core/lab/node_run.py NodeRun, until every
declared node is done, blocked or failed. The ports and settings are core/lab/executor.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.core.lab.executor import (
    WAIT_SECONDS,
    Host,
    Options,
    Reporter,
    UpgradeFleet,
)
from reconciler.core.lab.node_run import NodeRun
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.budget import Pod
from reconciler.core.upgrades.upgrade import (
    GateName,
    Images,
    NodePlan,
    RunResult,
)


@dataclass(frozen=True)
class Round:
    """One consistent read: the plans of the declared nodes, their pods and the budgets."""

    plans: list[NodePlan]
    pods: Mapping[str, Sequence[Pod]]
    budgets: Sequence[budget.Budget]


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # nvidia.com/gpu-driver-upgrade.skip=true

    @property
    def ok(self) -> bool:
        """Skipped nodes are left alone on purpose: not a finding."""
        return not self.blocked and not self.failed

    @property
    def settled(self) -> set[str]:
        return self.failed.keys() | self.blocked.keys() | set(self.done) | set(self.skipped)


def waits_on_budget(plan: NodePlan) -> bool:
    """Blocked only by budgets with no room now: worth waiting for while other nodes recover."""
    return all(gate.name is GateName.BUDGET for gate in plan.gates if not gate.ok)


@dataclass
class FleetUpgrade:
    """Rounds until every declared node is done, blocked or failed: each round reads the fleet,
    settles the nodes no wait can help, and drives the next batch (upgrade.batch) in parallel."""

    fleet: UpgradeFleet
    host: Host
    images: Images
    options: Options
    read: Callable[[], Round]
    owner: Callable[[], str]  # a new lease holder name for each node run
    reporter: Callable[[str], Reporter]
    say: Callable[[str], None] = print
    outcome: Outcome = field(default_factory=Outcome)

    def run(self) -> Outcome:
        outcome = self.outcome
        recovering_until = float("-inf")  # after a node finishes, its pods need time to be healthy again
        while True:
            current = self.read()
            settled = outcome.settled
            plans = [p for p in current.plans if p.node not in settled]
            if not plans and not settled:
                self.say("nothing to upgrade: every declared node runs its desired driver")
            self._record_blocked([p for p in plans if p.blocked and not waits_on_budget(p)])
            plans = [p for p in plans if p.node not in outcome.settled]
            ready = upgrade.batch(plans, self.options.max_parallel, current.pods, current.budgets)
            if ready:
                self._run_batch(ready)
                if outcome.done:
                    recovering_until = self.host.monotonic() + self.options.drain_timeout
                continue
            waiting = [p for p in plans if p.blocked]
            if waiting and self.host.monotonic() < recovering_until:
                self.host.sleep(WAIT_SECONDS)  # a budget this run used up may have room again soon
                continue
            self._record_blocked(waiting)
            return outcome

    def _record_blocked(self, plans: list[NodePlan]) -> None:
        for plan in plans:
            why = "; ".join(g.detail for g in plan.gates if not g.ok)
            if plan.skipped:
                self.outcome.skipped.append(plan.node)
                self.say(f"{plan.node}: {why}")
                continue
            self.outcome.blocked[plan.node] = why
            held = "left cordoned" if plan.cordoned else "not cordoned"
            self.say(f"{plan.node}: blocked, {held}: {why}")

    def node_run(self, plan: NodePlan) -> NodeRun:
        return NodeRun(
            self.fleet, self.host, plan, self.images, self.options,
            owner=self.owner(), report=self.reporter(plan.node),
        )  # fmt: skip

    def _run_batch(self, ready: list[NodePlan]) -> None:
        runs = [self.node_run(plan) for plan in ready]
        if len(runs) == 1:
            results = [runs[0].run()]
        else:
            with ThreadPoolExecutor(max_workers=len(runs)) as pool:
                results = list(pool.map(NodeRun.run, runs))
        for plan, (status, reason) in zip(ready, results, strict=True):
            if status is RunResult.DONE:
                self.outcome.done.append(plan.node)
            elif status is RunResult.FAILED:
                self.outcome.failed[plan.node] = reason
            else:
                self.outcome.blocked[plan.node] = reason
