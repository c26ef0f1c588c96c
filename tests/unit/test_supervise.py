"""The staging and stall logic of a rollout on a GPU Operator fleet, on plain data."""

from __future__ import annotations

from reconciler.core.images.tags import UPGRADE_STATE
from reconciler.core.rollout import stalls, supervise
from reconciler.core.rollout.stalls import Context
from reconciler.core.rollout.supervise import (
    HELD,
    DriverPod,
    NodeFacts,
    Stages,
    Step,
)
from reconciler.core.upgrades.budget import DRAIN_SKIP_LABEL, Budget, Pod, Selector
from reconciler.core.upgrades.upgrade import SKIP_LABEL, State

NEW = "nvcr.io/nvidia/driver:570-5.15.0-119-generic-ubuntu22.04"
OLD = "nvcr.io/nvidia/driver:550-5.15.0-119-generic-ubuntu22.04"
TAG = "570-5.15.0-119-generic-ubuntu22.04"


def node(  # noqa: PLR0917
    name: str,
    state: str = "",
    image: str = OLD,
    ready: bool = True,
    held: bool = False,
    skipped: bool = False,
    **extra: object,
) -> NodeFacts:
    labels = {UPGRADE_STATE: state} if state else {}
    annotations = {}
    if held or skipped:
        labels[SKIP_LABEL] = "true"
    if held:
        annotations[HELD] = "rollout"
    driver = DriverPod("gpu-operator", f"driver-{name}", image, ready) if image else None
    return NodeFacts(
        name=name,
        labels=labels,
        annotations=annotations,
        unschedulable=False,
        want_image=NEW,
        want_tag=TAG,
        driver=driver,
        **extra,  # type: ignore[arg-type]
    )


def done(name: str) -> NodeFacts:
    return node(name, "upgrade-done", NEW)


def test_the_policy_reads_as_the_operator_does() -> None:
    rules = supervise.policy(
        {
            "autoUpgrade": True,
            "maxParallelUpgrades": 2,
            "maxUnavailable": "50%",
            "drain": {"enable": True, "timeoutSeconds": 60},
            "waitForCompletion": {"podSelector": "app=job"},
        }
    )
    assert rules.auto_upgrade and rules.drain_enabled
    assert (rules.max_parallel, rules.max_unavailable, rules.drain_timeout) == (2, "50%", 60)
    assert rules.wait_selector == "app=job"
    assert not supervise.policy({}).auto_upgrade
    assert not supervise.policy({"autoUpgrade": "true"}).auto_upgrade  # a string is no bool


def test_moving_nodes_are_those_not_done_on_the_desired_image() -> None:
    nodes = [done("a"), node("b", "upgrade-done"), node("c", image=NEW, ready=False), node("d", skipped=True)]
    assert [n.name for n in supervise.moving(nodes)] == ["b", "c"]


def test_first_step_holds_all_but_the_canary() -> None:
    nodes = [node("c"), node("a"), node("b"), done("z")]
    step = supervise.first_step(nodes, Stages(canary=1))
    assert step == Step(hold=("b", "c"), in_flight=("a",))
    assert supervise.first_step(nodes, Stages(canary=5)).hold == ()


def test_nothing_to_move_is_finished() -> None:
    assert supervise.first_step([done("a"), done("b")], Stages()).finished


def test_a_rerun_goes_on_from_the_holds_and_states() -> None:
    nodes = [node("a", "drain-required"), node("b", held=True), node("c", held=True)]
    step = supervise.first_step(nodes, Stages())
    assert step.hold == () and step.in_flight == ("a",) and not step.release


def test_the_next_batch_is_released_once_the_released_nodes_are_done() -> None:
    nodes = [done("a"), node("b", "upgrade-required", held=True), node("c", held=True), node("d", held=True)]
    assert supervise.next_step(nodes, Stages(batch=2)).release == ("b", "c")
    assert supervise.next_step(nodes, Stages()).release == ("b", "c", "d")


def test_nodes_in_flight_are_waited_for() -> None:
    nodes = [node("a", "validation-required", image=NEW), node("b", held=True)]
    step = supervise.next_step(nodes, Stages())
    assert step.in_flight == ("a",) and not step.release and not step.finished


def test_a_failed_node_stops_the_releases() -> None:
    nodes = [node("a", "upgrade-failed"), node("b", held=True)]
    step = supervise.next_step(nodes, Stages())
    assert step.failed == ("a",) and not step.release


def test_all_done_is_finished() -> None:
    assert supervise.next_step([done("a"), done("b"), node("c", skipped=True)], Stages()).finished


def gpu_pod(name: str, **labels: str) -> Pod:
    return Pod("jobs", name, {"app": "train", **labels}, owner_kind="ReplicaSet", gpu=True)


def other_pod(name: str, **labels: str) -> Pod:
    return Pod("web", name, {"app": "web", **labels}, owner_kind="ReplicaSet")


def test_the_operator_evicts_gpu_pods_and_with_drain_the_rest_but_drain_skip() -> None:
    pods = [
        gpu_pod("g"),
        other_pod("w"),
        other_pod("kept", **{DRAIN_SKIP_LABEL: "true"}),
        Pod("kube-system", "ds", owner_kind="DaemonSet"),
        Pod("jobs", "over", owner_kind="Job", phase="Succeeded", gpu=True),
    ]
    assert [p.name for p in supervise.evicted(pods, supervise.Policy())] == ["g"]
    drain = supervise.Policy(drain_enabled=True)
    assert [p.name for p in supervise.evicted(pods, drain)] == ["g", "w"]


def budget(name: str, allowed: int, **labels: str) -> Budget:
    return Budget(
        "jobs",
        name,
        Selector(labels),
        min_available=2,
        current_healthy=3,
        desired_healthy=2,
        disruptions_allowed=allowed,
    )


def test_a_batch_counts_its_evictions_together_against_each_budget() -> None:
    pdb = budget("train-pdb", 1, app="train")
    assert supervise.budget_refusals([gpu_pod("g1")], [pdb]) == []
    refused = supervise.budget_refusals([gpu_pod("g1"), gpu_pod("g2")], [pdb])
    assert len(refused) == 1
    assert "PDB jobs/train-pdb allows 1 disruption(s) and the batch needs 2" in refused[0]
    assert "minAvailable 2, currentHealthy 3" in refused[0]


def context(**extra: object) -> Context:
    return Context(supervise.Policy(**extra), tags=frozenset({TAG}))  # type: ignore[arg-type]


def test_a_drain_refused_by_a_budget_names_it() -> None:
    stuck = node("a", "pod-deletion-required", pods=(gpu_pod("g1"),))
    text = stalls.stall(stuck, Context(supervise.Policy(), [budget("train-pdb", 0, app="train")]))
    assert text.startswith("GPU pod deletion refused: PDB jobs/train-pdb allows 0")


def test_an_image_pull_failure_names_the_missing_matrix_row() -> None:
    pulling = NodeFacts(
        "a",
        {UPGRADE_STATE: "pod-restart-required"},
        {},
        True,
        NEW,
        TAG,
        DriverPod("gpu-operator", "driver-a", NEW, False, "ImagePullBackOff"),
    )
    text = stalls.stall(pulling, Context(supervise.Policy(), matrix="matrix/gpu-operator.csv"))
    assert text == (
        f"driver pod gpu-operator/driver-a cannot pull {NEW} (ImagePullBackOff): "
        f"matrix/gpu-operator.csv has no row for {TAG}"
    )
    assert "check that the registry really has it" in stalls.stall(pulling, context())


def test_validation_waits_are_named() -> None:
    validator = Pod("gpu-operator", "nvidia-operator-validator-x", owner_kind="DaemonSet")
    waiting = node("a", "validation-required", image=NEW, validator=validator, validator_ready=False)
    assert stalls.stall(waiting, context()) == (
        "validator pod gpu-operator/nvidia-operator-validator-x is not Ready; "
        "the operator fails the node after 600s of this"
    )
    missing = node("a", "validation-required", image=NEW)
    assert stalls.stall(missing, context()) == "no validator pod (app=nvidia-operator-validator) on the node"


def test_every_state_has_words() -> None:
    for state in State:
        assert stalls.stall(node("a", state), context())
    assert "does not know ('frobnicate-required')" in stalls.stall(
        node("a", "frobnicate-required"), context()
    )
    assert "external maintenance operator" in stalls.stall(node("a", "node-maintenance-required"), context())
    assert stalls.stall(node("a", held=True), context()).startswith("held by gpudrv")
    assert "someone else" in stalls.stall(node("a", skipped=True), context())


def test_waiting_for_jobs_says_which_and_for_how_long() -> None:
    job = Pod("jobs", "train-0", owner_kind="Job", gpu=True)
    stuck = node("a", "wait-for-jobs-required", pods=(job,))
    text = stalls.stall(
        stuck, Context(supervise.Policy(wait_selector="app=train", wait_timeout=600), waited=75)
    )
    assert text == (
        "waiting for jobs matching 'app=train' to finish (jobs/train-0) for 1m15s; "
        "the operator waits up to 600s"
    )


def test_a_failure_says_the_operators_last_event_and_the_budget() -> None:
    failed = node(
        "a",
        "upgrade-failed",
        pods=(gpu_pod("g1"),),
        events=("Scheduling drain of the node", "Failed to drain the node, Cannot evict pod"),
    )
    text = stalls.stall(failed, Context(supervise.Policy(), [budget("train-pdb", 0, app="train")]))
    assert text.startswith("upgrade failed: Failed to drain the node, Cannot evict pod; PDB jobs/train-pdb")


def test_the_tracker_says_each_transition_and_each_stall_once() -> None:
    tracker = stalls.Tracker()
    assert tracker.transitions([node("a", "upgrade-required")], 0.0) == []  # where it was found
    assert tracker.transitions([node("a", "upgrade-required")], 1.0) == []
    assert tracker.transitions([node("a", "cordon-required")], 2.0) == [
        "a: upgrade-required -> cordon-required"
    ]
    stuck = [node("a", "cordon-required")]
    assert tracker.stalls(stuck, context(), 5.0, after=15.0) == []
    said = tracker.stalls(stuck, context(), 20.0, after=15.0)
    assert said == ["a: cordon-required for 18s: waiting for the operator (cordon-required)"]
    assert tracker.stalls(stuck, context(), 30.0, after=15.0) == []
    fresh = stalls.Tracker()
    fresh.observe("b", "upgrade-failed", 0.0)
    failed = [node("b", "upgrade-failed")]
    assert fresh.stalls(failed, context(), 0.2, after=0.0) == [
        "b: upgrade-failed: upgrade failed: the operator gave no reason in an event"
    ]


def test_watch_events_and_reads_share_one_history() -> None:
    tracker = stalls.Tracker()
    assert tracker.observe("a", "upgrade-done", 0.0) is None
    assert tracker.observe("a", "upgrade-required", 1.0) == "a: upgrade-done -> upgrade-required"
    assert tracker.transitions([node("a", "upgrade-required")], 2.0) == []  # the read saw it already
    assert tracker.observe("a", "", 3.0) == "a: upgrade-required -> (none)"


# --- NVIDIADriver pools and user holds ----------------------------------------------------------------


def pooled(name: str, image: str, owner: str, want_driver: str, state: str = "upgrade-done") -> NodeFacts:
    return NodeFacts(
        name=name,
        labels={UPGRADE_STATE: state},
        annotations={},
        unschedulable=False,
        want_image=NEW,
        want_tag=TAG,
        driver=DriverPod("gpu-operator", f"driver-{name}", image, True, owner=owner),
        want_driver=want_driver,
    )


def test_a_pool_whose_nvidiadriver_keeps_its_image_is_not_moving() -> None:
    kept = pooled("b1", NEW, owner="pool-b", want_driver="pool-b")
    moved = pooled("a1", OLD, owner="pool-a", want_driver="pool-a")
    assert [n.name for n in supervise.moving([kept, moved])] == ["a1"]
    step = supervise.first_step([kept, moved, pooled("a2", OLD, "pool-a", "pool-a")], Stages(1, 0))
    assert (step.in_flight, step.hold) == (("a1",), ("a2",))


def test_a_driver_pod_of_another_nvidiadriver_is_not_in_sync_even_with_the_same_image() -> None:
    assert not pooled("n", NEW, owner="old-pool", want_driver="new-pool").in_sync
    assert pooled("n", NEW, owner="", want_driver="new-pool").in_sync  # owner unknown: the image decides


def test_a_node_someone_else_skips_is_named_once_and_never_moves_or_held() -> None:
    theirs = node("c", "upgrade-required", OLD, skipped=True)
    ours = node("b", "upgrade-required", OLD, held=True)
    first = node("a", "", OLD)
    assert [n.name for n in supervise.user_skipped([first, ours, theirs])] == ["c"]
    assert (
        supervise.skipped_line("c")
        == "c: SKIPPED (nvidia.com/gpu-driver-upgrade.skip=true, not set by gpudrv)"
    )
    assert "c" not in {n.name for n in supervise.moving([first, ours, theirs])}
    step = supervise.first_step([first, theirs], Stages(1, 0))
    assert "c" not in step.hold + step.in_flight


def test_a_skipped_node_that_already_runs_its_image_is_not_named() -> None:
    assert supervise.user_skipped([node("c", "upgrade-done", NEW, skipped=True)]) == []


# --- a rerun, after a kill at any of the rollout's writes ---------------------------------------------


def test_a_rerun_killed_among_the_holds_holds_the_rest_and_keeps_the_canary() -> None:
    nodes = [node("a"), node("b", held=True), node("c"), node("d")]
    assert supervise.first_step(nodes, Stages()) == Step(hold=("c", "d"), in_flight=("a",))


def test_a_rerun_with_the_change_live_holds_what_the_operator_has_not_started() -> None:
    """The node in progress is the canary, whatever its name; those waiting for a slot are held."""
    nodes = [node("a", "upgrade-required"), node("b", "cordon-required"), node("c", "upgrade-required")]
    assert supervise.first_step(nodes, Stages()) == Step(hold=("a", "c"), in_flight=("b",))


def test_a_rerun_amid_a_released_batch_keeps_the_batch_and_holds_the_rest() -> None:
    nodes = [
        done("a"),
        node("b", "drain-required"),
        node("c", "cordon-required"),
        node("d", "upgrade-required"),
    ]
    assert supervise.first_step(nodes, Stages(1, 2)) == Step(hold=("d",), in_flight=("b", "c"))


def test_a_rerun_with_a_failed_node_holds_the_others_and_stops_there() -> None:
    nodes = [node("a", "upgrade-failed"), node("b")]
    step = supervise.first_step(nodes, Stages())
    assert step == Step(hold=("b",), in_flight=("a",))
    assert supervise.next_step([node("a", "upgrade-failed"), node("b", held=True)], Stages()).failed == ("a",)


def test_a_rerun_with_every_moving_node_held_releases_the_next_batch() -> None:
    nodes = [done("a"), node("b", "upgrade-required", held=True), node("c", held=True)]
    step = supervise.first_step(nodes, Stages(1, 1))
    assert (step.hold, step.release, step.in_flight) == ((), ("b",), ("b",))


def test_a_rerun_tops_the_canary_up_with_free_nodes_not_more() -> None:
    nodes = [node("a", "cordon-required"), node("b", "upgrade-required"), node("c"), node("d", held=True)]
    assert supervise.first_step(nodes, Stages(canary=2)) == Step(hold=("c",), in_flight=("a", "b"))
    assert supervise.first_step(nodes, Stages(canary=1)) == Step(hold=("b", "c"), in_flight=("a",))
