"""The reconcile loop's pure parts: the watched fleet's audit, the Lease rules, the access list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.adapters.files import operator_contract
from reconciler.core.audit.audit import Status
from reconciler.core.contract.operator import Contract, Mode, contract, resource
from reconciler.core.images.tags import KERNEL, NEXT_KERNEL, UPGRADE_STATE, Node
from reconciler.core.incluster import access, election
from reconciler.core.incluster.election import Record, Step, Timing
from reconciler.core.incluster.fleetwatch import (
    NO_STATE,
    Change,
    FleetAudit,
    Kind,
    backoff,
    check_node,
    check_node_next,
)
from tests.unit.test_operator import nvd

RULE = operator_contract.rules().newest
LAB = Contract(Mode.LAB, RULE)
LAB_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.driver.rev": "07",
    KERNEL: "5.15.0-119-generic",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}
OK_TAG = "550-5.15.0-119-generic-ubuntu22.04"
TAGS = frozenset({OK_TAG})


def gpu(name: str, **changes: str | None) -> Node:
    labels = {**LAB_LABELS, **changes}
    return Node(name, {key: value for key, value in labels.items() if value is not None})


def kinds(changes: list[Change]) -> dict[str, Kind]:
    return {change.node: change.kind for change in changes}


def test_a_new_node_is_audited_and_only_a_label_change_audits_it_again() -> None:
    fleet = FleetAudit()
    assert fleet.upsert(gpu("a"))
    assert fleet.upsert(gpu("b", **{KERNEL: "6.1.0-9-generic"}))
    assert kinds(fleet.audit({"a", "b"}, LAB, TAGS)) == {"b": Kind.MISSING}
    assert fleet.missing() == {"b": "550-6.1.0-9-generic-ubuntu22.04"}
    # The same labels again (a status heartbeat, a resync of the watch): nothing to audit.
    assert not fleet.upsert(gpu("b", **{KERNEL: "6.1.0-9-generic"}))
    # A kernel bump: audited, and a new tag is a new problem.
    assert fleet.upsert(gpu("b", **{KERNEL: "6.1.0-10-generic"}))
    (change,) = fleet.audit({"b"}, LAB, TAGS)
    assert change.kind is Kind.MISSING and change.before is not None
    assert (change.before.detail, change.tag) == (
        "550-6.1.0-9-generic-ubuntu22.04",
        "550-6.1.0-10-generic-ubuntu22.04",
    )
    # The same problem found again is no change.
    assert fleet.audit_all(LAB, TAGS) == []


def test_a_matrix_row_clears_it_and_says_which_tag() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("b", **{KERNEL: "6.1.0-9-generic"}))
    fleet.audit_all(LAB, TAGS)
    (change,) = fleet.audit_all(LAB, TAGS | {"550-6.1.0-9-generic-ubuntu22.04"})
    assert (change.kind, change.finding, change.tag) == (
        Kind.CLEARED,
        None,
        "550-6.1.0-9-generic-ubuntu22.04",
    )
    assert fleet.findings == {}


def test_nodes_that_leave_or_stop_being_gpu_nodes_are_gone() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("a", **{KERNEL: "6.1.0-9-generic"}))
    fleet.upsert(gpu("b"))
    fleet.audit_all(LAB, TAGS)
    assert fleet.upsert(gpu("a", **{"nvidia.com/gpu.present": "false"}))  # no longer a GPU node: removed
    assert "a" not in fleet.nodes
    (change,) = fleet.audit({"a"}, LAB, TAGS)
    assert change.kind is Kind.GONE and change.before is not None
    assert fleet.remove("b") and not fleet.remove("b")


def test_a_relist_reports_what_changed_meanwhile() -> None:
    fleet = FleetAudit()
    fleet.replace([gpu("a"), gpu("b"), gpu("c")])
    touched = fleet.replace([gpu("a"), gpu("b", **{KERNEL: "6.1.0-9-generic"}), gpu("d"), Node("cpu", {})])
    assert touched == {"b", "c", "d"}
    assert sorted(fleet.nodes) == ["a", "b", "d"]


def test_labels_that_give_no_tag_are_invalid() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("x", **{KERNEL: None}))
    (change,) = fleet.audit({"x"}, LAB, TAGS)
    assert change.kind is Kind.INVALID and change.finding is not None and change.tag is None
    assert KERNEL in change.finding.detail
    assert fleet.invalid() == {"x": change.finding.detail}


def test_two_nvidia_drivers_claiming_a_node_are_that_nodes_problem_not_the_loops() -> None:
    selector = {"nvidia.com/gpu.present": "true"}
    both = contract([resource(nvd("one", selector)), resource(nvd("two", selector))], RULE)
    assert both.mode is Mode.NVIDIA_DRIVER
    tag, finding = check_node(both, gpu("x"), TAGS)
    assert tag is None and finding is not None and finding.status is Status.INVALID
    assert "selected by both" in finding.detail


NEXT = "5.15.0-120-generic"
NEXT_TAG = "550-5.15.0-120-generic-ubuntu22.04"


def test_a_next_kernel_without_its_image_is_kept_beside_the_running_finding_with_no_change() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("a", **{NEXT_KERNEL: NEXT}))
    fleet.upsert(gpu("b", **{KERNEL: "6.1.0-9-generic", NEXT_KERNEL: NEXT}))
    fleet.upsert(gpu("c", **{NEXT_KERNEL: LAB_LABELS[KERNEL]}))  # the next kernel is the running one
    changes = fleet.audit_all(LAB, TAGS)
    assert kinds(changes) == {"b": Kind.MISSING}  # NEXT-MISSING is a series, not a Change nor an event
    assert fleet.next_missing() == {"a": (NEXT, NEXT_TAG), "b": (NEXT, NEXT_TAG)}
    assert fleet.missing() == {"b": "550-6.1.0-9-generic-ubuntu22.04"}  # b lacks both
    # The row for the next kernel clears both at once.
    assert fleet.audit_all(LAB, TAGS | {NEXT_TAG}) == [] and fleet.next_missing() == {}


def test_a_next_kernel_label_changed_by_the_watch_moves_or_clears_that_nodes_finding() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("a", **{NEXT_KERNEL: NEXT}))
    fleet.audit({"a"}, LAB, TAGS)
    later = "5.15.0-121-generic"
    assert fleet.upsert(gpu("a", **{NEXT_KERNEL: later}))  # the probe saw another kernel installed
    assert fleet.audit({"a"}, LAB, TAGS) == []
    assert fleet.next_missing() == {"a": (later, "550-5.15.0-121-generic-ubuntu22.04")}
    assert fleet.upsert(gpu("a"))  # the label gone: the next kernel is the running one again
    fleet.audit({"a"}, LAB, TAGS)
    assert fleet.next_missing() == {}
    fleet.upsert(gpu("a", **{NEXT_KERNEL: NEXT}))
    fleet.audit({"a"}, LAB, TAGS)
    assert fleet.remove("a")  # deleted: its series goes with it
    (change,) = fleet.audit({"a"}, LAB, TAGS)
    assert change.kind is Kind.GONE and fleet.next_missing() == {}


def test_the_reboot_itself_turns_next_missing_into_missing() -> None:
    fleet = FleetAudit()
    fleet.upsert(gpu("a", **{NEXT_KERNEL: NEXT}))
    fleet.audit_all(LAB, TAGS)
    assert fleet.upsert(gpu("a", **{KERNEL: NEXT, NEXT_KERNEL: NEXT}))  # rebooted, gate ignored
    (change,) = fleet.audit({"a"}, LAB, TAGS)
    assert (change.kind, fleet.missing(), fleet.next_missing()) == (Kind.MISSING, {"a": NEXT_TAG}, {})


@pytest.mark.parametrize("hostile", ['6.1"} 1\ngpudrv_leader 1', "../../etc", "x" * 300])
def test_a_next_kernel_that_cannot_be_part_of_a_tag_never_becomes_a_series(hostile: str) -> None:
    node = gpu("a", **{NEXT_KERNEL: hostile})
    assert check_node_next(LAB, node, TAGS) is None
    fleet = FleetAudit()
    fleet.upsert(node)
    assert fleet.audit_all(LAB, TAGS) == [] and fleet.next_missing() == {}


def test_a_node_with_no_running_image_to_name_has_no_next_kernel_finding() -> None:
    assert (
        check_node_next(LAB, gpu("x", **{"nvidia.com/cuda.driver.major": None, NEXT_KERNEL: NEXT}), TAGS)
        is None
    )
    selector = {"nvidia.com/gpu.present": "true"}
    both = contract([resource(nvd("one", selector)), resource(nvd("two", selector))], RULE)
    assert check_node_next(both, gpu("x", **{NEXT_KERNEL: NEXT}), TAGS) is None


def test_nodes_per_upgrade_state_name_every_known_state() -> None:
    fleet = FleetAudit()
    fleet.replace([gpu("a"), gpu("b", **{UPGRADE_STATE: "upgrade-done"}), gpu("c", **{UPGRADE_STATE: "odd"})])
    counts = fleet.upgrade_states(["upgrade-required", "upgrade-done"])
    assert counts == {"upgrade-required": 0, "upgrade-done": 1, NO_STATE: 1, "odd": 1}


def test_backoff_doubles_and_is_bounded() -> None:
    assert [backoff(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff(3, jitter=0.99) == pytest.approx(2 * 1.198)
    assert backoff(40, jitter=0.99) == 30


# --- leader election --------------------------------------------------------------------------------

WALL = datetime(2025, 1, 1, tzinfo=UTC)


def test_a_free_or_missing_lease_is_taken_and_ours_is_renewed() -> None:
    assert election.step(None, "a", 0, 0) is Step.CREATE
    created = election.claim(None, "a", 15, WALL)
    assert (created.holder, created.transitions, created.acquired, created.renewed) == ("a", 0, WALL, WALL)
    assert election.step(created, "a", 0, 100) is Step.RENEW
    renewed = election.claim(created, "a", 15, WALL + timedelta(seconds=2))
    assert (renewed.acquired, renewed.renewed, renewed.transitions) == (WALL, WALL + timedelta(seconds=2), 0)
    free = election.released(renewed, WALL)
    assert free.holder is None and free.duration == 1
    assert election.step(free, "b", observed_at=100, now=100) is Step.TAKE


def test_another_holders_lease_expires_on_this_candidates_own_clock() -> None:
    held = Record("a", 15, WALL, WALL, 3, "42")
    # However old its renewTime looks, a lease seen changing 14s ago is held.
    assert election.step(held, "b", observed_at=100, now=114) is Step.WAIT
    assert election.step(held, "b", observed_at=100, now=115) is Step.TAKE
    taken = election.claim(held, "b", 15, WALL + timedelta(seconds=20))
    assert (taken.holder, taken.transitions, taken.version) == ("b", 4, "42")  # CAS on the version read


def test_the_leader_steps_down_before_anyone_may_take_over() -> None:
    timing = Timing(15, 10, 2)
    assert timing.problem() is None
    assert not election.lost(last_renewed=0, now=9.9, timing=timing)
    assert election.lost(last_renewed=0, now=10, timing=timing)
    assert Timing(5, 5, 1).problem() is not None
    assert Timing(15, 10, 0).problem() is not None


# --- access ---------------------------------------------------------------------------------------


def test_access_reads_as_kubectl_auth_can_i_takes_it() -> None:
    texts = {item.text() for item in access.needs("gpudrv-system", "gpudrv-reconcile", apply=True)}
    assert {"watch nodes", "create pods/eviction", "patch events -n default",
            "update leases.coordination.k8s.io/gpudrv-reconcile -n gpudrv-system",
            "list clusterpolicies.nvidia.com", "patch poddisruptionbudgets.policy"} <= texts  # fmt: skip
    eviction = next(item for item in access.APPLY_NEEDS if item.subresource)
    assert eviction.attributes() == {"verb": "create", "resource": "pods", "subresource": "eviction"}


def test_no_lease_without_leader_election_and_the_audit_must_not_write_nodes() -> None:
    assert not any(item.resource == "leases" for item in access.needs(None, "x", apply=False))
    audit_excess = {item.text() for item in access.excess(apply=False)}
    assert {"patch nodes", "create pods/eviction", "get secrets", "list secrets"} <= audit_excess
    assert not audit_excess & {item.text() for item in access.needs("ns", "x", apply=False)}
    assert not {item.text() for item in access.excess(apply=True)} & {
        item.text() for item in access.needs("ns", "x", apply=True)
    }
