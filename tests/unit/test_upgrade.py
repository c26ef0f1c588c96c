"""The upgrade planner, its gates and the state machine, on plain data."""

from __future__ import annotations

import pytest

from reconciler.core.images import tags
from reconciler.core.images.tags import Node
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.budget import Budget, Pod, Role, Selector
from reconciler.core.upgrades.upgrade import Driver, Images, LiveNode, State

BASE = {
    tags.GPU_PRESENT: "true",
    tags.KERNEL: "5.15.0-107-generic",
    tags.OS_ID: "ubuntu",
    tags.OS_VERSION_ID: "22.04",
}
OLD = Driver("535", "183", "06")
NEW = Driver("550", "90", "07")
TARGET = "550-5.15.0-107-generic-ubuntu22.04"
MATRIX = "matrix/support-matrix.csv"
MERGED = Images(
    ref="origin/main",
    path="matrix/support-matrix.csv",
    merged=frozenset({TARGET}),
    since={TARGET: "abc1234def5678"},
)


INITIAL = upgrade.INITIAL_UNSCHEDULABLE


def desired(driver: Driver = NEW, name: str = "n1") -> Node:
    return Node(name, {**BASE, **driver.labels()})


def live(
    driver: Driver = OLD, state: str | None = None, unschedulable: bool = False, **annotations: str
) -> LiveNode:
    labels = {**BASE, **driver.labels()}
    if state:
        labels[tags.UPGRADE_STATE] = state
    return LiveNode(
        Node("n1", labels), unschedulable, {k.replace("__", "/"): v for k, v in annotations.items()}
    )


TRAINER = Pod("ml", "trainer-1", {"app": "trainer"}, owner_kind="ReplicaSet")


def pdb(allowed: int, fresh: bool = True, name: str = "trainer-pdb") -> Budget:
    return Budget(
        "ml", name, Selector({"app": "trainer"}), min_available=4, current_healthy=4,
        desired_healthy=4 - allowed, disruptions_allowed=allowed, fresh=fresh,
    )  # fmt: skip


def gates(plan: upgrade.NodePlan | None) -> dict[str, tuple[bool, str]]:
    assert plan is not None
    return {gate.name: (gate.ok, gate.detail) for gate in plan.gates}


# --- drivers and states ---------------------------------------------------------------------------


def test_driver_needs_all_three_labels() -> None:
    assert upgrade.driver(NEW.labels()) == NEW
    assert NEW.version == "550.90.07"
    assert upgrade.driver({tags.DRIVER_MAJOR: "550", tags.DRIVER_MINOR: "90"}) is None
    assert upgrade.driver({**NEW.labels(), tags.DRIVER_REV: ""}) is None


def test_states_are_the_gpu_operators_in_order() -> None:
    """k8s-operator-libs pkg/upgrade/consts.go (7d667fb, and d720f25 for the maintenance states)."""
    assert [str(s) for s in upgrade.ALL_STATES] == [
        "upgrade-required",
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "node-maintenance-required",
        "post-maintenance-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        "upgrade-done",
        "upgrade-failed",
    ]
    assert [str(s) for s in upgrade.ORDER] == [
        "upgrade-required",
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        "upgrade-done",
    ]


@pytest.mark.parametrize("state", list(upgrade.ORDER[:-1]))
def test_a_run_resumes_at_the_recorded_state(state: State) -> None:
    steps = upgrade.remaining(state)
    assert steps[0] is state
    assert steps == upgrade.ORDER[upgrade.ORDER.index(state) :]


@pytest.mark.parametrize("state", [None, State.DONE, State.FAILED])
def test_fresh_done_or_failed_out_of_sync_nodes_start_over(state: State | None) -> None:
    assert upgrade.remaining(state) == upgrade.ORDER


def test_a_failed_node_in_sync_goes_to_uncordon_or_done() -> None:
    """ProcessUpgradeFailedNodes: uncordon-required, or upgrade-done when cordoned before."""
    assert upgrade.remaining(State.FAILED, in_sync=True) == (State.UNCORDON, State.DONE)
    assert upgrade.remaining(State.FAILED, in_sync=True, cordoned_before=True) == (State.DONE,)


def test_a_node_cordoned_before_skips_uncordon_required() -> None:
    steps = upgrade.remaining(State.DRAIN, cordoned_before=True)
    assert State.UNCORDON not in steps and steps[-2:] == (State.VALIDATION, State.DONE)
    # an older gpudrv left it at uncordon-required: that state is still run (it leaves the cordon)
    assert upgrade.remaining(State.UNCORDON, cordoned_before=True) == (State.UNCORDON, State.DONE)


def test_an_unknown_state_label_is_not_no_state() -> None:
    assert upgrade.state_of({tags.UPGRADE_STATE: "wait-for-jobs-required"}) is State.WAIT_FOR_JOBS
    assert upgrade.state_of({tags.UPGRADE_STATE: "drain-required"}) is State.DRAIN
    assert upgrade.state_of({tags.UPGRADE_STATE: "reboot-required"}) is None
    assert upgrade.unknown_state({tags.UPGRADE_STATE: "reboot-required"}) == "reboot-required"
    assert upgrade.unknown_state({tags.UPGRADE_STATE: ""}) is None  # the libs' UpgradeStateUnknown
    assert upgrade.unknown_state({tags.UPGRADE_STATE: "drain-required"}) is None


@pytest.mark.parametrize(
    "state", ["reboot-required", "node-maintenance-required", "post-maintenance-required"]
)
def test_a_node_in_a_state_lab_mode_does_not_drive_is_left_alone_never_nothing_to_do(state: str) -> None:
    """Even when its driver labels already match: the operator (or a maintenance operator) may have
    cordoned it, so "nothing to do" would strand it."""
    plan = upgrade.plan_node(desired(NEW), live(NEW, state=state, unschedulable=True), MERGED)
    assert plan is not None and plan.blocked and not plan.skipped
    ok, detail = gates(plan)["state"]
    assert not ok and detail.endswith("left alone (cordoned)")
    assert upgrade.batch([plan], 5, {}, []) == []


def test_the_skip_label_leaves_a_node_alone_before_its_upgrade_starts() -> None:
    skipping = live(OLD)
    skipping = LiveNode(Node("n1", {**skipping.node.labels, upgrade.SKIP_LABEL: "true"}), False, {})
    plan = upgrade.plan_node(desired(NEW), skipping, MERGED)
    assert plan is not None and plan.skipped and plan.blocked
    assert gates(plan)["skip"] == (False, "nvidia.com/gpu-driver-upgrade.skip=true: skipped, left alone")
    # Past upgrade-required the libs no longer read it: a node mid-upgrade goes on.
    mid = LiveNode(
        Node("n1", {**skipping.node.labels, tags.UPGRADE_STATE: "drain-required"}), True,
        {upgrade.INITIAL_UNSCHEDULABLE: "true"},
    )  # fmt: skip
    resumed = upgrade.plan_node(desired(NEW), mid, MERGED)
    assert resumed is not None and not resumed.blocked and resumed.steps[0] is State.DRAIN
    # "false" (or any other value) is no skip
    other = LiveNode(Node("n1", {**skipping.node.labels, upgrade.SKIP_LABEL: "false"}), False, {})
    assert not upgrade.plan_node(desired(NEW), other, MERGED).skipped  # type: ignore[union-attr]


# --- which nodes need an upgrade ------------------------------------------------------------------


def test_a_node_on_its_desired_driver_needs_nothing() -> None:
    assert upgrade.plan_node(desired(NEW), live(NEW), MERGED) is None
    assert upgrade.plan_node(desired(NEW), live(NEW, state="upgrade-done"), MERGED) is None


def test_a_node_mid_upgrade_is_planned_even_when_its_labels_already_match() -> None:
    plan = upgrade.plan_node(desired(NEW), live(NEW, state="validation-required"), MERGED)
    assert plan is not None
    assert plan.steps[0] is State.VALIDATION
    assert plan.in_progress


def test_a_failed_upgrade_out_of_sync_is_tried_again_from_the_start() -> None:
    plan = upgrade.plan_node(desired(NEW), live(OLD, state="upgrade-failed", unschedulable=True), MERGED)
    assert plan is not None
    assert plan.steps == upgrade.ORDER
    assert not plan.in_progress
    assert not plan.cordoned_before  # gpudrv's own cordon: no initial-state annotation on the node


def test_a_failed_upgrade_whose_driver_is_in_sync_is_uncordoned() -> None:
    plan = upgrade.plan_node(desired(NEW), live(NEW, state="upgrade-failed", unschedulable=True), MERGED)
    assert plan is not None and not plan.blocked
    assert plan.steps == (State.UNCORDON, State.DONE)
    before = upgrade.plan_node(
        desired(NEW),
        live(NEW, state="upgrade-failed", unschedulable=True, **{INITIAL: "true"}),
        MERGED,
    )
    assert before is not None and before.steps == (State.DONE,)


def test_a_node_without_desired_driver_labels_is_not_managed() -> None:
    assert upgrade.plan_node(Node("n1", BASE), live(OLD), MERGED) is None


@pytest.mark.parametrize("rev", ["7a", "07\n::warning::x", ""])
def test_a_desired_driver_that_is_not_numeric_blocks(rev: str) -> None:
    bad = Node("n1", {**BASE, **Driver("550", "90", rev).labels()})
    plan = upgrade.plan_node(bad, live(), MERGED)
    if rev == "":
        assert plan is None  # no complete desired driver: not managed
        return
    assert gates(plan) == {"driver": (False, f"desired driver {'550.90.' + rev!r} is not numeric")}


def test_a_declared_node_missing_live() -> None:
    assert gates(upgrade.plan_node(desired(), None, MERGED)) == {"node": (False, "not found in the cluster")}


def test_target_tag_keeps_the_live_kernel_and_os() -> None:
    plan = upgrade.plan_node(desired(), live(), MERGED)
    assert plan is not None
    assert (plan.live_driver, plan.target, plan.target_tag) == (OLD, NEW, TARGET)


def test_target_tag_problem_blocks() -> None:
    broken = LiveNode(Node("n1", {**OLD.labels(), tags.GPU_PRESENT: "true"}))
    assert gates(upgrade.plan_node(desired(), broken, MERGED))["image"] == (
        False,
        f"no target tag: label {tags.KERNEL} is missing",
    )


# --- the image gate -------------------------------------------------------------------------------


def test_image_gate_passes_with_the_commit_it_came_in() -> None:
    ok, detail = gates(upgrade.plan_node(desired(), live(), MERGED))["image"]
    assert ok
    assert detail == f"{TARGET} is in matrix/support-matrix.csv on origin/main since abc1234def56"


def test_image_gate_refuses_a_row_that_is_only_in_the_working_tree() -> None:
    branch_only = Images("origin/main", "matrix/support-matrix.csv", frozenset(), working=frozenset({TARGET}))
    ok, detail = gates(upgrade.plan_node(desired(), live(), branch_only))["image"]
    assert not ok
    assert detail == f"{TARGET} is not in {MATRIX} on origin/main (only in the working tree: merge it first)"
    nowhere = Images("main", "m.csv", frozenset())
    assert gates(upgrade.plan_node(desired(), live(), nowhere))["image"] == (
        False,
        f"{TARGET} is not in m.csv on main",
    )


# --- the budget gate ------------------------------------------------------------------------------


def test_budget_with_no_room_blocks_before_cordon() -> None:
    ok, detail = gates(upgrade.plan_node(desired(), live(), MERGED, [TRAINER], [pdb(0)]))["budget"]
    assert not ok
    numbers = "minAvailable 4, currentHealthy 4, desiredHealthy 4, disruptionsAllowed 0"
    assert detail == f"PDB ml/trainer-pdb allows 0 disruptions ({numbers})"


def test_budget_with_room_names_the_numbers() -> None:
    ok, detail = gates(upgrade.plan_node(desired(), live(), MERGED, [TRAINER], [pdb(1)]))["budget"]
    assert ok
    assert detail.startswith("PDB ml/trainer-pdb: 1 pod(s) to evict, minAvailable 4, currentHealthy 4")


def test_stale_budget_status_is_said() -> None:
    ok, detail = gates(upgrade.plan_node(desired(), live(), MERGED, [TRAINER], [pdb(0, fresh=False)]))[
        "budget"
    ]
    assert not ok
    assert "its status is not yet recomputed" in detail


def test_no_budget_gate_once_the_node_is_cordoned_by_the_upgrade() -> None:
    """Past cordon-required the node is already empty-ing: the drain itself waits on the budget."""
    plan = upgrade.plan_node(
        desired(), live(state="drain-required", unschedulable=True), MERGED, [TRAINER], [pdb(0)]
    )
    assert "budget" not in gates(plan)
    assert plan is not None and not plan.blocked


def test_pods_without_controller_block_without_force() -> None:
    bare = Pod("ml", "bare")
    ok, detail = gates(upgrade.plan_node(desired(), live(), MERGED, [bare], []))["pods"]
    assert (ok, detail) == (False, "pod ml/bare has no controller (use --force to delete it)")
    assert "pods" not in gates(upgrade.plan_node(desired(), live(), MERGED, [bare], [], force=True))


def test_a_pod_under_two_budgets_blocks() -> None:
    ok, detail = gates(
        upgrade.plan_node(desired(), live(), MERGED, [TRAINER], [pdb(1), pdb(1, name="other")])
    )["budget"]
    assert not ok
    assert "is selected by several PDBs (ml/trainer-pdb, ml/other)" in detail


# --- the cordon gate ------------------------------------------------------------------------------


def test_a_node_cordoned_by_someone_else_stays_cordoned() -> None:
    plan = upgrade.plan_node(desired(), live(unschedulable=True), MERGED)
    assert plan is not None and plan.cordoned_before
    assert gates(plan)["cordon"] == (True, "cordoned before the upgrade: it stays cordoned afterwards")


def test_the_initial_state_annotation_counts_by_presence_once_the_upgrade_began() -> None:
    """upgrade_state.go: set only when unschedulable; read with `_, ok := Annotations[key]`."""
    ours = live(state="drain-required", unschedulable=True)
    assert not upgrade.cordoned_before(LiveNode(ours.node, True, {}))  # gpudrv's own cordon
    assert upgrade.cordoned_before(LiveNode(ours.node, True, {upgrade.INITIAL_UNSCHEDULABLE: "true"}))
    assert upgrade.cordoned_before(LiveNode(ours.node, True, {upgrade.INITIAL_UNSCHEDULABLE: ""}))
    fresh = live(unschedulable=True)
    assert upgrade.cordoned_before(fresh)  # not started: the cordon now is the answer
    assert not upgrade.cordoned_before(LiveNode(fresh.node, False, {upgrade.INITIAL_UNSCHEDULABLE: "true"}))


def test_an_older_gpudrvs_annotation_is_still_read_by_its_value() -> None:
    ours = live(state="drain-required", unschedulable=True)
    legacy = upgrade.LEGACY_INITIAL_UNSCHEDULABLE
    assert not upgrade.cordoned_before(LiveNode(ours.node, True, {legacy: "false"}))
    assert upgrade.cordoned_before(LiveNode(ours.node, True, {legacy: "true"}))


def test_upgrade_required_without_the_annotation_reads_the_cordon_now() -> None:
    """An older gpudrv wrote its annotation with cordon-required: at upgrade-required gpudrv has not
    cordoned the node yet, so a cordon there is someone else's."""
    assert upgrade.cordoned_before(live(state="upgrade-required", unschedulable=True))
    assert not upgrade.cordoned_before(live(state="upgrade-required"))


# --- batches --------------------------------------------------------------------------------------


def plan_for(name: str, state: str | None = None) -> upgrade.NodePlan:
    return upgrade.NodePlan(name, NEW, OLD, TARGET, upgrade.state_of({tags.UPGRADE_STATE: state or ""}))


def test_batch_resumes_in_progress_nodes_first_and_respects_max_parallel() -> None:
    plans = [plan_for("a"), plan_for("b"), plan_for("c", "drain-required")]
    assert [p.node for p in upgrade.batch(plans, 1, {}, [])] == ["c"]
    assert [p.node for p in upgrade.batch(plans, 2, {}, [])] == ["c", "a"]


def test_batch_never_needs_more_disruptions_than_a_budget_allows() -> None:
    pods = {name: [Pod("ml", f"t-{name}", {"app": "trainer"}, "ReplicaSet")] for name in "abc"}
    plans = [plan_for("a"), plan_for("b"), plan_for("c")]
    assert [p.node for p in upgrade.batch(plans, 3, pods, [pdb(1)])] == ["a"]
    assert [p.node for p in upgrade.batch(plans, 3, pods, [pdb(2)])] == ["a", "b"]


def test_blocked_plans_are_never_batched() -> None:
    blocked = upgrade.NodePlan("a", NEW, gates=(upgrade.Gate("image", False, "x"),))
    assert upgrade.batch([blocked], 5, {}, []) == []


# --- pods and selectors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (Pod("n", "ds", owner_kind="DaemonSet"), Role.STAYS),
        (Pod("n", "mirror", mirror=True), Role.STAYS),
        (Pod("n", "done", owner_kind="Job", phase="Succeeded"), Role.FINISHED),
        (Pod("n", "bare"), Role.UNMANAGED),
        (Pod("n", "gpu", owner_kind="ReplicaSet", gpu=True), Role.GPU),
        (Pod("n", "web", owner_kind="ReplicaSet"), Role.OTHER),
        # the operator's drain selector, nvidia.com/gpu-driver-upgrade-drain.skip!=true
        (Pod("n", "web", {budget.DRAIN_SKIP_LABEL: "true"}, owner_kind="ReplicaSet"), Role.STAYS),
        (Pod("n", "bare", {budget.DRAIN_SKIP_LABEL: "true"}), Role.STAYS),
        (Pod("n", "web", {budget.DRAIN_SKIP_LABEL: "false"}, owner_kind="ReplicaSet"), Role.OTHER),
        # ...but the GPU pod deletion before the drain takes GPU pods whatever their labels
        (Pod("n", "gpu", {budget.DRAIN_SKIP_LABEL: "true"}, owner_kind="ReplicaSet", gpu=True), Role.GPU),
    ],
)
def test_pod_roles_follow_kubectl_drain(pod: Pod, expected: Role) -> None:
    assert budget.role(pod) is expected


@pytest.mark.parametrize(
    ("spec", "labels", "matches"),
    [
        ({}, {"any": "thing"}, True),
        ({"matchLabels": {"app": "t"}}, {"app": "t", "x": "y"}, True),
        ({"matchLabels": {"app": "t"}}, {"app": "u"}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Bogus"}]}, {"tier": "a"}, False),
        # LabelSelectorAsSelector knows no Gt or Lt (node affinity does), and refuses what cannot parse:
        ({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["1"]}]}, {"gen": "2"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": []}]}, {}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]},
            {"tier": "a"},
            False,
        ),
        ({"matchExpressions": [{"key": "-bad", "operator": "DoesNotExist"}]}, {}, False),
        ({}, {"any": "pod"}, True),  # policy/v1: an empty selector selects every pod
    ],
)
def test_label_selectors(spec: dict[str, object], labels: dict[str, str], matches: bool) -> None:
    selector = budget.selector(spec)
    assert selector is not None
    assert selector.matches(labels) is matches


def test_a_null_selector_selects_no_pod() -> None:
    assert budget.selector(None) is None
    assert not Budget("ml", "x", None).covers(TRAINER)


def test_budgets_only_cover_pods_of_their_namespace() -> None:
    assert pdb(1).covers(TRAINER)
    assert not pdb(1).covers(Pod("other", "trainer-1", {"app": "trainer"}, "ReplicaSet"))


def test_terminating_and_staying_pods_need_no_disruption() -> None:
    pods = [
        Pod("ml", "gone", {"app": "trainer"}, "ReplicaSet", terminating=True),
        Pod("ml", "ds", {"app": "trainer"}, "DaemonSet"),
    ]
    assert budget.blockers(pods, [pdb(0)]) == []
    assert budget.evictions_per_budget(pods, [pdb(0)]) == {}


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/mig-3g.40gb", True),
        ("nvidia.com/migration", False),
        ("amd.com/gpu", False),
        ("cpu", False),
    ],
)
def test_gpu_resources_are_the_operators_prefixes(name: str, gpu: bool) -> None:
    """gpu-operator cmd/gpu-operator/main.go gpuPodSpecFilter: HasPrefix nvidia.com/gpu or nvidia.com/mig-."""
    assert budget.gpu_resource(name) is gpu


def test_drain_skip_pods_need_no_disruption_and_block_nothing() -> None:
    pods = [Pod("ml", "kept", {"app": "trainer", budget.DRAIN_SKIP_LABEL: "true"}, "ReplicaSet")]
    assert budget.blockers(pods, [pdb(0)]) == []
    assert budget.evictions_per_budget(pods, [pdb(0)]) == {}


def test_the_plan_says_skipped_not_blocked() -> None:
    from reconciler.render.upgrades import plan_text

    skipping = LiveNode(Node("n1", {**live(OLD).node.labels, upgrade.SKIP_LABEL: "true"}), False, {})
    plan = upgrade.plan_node(desired(NEW), skipping, MERGED)
    assert plan is not None
    text = plan_text([plan], MERGED)
    assert "n1: driver 535.183.06 -> 550.90.07 SKIPPED" in text
    assert "[blocked] skip: nvidia.com/gpu-driver-upgrade.skip=true: skipped, left alone" in text
    assert text.endswith("0 of 1 node(s) can proceed, 1 skipped")
