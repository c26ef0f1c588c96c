"""matrix impact with a contract on each side (core/audit/impact.py impact_sides), on plain data."""

from __future__ import annotations

from reconciler.core.audit.impact import Side, impact_sides
from reconciler.core.contract.driver_images import wants
from reconciler.core.images.tags import ImageKey
from tests.unit.test_operator import build, gpu, policy

RHEL = ("rhel", "9.4", "5.14.0-427.13.1.el9_4.x86_64")
ARROW = "\u2192"


def side(version: str, release: str, rule_from: str) -> Side:
    contract = build(policy(version=version), release=release)
    return Side(contract, wants(contract, [gpu("n0", RHEL)]).wants, rule_from)


def key(tag: str) -> ImageKey:
    branch, _, rest = tag.partition("-")
    kernel, _, os_tag = rest.rpartition("-")
    return ImageKey(branch, kernel, os_tag)


def test_a_rule_change_retags_the_node_and_names_both_releases() -> None:
    base, head = side("550", "v25.3.4", "chart v25.3.4"), side("550", "v26.7.0", "chart v26.7.0")
    old_tag, new_tag = base.wants[0].tag, head.wants[0].tag
    assert old_tag is not None and new_tag is not None and old_tag.endswith("rhel9.4")
    result = impact_sides([key(old_tag)], [key(old_tag)], base, head)
    (node,) = result.nodes
    assert (node.before_tag, node.tag, node.before, node.after, node.broken) == (
        old_tag,
        new_tag,
        "OK",
        "MISSING",
        True,
    )
    assert result.causes == (
        f"chart v25.3.4 {ARROW} v26.7.0 changes the os tag of rhel 9.4 nodes: rhel9.4 {ARROW} rhel9",
    )


def test_a_new_image_missing_where_the_old_one_was_missing_too_still_fails() -> None:
    base, head = side("535", "v26.7.0", "chart v26.7.0"), side("550", "v26.7.0", "chart v26.7.0")
    result = impact_sides([], [], base, head)
    (node,) = result.nodes
    assert (node.before, node.after, node.broken, result.failed) == ("MISSING", "MISSING", True, True)
    assert node.cause is not None and node.cause.startswith(f"driver version 535 {ARROW} 550")


def test_the_same_contract_is_the_matrix_impact_alone() -> None:
    base = head = side("550", "v26.7.0", "chart v26.7.0")
    result = impact_sides([], [], base, head, ["x.yaml:3: refused"])
    assert [(n.retagged, n.broken) for n in result.nodes] == [(False, False)]
    assert (result.causes, result.failed) == ((), True)  # the problem fails it
