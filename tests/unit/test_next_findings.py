"""Issue 24, item 2: NEXT-MISSING findings (the image of the kernel a node boots next) on plain data,
in the core (audit, driver_images) and in what each command renders of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.core.audit import impact
from reconciler.core.audit.audit import Status, audit, audit_wants
from reconciler.core.contract import driver_images
from reconciler.core.images import tags
from reconciler.core.images.registry import parse_repository
from reconciler.core.images.tags import ImageKey, Node
from reconciler.core.views.fleet_page import Status as Row
from reconciler.core.views.fleet_page import coverage, node_rows, progress
from reconciler.render import audit as audit_view
from reconciler.render import registry as registry_view
from tests.unit import test_audit
from tests.unit.test_operator import RHEL, build, gpu, nvd, policy

RUNNING = "5.15.0-119-generic"
NEXT = "5.15.0-120-generic"
NOW_TAG = f"550-{RUNNING}-ubuntu22.04"
NEXT_TAG = f"550-{NEXT}-ubuntu22.04"


# The lab's GPU node of test_audit (kernel RUNNING by default): ubuntu 22.04, driver 550.
lab_node = test_audit.gpu


def upcoming(kernel: str) -> dict[str, str]:
    return {tags.NEXT_KERNEL: kernel}


# --- the lab's audit ----------------------------------------------------------------------------------


def test_a_next_kernel_without_its_image_is_next_missing() -> None:
    result = audit([lab_node("a", **upcoming(NEXT))], frozenset({NOW_TAG}))
    assert [f.line() for f in result.findings] == [
        f"a NEXT-MISSING {NEXT_TAG} (kernel {NEXT}, at its next reboot)"
    ]
    assert (result.findings[0].status, result.findings[0].kernel) == (Status.NEXT_MISSING, NEXT)
    assert result.next_kernels == {"a": NEXT}
    assert not result.ok


def test_the_next_kernels_image_in_the_matrix_is_ok() -> None:
    result = audit([lab_node("a", **upcoming(NEXT))], frozenset({NOW_TAG, NEXT_TAG}))
    assert result.ok
    assert result.next_kernels == {"a": NEXT}


def test_next_equal_to_running_or_absent_is_no_finding() -> None:
    nodes = [lab_node("a", **upcoming(RUNNING)), lab_node("b")]
    result = audit(nodes, frozenset({NOW_TAG}))
    assert result.ok
    assert result.next_kernels == {}


def test_an_invalid_next_kernel_label_is_one_invalid_finding() -> None:
    result = audit([lab_node("a", **upcoming("5.15 x"))], frozenset({NOW_TAG}))
    assert [(f.status, f.detail) for f in result.findings] == [
        (Status.INVALID, f"next kernel: label {tags.NEXT_KERNEL}='5.15 x' is not {tags.KERNEL_SHAPE}")
    ]


def test_a_node_lacking_both_images_gets_both_findings_running_first() -> None:
    nodes = [lab_node("b", **upcoming(NEXT)), lab_node("a", kernel="6.8.0-1-generic", **upcoming(NEXT))]
    result = audit(nodes, frozenset())
    assert [(f.node, f.status) for f in result.findings] == [
        ("a", Status.MISSING),
        ("a", Status.NEXT_MISSING),
        ("b", Status.MISSING),
        ("b", Status.NEXT_MISSING),
    ]


def test_a_node_without_a_running_tag_has_no_next_finding() -> None:
    broken = lab_node("a", **upcoming(NEXT))
    broken = Node("a", {k: v for k, v in broken.labels.items() if k != tags.DRIVER_MAJOR})
    result = audit([broken], frozenset())
    assert [f.status for f in result.findings] == [Status.INVALID]


# --- operator fleets ----------------------------------------------------------------------------------


def test_cluster_policy_next_image_is_the_full_reference() -> None:
    found = driver_images.wants(build(policy()), [gpu("a", **upcoming(NEXT))])
    result = audit_wants(found, frozenset({"550-5.15.0-119-generic-ubuntu22.04"}))
    [finding] = result.findings
    assert finding.line() == (
        f"a NEXT-MISSING nvcr.io/nvidia/driver:550-{NEXT}-ubuntu22.04 "
        f"(kernel {NEXT}, at its next reboot) (ClusterPolicy/cluster-policy)"
    )


def test_nvidiadriver_selecting_on_the_kernel_is_chosen_again_for_the_next_kernel() -> None:
    old = nvd("old-kernel", {tags.KERNEL: RUNNING}, version="550")
    new = nvd("new-kernel", {tags.KERNEL: NEXT}, version="570")
    found = driver_images.wants(build(old, new), [gpu("a", **upcoming(NEXT))])
    [now], [later] = found.wants, found.next_wants
    assert (now.resource and now.resource.name, later.resource and later.resource.name) == (
        "old-kernel",
        "new-kernel",
    )
    assert later.tag == f"570-{NEXT}-ubuntu22.04"
    result = audit_wants(found, frozenset({now.tag or ""}))
    assert [(f.status, f.detail) for f in result.findings] == [(Status.NEXT_MISSING, later.tag)]


def test_the_operators_os_tag_rule_applies_to_the_next_kernel() -> None:
    rhel_next = "5.14.0-503.el9_5.x86_64"
    found = driver_images.wants(build(policy()), [gpu("r", RHEL, **upcoming(rhel_next))])
    assert [want.tag for want in found.next_wants] == [f"550-{rhel_next}-rhel9"]


# --- rendered -----------------------------------------------------------------------------------------


def both() -> Any:
    nodes = [lab_node("a", kernel="6.8.0-1-generic", **upcoming(NEXT)), lab_node("b", **upcoming(NEXT))]
    return audit(nodes, frozenset({NOW_TAG}))


def test_json_has_the_status_the_next_kernel_and_the_counts() -> None:
    data = audit_view.as_json(both(), matrix="m.csv")
    assert (data["missing_count"], data["next_missing_count"]) == (1, 2)
    assert [(n["node"], n["status"], n["next_kernel"]) for n in data["nodes"]] == [
        ("a", "MISSING", NEXT),
        ("b", "NEXT-MISSING", NEXT),
    ]
    assert [(f["status"], f["tag"], f["next_kernel"]) for f in data["findings"]] == [
        ("MISSING", "550-6.8.0-1-generic-ubuntu22.04", None),
        ("NEXT-MISSING", NEXT_TAG, NEXT),
        ("NEXT-MISSING", NEXT_TAG, NEXT),
    ]


def test_github_annotations_say_the_image_is_needed_at_the_next_reboot() -> None:
    notes = audit_view.annotate(both(), Path("m.csv"))
    assert [note.title for note in notes] == [
        "a: driver image not in the support matrix",
        "a: driver image for its next kernel not in the support matrix",
        "b: driver image for its next kernel not in the support matrix",
    ]
    assert notes[2].message.startswith(f"node b boots kernel {NEXT} at its next reboot and then needs")
    summary = audit_view.summary(both(), Path("m.csv"))
    assert summary.heading == (
        "gpudrv audit: 1 of 2 GPU nodes without a driver image, 2 without the image of their next kernel"
    )
    assert audit_view.closing(both()) == "gpudrv audit: 2 GPU nodes, 1 MISSING, 0 INVALID, 2 NEXT-MISSING"


def test_operator_annotations_group_next_missing_apart() -> None:
    contract = build(policy())
    nodes = [gpu("a", **upcoming(NEXT)), gpu("b", **upcoming(NEXT))]
    result = audit_wants(driver_images.wants(contract, nodes), frozenset({NOW_TAG}))
    [note] = audit_view.annotate(result, Path("m.csv"))
    assert (
        "2 nodes (a, b) boot kernel " + NEXT + " at their next reboot and would then be stuck" in note.message
    )
    assert note.title == f"driver image {NEXT_TAG} for the next kernel is not in the support matrix"


def test_registry_audit_names_the_reference_of_the_next_image_too() -> None:
    repo = parse_repository("oci.example.com/nvidia/driver")
    result = registry_view.with_references(both(), repo)
    assert [f.image for f in result.findings] == [
        "oci.example.com/nvidia/driver:550-6.8.0-1-generic-ubuntu22.04",
        f"oci.example.com/nvidia/driver:{NEXT_TAG}",
        f"oci.example.com/nvidia/driver:{NEXT_TAG}",
    ]
    notes = registry_view.audit_annotations(result, repo)
    assert [note.title for note in notes] == [
        "driver image 550-6.8.0-1-generic-ubuntu22.04 is not in the registry",
        f"driver image {NEXT_TAG} is not in the registry (needed at the next reboot)",
    ]


# --- matrix impact ------------------------------------------------------------------------------------


def key(tag: str) -> ImageKey:
    branch, rest = tag.split("-", 1)
    kernel, os_tag = rest.rsplit("-", 1)
    return ImageKey(branch, kernel, os_tag)


def test_removing_the_row_a_next_kernel_needs_breaks_the_node() -> None:
    result = impact.impact([key(NOW_TAG), key(NEXT_TAG)], [key(NOW_TAG)], [lab_node("a", **upcoming(NEXT))])
    [node] = result.nodes
    assert (node.shown_before, node.shown_after, node.before, node.after) == (
        "OK",
        "NEXT-MISSING",
        "OK",
        "OK",
    )
    assert node.broken and result.failed
    assert node.next is not None and (node.next.kernel, node.next.tag) == (NEXT, NEXT_TAG)


def test_a_next_kernel_missing_at_the_base_too_is_not_this_changes_fault() -> None:
    result = impact.impact([key(NOW_TAG)], [key(NOW_TAG)], [lab_node("a", **upcoming(NEXT))])
    assert [(n.shown_before, n.shown_after, n.broken) for n in result.nodes] == [
        ("NEXT-MISSING", "NEXT-MISSING", False)
    ]


def test_adding_the_next_kernels_row_fixes_it() -> None:
    result = impact.impact([key(NOW_TAG)], [key(NOW_TAG), key(NEXT_TAG)], [lab_node("a", **upcoming(NEXT))])
    [node] = result.nodes
    assert (node.shown_before, node.shown_after, node.broken, node.changed) == (
        "NEXT-MISSING",
        "OK",
        False,
        True,
    )


# --- the fleet page -----------------------------------------------------------------------------------


def test_fleet_page_cells_and_rows_show_the_next_kernel() -> None:
    nodes = [lab_node("a", **upcoming(NEXT)), lab_node("b")]
    found = driver_images.wants(build(), nodes)
    grid = coverage([key(NOW_TAG)], found.wants, found.next_wants)
    assert [(c.key.tag, c.nodes, c.next_nodes) for c in grid.next_missing] == [(NEXT_TAG, (), ("a",))]
    assert (grid.missing, grid.nodes_next_missing) == ((), 1)
    rows = node_rows(found.wants, frozenset({NOW_TAG}), progress([]), found.next_wants)
    assert [(r.node, r.status, r.next_kernel, r.next_tag) for r in rows] == [
        ("a", Row.NEXT_MISSING, NEXT, NEXT_TAG),
        ("b", Row.OK, None, None),
    ]


# --- a hostile next-kernel label ----------------------------------------------------------------------

HOSTILE = ["x\n::error::owned", "5.15\r\n##[warning]x", "a\u2028::add-mask::b", "%0A::error::c", "<b>|`*"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_next_kernel_label_stays_one_line_and_escaped(value: str) -> None:
    result = audit([lab_node("a", **upcoming(value))], frozenset({NOW_TAG}))
    [finding] = result.findings
    assert finding.status is Status.INVALID
    assert (
        finding.line()
        == f"a INVALID next kernel: label {tags.NEXT_KERNEL}={value!r} is not {tags.KERNEL_SHAPE}"
    )
    assert finding.line().isprintable()
    data = audit_view.as_json(result, matrix="m.csv")
    assert data["findings"][0]["reason"] == finding.detail and data["nodes"][0]["next_kernel"] is None
    [note] = audit_view.annotate(result, Path("m.csv"))
    command = note.command()
    assert len(command.splitlines()) == 1 and "##[" not in command  # every break, \u2028 too
    table = audit_view.summary(result, Path("m.csv")).markdown(budget=1 << 20, max_rows=10)
    [row] = [line for line in table.splitlines() if line.startswith("| `a`")]
    assert row.count(" | ") == 3  # four cells: a `|` in the value is escaped
