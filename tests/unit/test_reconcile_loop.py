"""The reconcile loop (core/incluster/reconcile_loop.py) on plain data: every decision of a turn.

The ports are plain Python: a clock the tests move, an inbox the tests fill (an empty one waits by
moving the clock), a repository of commits, a cluster holding a contract, a lease the tests hand over,
an applier whose runs end when told, and an output that records what the loop wrote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from reconciler.core.contract.operator import Contract
from reconciler.core.images.tags import KERNEL, NEXT_KERNEL, Node
from reconciler.core.incluster.fleetwatch import NO_STATE, Change, Kind
from reconciler.core.incluster.reconcile_loop import APPLY_GRACE, LOGGED_CHANGES, UPGRADE_STATES, WAIT, Loop
from reconciler.core.incluster.reconcile_ports import (
    AVAILABLE,
    MISSING,
    CommitFetched,
    Event,
    Figures,
    LeaseNews,
    Level,
    LoopSettings,
    Message,
    NodeChanged,
    NodeDeleted,
    NodesListed,
    Ports,
    Snapshot,
    StopRequested,
    Tally,
    Unreadable,
    Watched,
)
from tests.unit.test_fleetwatch import LAB, OK_TAG, gpu

RESYNC = 300.0
REFRESH = 1800.0
OTHER_KERNEL = "6.1.0-9-generic"
LACKED = "550-6.1.0-9-generic-ubuntu22.04"  # the tag a node on OTHER_KERNEL needs


def snapshot(
    commit: str, tags: frozenset[str] = frozenset({OK_TAG}), fleet: str | None = "fleet"
) -> Snapshot:
    return Snapshot(commit, "matrix/support-matrix.csv", tags, fleet, None, 1_700_000_000)


def lacking(name: str) -> Node:
    return gpu(name, **{KERNEL: OTHER_KERNEL})


@dataclass
class Clock:
    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class Inbox:
    clock: Clock
    queued: list[Message] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    def take(self, wait: float) -> list[Message]:
        self.waits.append(wait)
        if not self.queued:
            self.clock.now += wait  # nothing came: the wait passed
            return []
        batch, self.queued = self.queued, []
        return batch


@dataclass
class Repository:
    commits: dict[str, Snapshot | str] = field(default_factory=dict)  # a str: why it is refused
    loads: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)

    def load(self, commit: str) -> Snapshot:
        self.loads.append(commit)
        found = self.commits[commit]
        if isinstance(found, str):
            raise Unreadable(found)
        return found

    def restore(self, commit: str) -> None:
        self.restored.append(commit)


@dataclass
class Cluster:
    contract_now: Contract | str = LAB  # a str: why it cannot be read
    reads: int = 0
    watching: list[int] = field(default_factory=list)  # the generations watched, in order
    unwatched: int = 0

    def contract(self, operator_version: str | None) -> Contract:
        self.reads += 1
        if isinstance(self.contract_now, str):
            raise Unreadable(self.contract_now)
        return self.contract_now

    def watch(self, generation: int) -> None:
        self.watching.append(generation)

    def unwatch(self) -> None:
        self.unwatched += 1


@dataclass
class Lease:
    leading: bool = True

    def is_leading(self) -> bool:
        return self.leading


@dataclass
class Run:
    commit: str
    status: int | None = None
    interrupted: list[float] = field(default_factory=list)

    def poll(self) -> int | None:
        return self.status

    def interrupt(self, grace: float) -> int:
        self.interrupted.append(grace)
        return 130


@dataclass
class Applier:
    runs: list[Run] = field(default_factory=list)
    broken: str | None = None

    def start(self, snapshot: Snapshot) -> Run:
        if self.broken:
            raise Unreadable(self.broken)
        self.runs.append(Run(snapshot.commit))
        return self.runs[-1]


@dataclass
class Output:
    lines: list[tuple[Level, str]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    counts: Counter[tuple[Tally, str | None]] = field(default_factory=Counter)
    observed: list[str] = field(default_factory=list)
    figures: Figures | None = None
    forced: list[str] = field(default_factory=list)  # the commits put in force
    audits: int = 0

    def log(self, level: Level, text: str) -> None:
        self.lines.append((level, text))

    def change(self, change: Change) -> None:
        self.changes.append(change)

    def event(self, event: Event) -> None:
        self.events.append(event)

    def count(self, tally: Tally, label: str | None = None) -> None:
        self.counts[tally, label] += 1

    def observe(self, scope: str, seconds: float) -> None:
        self.observed.append(scope)

    def export(self, figures: Figures) -> None:
        self.figures = figures

    def in_force(self, snapshot: Snapshot) -> None:
        self.forced.append(snapshot.commit)

    def audited(self) -> None:
        self.audits += 1

    def errors(self) -> list[str]:
        return [text for level, text in self.lines if level is Level.ERROR]


class World:
    """A loop and its ports."""

    def __init__(self, *, leading: bool = True, apply: bool = False) -> None:
        self.clock = Clock()
        self.inbox = Inbox(self.clock)
        self.repository = Repository(
            {"c1": snapshot("c1"), "c2": snapshot("c2", frozenset({OK_TAG, LACKED}))}
        )
        self.cluster = Cluster()
        self.lease = Lease(leading)
        self.applier = Applier() if apply else None
        self.output = Output()
        ports = Ports(
            self.clock, self.inbox, self.repository, self.cluster, self.lease, self.output, self.applier
        )
        self.loop = Loop(LoopSettings("main", RESYNC, REFRESH), ports)

    def turn(self, *messages: Message) -> None:
        self.inbox.queued.extend(messages)
        self.loop.turn()

    def news(self, *news: NodesListed | NodeChanged | NodeDeleted) -> None:
        self.turn(*(Watched(self.loop.generation, item) for item in news))

    def listed(self, *nodes: Node) -> None:
        self.news(NodesListed(list(nodes), "42"))

    def started(self, *nodes: Node) -> None:
        """c1 in force, leading, the nodes listed: the first full audit done."""
        self.turn(CommitFetched("c1"))
        self.listed(*nodes)


# --- the commit in force ---------------------------------------------------------------------------


def test_a_fetched_commit_is_put_in_force_once() -> None:
    world = World(leading=False)
    assert world.loop.readiness() == (False, "no commit of the fleet repository in force yet")
    world.turn(CommitFetched("c1"))
    assert world.output.forced == ["c1"]
    assert (
        Level.INFO,
        "commit c1 of main in force: matrix/support-matrix.csv lists 1 images",
    ) in world.output.lines
    assert world.loop.readiness() == (True, "standby, commit c1 in force")
    world.turn(CommitFetched("c1"))  # fetched again (a re-post, a restart of git-sync): not read again
    assert world.repository.loads == ["c1"]


def test_a_refused_commit_keeps_the_last_good_one_checked_out() -> None:
    world = World(leading=False)
    world.repository.commits["bad"] = "matrix/support-matrix.csv: line 2: bad row"
    world.turn(CommitFetched("bad"))
    assert world.output.errors() == [
        "commit bad not put in force: matrix/support-matrix.csv: line 2: bad row; no commit stays in force"
    ]
    assert world.repository.restored == [] and world.loop.snapshot is None
    world.turn(CommitFetched("c1"), CommitFetched("bad"))
    assert world.output.counts[Tally.REJECTED, None] == 2
    assert world.output.errors()[-1].endswith("; c1 stays in force")
    assert world.repository.restored == ["c1"]
    assert world.loop.snapshot == snapshot("c1") and world.output.forced == ["c1"]


# --- leading, watching, auditing -------------------------------------------------------------------


def test_a_leader_watches_and_audits_only_once_the_nodes_are_listed() -> None:
    world = World()
    world.turn(CommitFetched("c1"))
    assert world.cluster.watching == [1] and world.output.figures == Figures(leader=True)
    assert world.loop.readiness() == (False, "leading, listing the GPU nodes")
    assert world.cluster.reads == 0 and world.output.audits == 0
    world.listed(gpu("a"), lacking("b"))
    assert world.cluster.reads == 1 and world.output.observed == ["fleet"]
    assert world.output.figures == Figures(
        leader=True,
        gpu_nodes=2,
        missing={"b": LACKED},
        fleet_problems=0,
        upgrade_states={**dict.fromkeys(UPGRADE_STATES, 0), NO_STATE: 2},
    )
    # The first audit as leader: a problem that an earlier leader may have reported is not recounted.
    (event,) = world.output.events
    assert (event.node, event.reason, event.key, event.recount) == ("b", MISSING, LACKED, False)
    assert event.where == "matrix/support-matrix.csv at c1"
    assert world.loop.readiness() == (True, "leading, commit c1 in force")


def test_a_standby_neither_watches_nor_audits() -> None:
    world = World(leading=False, apply=True)
    world.turn(CommitFetched("c1"))
    world.news(NodesListed([lacking("b")], "1"))
    for _ in range(10):
        world.turn()
    assert world.cluster.watching == [] and world.cluster.reads == 0
    assert world.output.events == [] and world.output.figures is None
    assert world.applier is not None and world.applier.runs == []


def test_a_node_change_audits_that_node_without_reading_the_contract_again() -> None:
    world = World()
    world.started(gpu("a"), gpu("b"))
    assert world.output.events == []
    world.news(NodeChanged(lacking("a")))
    assert world.cluster.reads == 1 and world.output.observed == ["fleet", "nodes"]
    assert [(e.node, e.reason, e.recount) for e in world.output.events] == [("a", MISSING, True)]
    assert world.output.figures is not None and world.output.figures.missing == {"a": LACKED}
    # The same labels again (a status heartbeat) is no news: nothing is audited.
    world.news(NodeChanged(lacking("a")))
    assert world.output.observed == ["fleet", "nodes"] and world.output.audits == 2
    # Fixed: the event says the image is there, as news, not a warning.
    world.news(NodeChanged(gpu("a")))
    cleared = world.output.events[-1]
    assert (cleared.reason, cleared.key, cleared.warning) == (AVAILABLE, OK_TAG, False)
    assert [c.kind for c in world.output.changes] == [Kind.MISSING, Kind.CLEARED]
    world.news(NodeDeleted("b"))
    assert world.output.figures is not None and world.output.figures.gpu_nodes == 1


def test_a_new_commit_reads_the_contract_again_and_audits_the_whole_fleet() -> None:
    world = World()
    world.started(lacking("b"))
    assert world.cluster.reads == 1 and world.output.figures is not None
    assert world.output.figures.missing == {"b": LACKED}
    world.turn(CommitFetched("c2"))  # c2's matrix has the image b lacked
    assert world.cluster.reads == 2 and world.output.observed == ["fleet", "fleet"]
    assert world.output.figures.missing == {}
    assert world.output.events[-1].reason == AVAILABLE
    assert world.output.events[-1].where == "matrix/support-matrix.csv at c2"


def test_a_next_kernel_without_its_image_is_a_series_that_follows_the_watch_and_the_matrix() -> None:
    world = World()
    world.started(gpu("a", **{NEXT_KERNEL: OTHER_KERNEL}), gpu("b"))
    assert world.output.figures is not None
    assert world.output.figures.next_missing == {"a": (OTHER_KERNEL, LACKED)}
    assert world.output.figures.missing == {} and world.output.events == []  # a series, no event
    # The probe publishes another next kernel on b: only b is audited, and its series appears.
    world.news(NodeChanged(gpu("b", **{NEXT_KERNEL: OTHER_KERNEL})))
    assert world.output.observed == ["fleet", "nodes"] and world.cluster.reads == 1
    assert world.output.figures.next_missing == {"a": (OTHER_KERNEL, LACKED), "b": (OTHER_KERNEL, LACKED)}
    # b's label goes (its next kernel is its running one again), a is deleted: both series go.
    world.news(NodeChanged(gpu("b")), NodeDeleted("a"))
    assert world.output.figures.next_missing == {}
    world.news(NodeChanged(gpu("b", **{NEXT_KERNEL: OTHER_KERNEL})))
    assert world.output.figures.next_missing == {"b": (OTHER_KERNEL, LACKED)}
    world.turn(CommitFetched("c2"))  # c2's matrix has the next kernel's image
    assert world.output.figures.next_missing == {} and world.output.events == []


def test_the_whole_fleet_is_audited_again_every_resync_and_not_in_between() -> None:
    world = World()
    world.started(gpu("a"))
    for _ in range(int(RESYNC / WAIT) - 2):
        world.turn()
    assert world.cluster.reads == 1
    world.clock.now += 2 * WAIT
    world.turn()
    assert world.cluster.reads == 2 and world.output.observed == ["fleet", "fleet"]


def test_the_loop_never_spins_an_idle_turn_waits_and_the_clock_bounds_the_reads() -> None:
    world = World()
    world.started(gpu("a"))
    start, reads = world.clock.now, world.cluster.reads
    turns = 2000
    for _ in range(turns):
        world.turn()
    assert world.inbox.waits[-turns:] == [WAIT] * turns  # each turn waits for news, none busy-polls
    assert world.clock.now - start == pytest.approx(turns * WAIT)
    assert world.cluster.reads - reads == int(turns * WAIT // RESYNC)
    assert world.output.events == []


def test_lasting_problems_are_counted_again_once_per_event_refresh() -> None:
    world = World()
    world.started(lacking("b"))
    world.output.events.clear()
    world.clock.now += REFRESH - 1  # a full audit, but the event is still fresh
    world.turn()
    assert world.cluster.reads == 2 and world.output.events == []
    world.clock.now += RESYNC  # the next full audit: the event is due
    world.turn()
    (event,) = world.output.events
    assert (event.node, event.reason, event.recount) == ("b", MISSING, False)


def test_many_changes_are_logged_up_to_a_count() -> None:
    world = World()
    world.started(*(lacking(f"n{i:02d}") for i in range(LOGGED_CHANGES + 5)))
    assert len(world.output.changes) == LOGGED_CHANGES
    assert world.output.lines[-1] == (Level.INFO, "... and 5 more node changes")
    assert len(world.output.events) == LOGGED_CHANGES + 5


# --- errors ----------------------------------------------------------------------------------------


def test_an_unreadable_contract_without_a_last_one_means_no_audit_and_a_retry_soon() -> None:
    world = World()
    world.cluster.contract_now = "clusterpolicies: 503 Service Unavailable"
    world.started(lacking("b"))
    assert world.output.errors() == [
        "cannot read the GPU Operator's driver contract: clusterpolicies: 503 Service Unavailable; "
        "no audit until then (retry in 10s)"
    ]
    assert world.output.counts[Tally.AUDIT_ERRORS, None] == 1
    assert world.output.audits == 0 and world.output.figures == Figures(leader=True)
    world.clock.now += 9
    world.turn()
    assert world.cluster.reads == 1  # not retried at once, nor every turn
    world.clock.now += 1
    world.cluster.contract_now = LAB
    world.turn()
    assert world.cluster.reads == 2 and world.output.figures.missing == {"b": LACKED}


def test_an_unreadable_contract_keeps_the_last_good_one_and_the_last_figures() -> None:
    world = World()
    world.started(lacking("b"))
    shown = world.output.figures
    world.cluster.contract_now = "connection refused"
    world.clock.now += RESYNC
    world.turn()
    assert world.output.errors() == [
        "cannot read the GPU Operator's driver contract: connection refused; auditing with the last one read"
    ]
    assert world.output.counts[Tally.AUDIT_ERRORS, None] == 1
    assert world.output.figures == shown and world.loop.contract is LAB
    # The node changes are still audited, with the contract read last.
    world.news(NodeChanged(gpu("b")))
    assert world.output.figures is not None and world.output.figures.missing == {}


# --- the lease -------------------------------------------------------------------------------------


def test_losing_the_lease_stops_watching_applying_and_exports_a_standbys_zeros() -> None:
    world = World(apply=True)
    world.started(lacking("b"))
    assert world.applier is not None
    (run,) = world.applier.runs
    world.lease.leading = False
    world.turn()
    assert run.interrupted == [APPLY_GRACE]
    assert world.output.counts[Tally.APPLY_RUNS, "interrupted"] == 1
    assert world.cluster.unwatched == 1 and world.output.figures == Figures()
    assert (Level.INFO, "not leading any more: stopped watching and auditing") in world.output.lines
    # News of the old watch arriving late is dropped; nothing is audited or applied.
    world.turn(Watched(1, NodeChanged(gpu("b"))), CommitFetched("c2"))
    assert world.output.figures == Figures() and len(world.applier.runs) == 1
    assert world.loop.readiness() == (True, "standby, commit c2 in force")


def test_leading_again_starts_a_new_watch_whose_news_alone_counts() -> None:
    world = World()
    world.started(lacking("b"))
    world.lease.leading = False
    world.turn()
    world.lease.leading = True
    world.turn()
    assert world.cluster.watching == [1, 3]  # a generation per watch, one more per step-down
    world.turn(Watched(1, NodesListed([lacking("old")], "1")))
    assert world.loop.readiness() == (False, "leading, listing the GPU nodes")
    world.listed(lacking("b"))
    assert world.output.figures is not None and world.output.figures.missing == {"b": LACKED}
    assert world.output.events[-1].recount is False  # a first audit again


# --- apply -----------------------------------------------------------------------------------------


def test_apply_runs_on_the_leader_one_at_a_time_and_again_only_at_a_new_commit_or_resync() -> None:
    world = World(apply=True)
    world.turn(CommitFetched("c1"))
    assert world.applier is not None and world.applier.runs == []  # leading, not listed yet
    world.listed(gpu("a"))
    assert [r.commit for r in world.applier.runs] == ["c1"]
    world.turn(CommitFetched("c2"))
    world.clock.now += 2 * RESYNC
    world.turn()
    assert [r.commit for r in world.applier.runs] == ["c1"]  # never two at once
    world.applier.runs[0].status = 0
    world.turn()
    assert world.output.counts[Tally.APPLY_RUNS, "ok"] == 1
    assert (Level.INFO, "apply at c1 ended: exit 0 (ok)") in world.output.lines
    world.turn()
    assert [r.commit for r in world.applier.runs] == ["c1", "c2"]
    world.applier.runs[1].status = 1
    world.turn()
    world.turn()
    assert len(world.applier.runs) == 2  # c2 ran: not again before the resync
    world.clock.now += RESYNC
    world.turn()
    assert [r.commit for r in world.applier.runs] == ["c1", "c2", "c2"]
    assert world.output.counts[Tally.APPLY_RUNS, "findings"] == 1


@pytest.mark.parametrize(
    ("status", "result"), [(0, "ok"), (1, "findings"), (2, "error"), (130, "interrupted")]
)
def test_an_apply_run_is_counted_by_its_exit(status: int, result: str) -> None:
    world = World(apply=True)
    world.started(gpu("a"))
    assert world.applier is not None
    world.applier.runs[0].status = status
    world.turn()
    assert world.output.counts == Counter({(Tally.APPLY_RUNS, result): 1})


def test_apply_without_a_fleet_or_a_worktree_says_so_once_per_resync() -> None:
    world = World(apply=True)
    world.repository.commits["c1"] = snapshot("c1", fleet=None)
    world.started(gpu("a"))
    for _ in range(5):
        world.turn()
    assert world.output.errors() == [
        "--apply: no desired fleet: pass --from DIR or set fleet: in gpudrv.yaml"
    ]
    assert world.applier is not None
    world.applier.broken = "git worktree add: disk full"
    world.turn(CommitFetched("c2"))
    world.turn()
    assert world.output.errors()[1:] == ["--apply: git worktree add: disk full"]
    assert world.applier.runs == [] and world.loop.running is None


# --- stopping and the probes -----------------------------------------------------------------------


def test_a_stop_ends_the_turn_at_once_and_the_loop_stops_acting() -> None:
    world = World(apply=True)
    world.started(gpu("a"))
    world.inbox.queued.extend([StopRequested(), CommitFetched("c2")])
    world.loop.run()
    assert world.repository.loads == ["c1"]  # what came after the stop is not done
    assert world.applier is not None and world.applier.runs[0].interrupted == [APPLY_GRACE]
    assert world.cluster.unwatched == 1 and world.output.figures == Figures()


def test_a_stop_from_the_signal_handler_skips_the_rest_of_the_step() -> None:
    world = World()
    world.loop.stop()
    world.turn(CommitFetched("c1"))
    assert world.repository.loads == [] and world.cluster.watching == []


def test_health_is_a_turning_loop_and_live_threads() -> None:
    world = World()
    world.turn(LeaseNews(True))
    assert world.loop.health({"git-sync": True}) == (True, "the loop turns")
    assert world.loop.health({"git-sync": False, "node-events": True, "leader-election": False}) == (
        False,
        "thread git-sync, leader-election died",
    )
    world.clock.now += 61
    assert world.loop.health({}) == (False, "the loop has not turned for 61s")
