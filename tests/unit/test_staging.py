"""The operator-mode rollout's loop (core/rollout/staging.py) on the in-memory cluster and operator of
tests/unit/memory_operator.py: the order of its writes, every kill point with a rerun (the invariant
checked on the whole state history), and each stop with nothing more changed."""

from __future__ import annotations

import pytest

from reconciler.core.rollout.staging import Staging
from reconciler.core.rollout.supervise import Policy, Stages
from reconciler.core.upgrades.budget import Budget, Pod, Selector
from reconciler.core.upgrades.upgrade import SKIP_LABEL, Images, State
from tests.unit.memory_operator import (
    NEW,
    OLD,
    TAG,
    Killed,
    MemNode,
    Said,
    Settings,
    World,
    finished_clean,
    rollout,
)

# --- the order of a run -------------------------------------------------------------------------------


def test_holds_then_apply_then_one_batch_at_a_time() -> None:
    world = World.of(4)
    ok, said = rollout(world, Settings(Stages(canary=1, batch=1)))
    assert ok and finished_clean(world), said.lines
    assert world.writes == [
        "hold n1",
        "hold n2",
        "hold n3",
        "apply",
        "release n1",
        "release n2",
        "release n3",
    ]
    assert max(len(moving) for moving in world.history) == 1
    assert said.lines[0] == f"held 3 node(s) with {SKIP_LABEL}=true until the canary is done: n1, n2, n3"
    assert "n0: upgrade-required -> cordon-required" in said.lines  # from the watch's events
    assert said.lines[-1] == "audit: OK" and said.result is not None and said.result.ok
    assert said.notes == {f"n{i}": ("done", NEW) for i in range(4)}


def test_a_batch_of_two_never_has_more_than_two_in_progress() -> None:
    world = World.of(5)
    ok, _ = rollout(world, Settings(Stages(canary=1, batch=2)))
    assert ok and finished_clean(world)
    assert max(len(moving) for moving in world.history) == 2
    assert world.writes[5:] == ["release n1", "release n2", "release n3", "release n4"]


def test_the_hold_says_since_when() -> None:
    world = World.of(2, time=0.0)
    rollout(world, Settings(hold=True))
    assert world.nodes["n1"].held == "rollout since 1970-01-01T00:00:00Z"


# --- resumable at every write ------------------------------------------------------------------------


def writes_of_a_clean_run(count: int, stages: Stages) -> int:
    world = World.of(count)
    assert rollout(world, Settings(stages))[0]
    return len(world.writes)


@pytest.mark.parametrize(("count", "stages"), [(4, Stages(1, 1)), (5, Stages(1, 2)), (5, Stages(2, 0))])
@pytest.mark.parametrize("gap", [0, 3, 40])  # ticks of the operator alone between the kill and the rerun
def test_killed_after_any_write_a_rerun_stages_the_rest(count: int, stages: Stages, gap: int) -> None:
    limit = max(stages.canary, stages.batch or count - stages.canary)
    for kill_after in range(1, writes_of_a_clean_run(count, stages) + 1):
        world = World.of(count, kill_after=kill_after)
        with pytest.raises(Killed):
            rollout(world, Settings(stages))
        world.kill_after = None
        world.idle(gap)
        ok, said = rollout(world, Settings(stages))
        where = f"killed after write {kill_after} ({world.writes[kill_after - 1]}), gap {gap}"
        assert ok and finished_clean(world), f"{where}: {said.lines}"
        most = max(len(moving) for moving in world.history)
        assert most <= limit, f"{where}: {most} nodes in progress at once; {world.writes}"
        assert all(node.held is None for node in world.nodes.values()), where


def test_a_rerun_holds_every_moving_node_before_anything_else() -> None:
    """Killed after the first hold: the rerun's first writes hold the rest, the canary stays free."""
    world = World.of(4, kill_after=1)
    with pytest.raises(Killed):
        rollout(world, Settings())
    world.kill_after = None
    rollout(world, Settings())
    assert world.writes[:4] == ["hold n1", "hold n2", "hold n3", "apply"]


def test_resources_applied_by_someone_else_and_nothing_held() -> None:
    """Found with the change live and the operator at one node: that node is the canary, the others
    are held before the rollout waits for anything."""
    world = World.of(4, applied=True, max_parallel=1)
    world.idle(2)  # the operator marks them all upgrade-required, then takes n0
    assert world.in_progress() == {"n0"}
    ok, said = rollout(world, Settings(Stages(1, 1)))
    assert ok and finished_clean(world), said.lines
    assert world.writes[:3] == ["hold n1", "hold n2", "hold n3"]
    assert "n0: at cordon-required" in said.lines
    world.max_parallel = 100
    assert max(len(moving) for moving in world.history) == 1


def test_a_rerun_takes_the_node_in_progress_as_the_canary_not_the_first_by_name() -> None:
    world = World({"a": MemNode(), "b": MemNode(), "c": MemNode()}, applied=True, max_parallel=1)
    world.nodes["a"].skip = True  # someone else's hold: left alone
    world.idle(2)
    assert world.in_progress() == {"b"}
    ok, said = rollout(world, Settings(Stages(1, 1)))
    assert world.writes[0] == "hold c" and ok, said.lines
    assert said.lines[0] == f"a: SKIPPED ({SKIP_LABEL}=true, not set by gpudrv)"
    assert world.nodes["a"].skip and world.nodes["a"].image == OLD and said.notes["a"][0] == "skipped"


# --- stops, each with nothing more changed -----------------------------------------------------------


def test_the_image_gate_changes_nothing() -> None:
    world = World.of(2)
    staging = Staging(
        world,
        world,
        said := Said(),
        Settings(),
        rules=Policy(auto_upgrade=True),
        images=Images("main", "m.csv", frozenset()),
    )
    staging.start()
    assert not staging.run()
    assert said.lines == [
        f"n0: image gate: {TAG} is not in m.csv on main",
        f"n1: image gate: {TAG} is not in m.csv on main",
        "nothing was changed",
    ]
    assert world.writes == []


def test_a_dry_run_says_the_plan_and_writes_nothing() -> None:
    world = World.of(3)
    ok, said = rollout(world, Settings(dry_run=True))
    assert ok and world.writes == []
    assert said.lines == [
        f"canary: n0 -> {NEW}",
        f"would hold: n1 -> {NEW} (skip label until the canary is done)",
        f"would hold: n2 -> {NEW} (skip label until the canary is done)",
        "dry run: nothing was changed",
    ]
    assert {outcome for outcome, _ in said.notes.values()} == {"planned"}


def test_hold_leaves_the_resources_to_the_engine_then_await_sync_goes_on() -> None:
    world = World.of(3)
    held, said = rollout(world, Settings(hold=True))
    assert held and world.writes == ["hold n1", "hold n2"] and not world.applied
    # -o json says what --hold did: the canary planned, the others held (not the read before the holds)
    assert said.notes == {"n0": ("planned", NEW), "n1": ("held", NEW), "n2": ("held", NEW)}
    world.synced_by_engine_after = 30.0
    ok, said = rollout(world, Settings(Stages(1, 1), await_sync=True))
    assert ok and finished_clean(world), said.lines
    assert world.writes[2:] == ["release n1", "release n2"]  # the engine applied, not gpudrv
    assert max(len(moving) for moving in world.history) == 1


def test_a_mixed_fleet_applies_its_own_resources_and_awaits_helms() -> None:
    world = World.of(3)
    world.helm_renders, world.synced_by_engine_after = True, 30.0
    start = world.time
    ok, said = rollout(world, Settings(Stages(1, 1)))
    assert ok and finished_clean(world), said.lines
    assert world.writes == ["hold n1", "hold n2", "apply", "release n1", "release n2"]
    assert world.time - start >= 30.0  # the canary waited for the engine's part


def test_a_mixed_fleet_whose_helm_part_never_syncs_keeps_its_holds() -> None:
    world = World.of(2)
    world.helm_renders = True
    ok, said = rollout(world, Settings(timeout=60))
    assert not ok and world.writes == ["hold n1", "apply"] and world.nodes["n1"].skip
    assert said.lines[-1].startswith("timed out after 60s waiting for the GitOps engine")


def test_await_sync_times_out_with_the_holds_kept() -> None:
    world = World.of(2)
    ok, said = rollout(world, Settings(await_sync=True, timeout=60))
    assert not ok and world.writes == ["hold n1"] and world.nodes["n1"].skip
    assert said.lines[-1].startswith("timed out after 60s waiting for the GitOps engine")


def test_a_failed_canary_stops_the_releases() -> None:
    world = World.of(3)
    world.nodes["n0"].fails = True
    ok, said = rollout(world, Settings())
    assert not ok and world.writes == ["hold n1", "hold n2", "apply"]
    assert said.lines[-1].startswith("upgrade failed on n0; 2 node(s) stay held by gpudrv")
    assert any(line.startswith("n0: upgrade-failed") and "upgrade failed:" in line for line in said.lines)
    assert said.notes["n0"] == ("failed", NEW) and said.notes["n1"] == ("held", NEW)


def test_a_stuck_canary_times_out_and_its_stall_is_said() -> None:
    world = World.of(2)
    world.nodes["n0"].stuck = True
    ok, said = rollout(world, Settings(timeout=60))
    assert not ok and "release n1" not in world.writes
    assert (
        said.lines[-1]
        == "timed out after 60s waiting for n0; gpudrv's holds stay: run gpudrv apply again to go on"
    )
    assert any(line.startswith("n0: cordon-required for ") for line in said.lines), said.lines
    assert said.notes["n0"] == ("in-progress", State.CORDON)


def test_every_node_already_on_its_image() -> None:
    world = World.of(2, applied=True)
    for node in world.nodes.values():
        node.image = NEW
    ok, said = rollout(world, Settings())
    assert ok and world.writes == []
    assert said.lines == [
        "every node the driver resources select already runs its image (2 node(s))",
        "audit: OK",
    ]


def train(node: str) -> tuple[list[Pod], Budget]:
    """A GPU pod on `node` and a budget over it that allows no disruption."""
    pod = Pod("jobs", f"train-{node}", {"app": "train"}, owner_kind="ReplicaSet", gpu=True)
    pdb = Budget(
        "jobs", "train", Selector({"app": "train"}), min_available=1, current_healthy=1, desired_healthy=1
    )
    return [pod], pdb


def test_a_budget_that_would_refuse_the_canary_changes_nothing() -> None:
    world = World.of(2)
    world.pods["n0"], pdb = train("n0")
    world.pdbs.append(pdb)
    ok, said = rollout(world, Settings())
    assert not ok and world.writes == []
    assert said.lines == [
        "budget: PDB jobs/train allows 0 disruption(s) and the batch needs 1 (jobs/train-n0); "
        "minAvailable 1, currentHealthy 1, desiredHealthy 1, disruptionsAllowed 0",
        "the canary's drain would be refused: nothing was changed",
    ]


def test_a_batch_a_budget_would_refuse_waits_saying_so_once_then_times_out_held() -> None:
    world = World.of(2)
    world.pods["n1"], pdb = train("n1")
    world.pdbs.append(pdb)
    ok, said = rollout(world, Settings(timeout=60))
    assert not ok and world.writes == ["hold n1", "apply"] and world.nodes["n1"].skip
    waits = [line for line in said.lines if line.startswith("next batch waits: PDB jobs/train allows 0")]
    assert len(waits) == 1, said.lines
    assert said.lines[-1].startswith("timed out after 60s waiting for n1; gpudrv's holds stay")
    world.pdbs.clear()  # the budget has room again: a rerun releases the batch
    ok, said = rollout(world, Settings())
    assert ok and finished_clean(world) and world.writes[2:] == ["release n1"], said.lines
