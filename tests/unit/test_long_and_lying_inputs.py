"""Issue 30: what still reached a traceback (a list whose items are a string, a kind that is a list,
an integer of 5,000 digits, a symlink loop) is one clear error, or read as the API server reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters import files, kube
from reconciler.adapters.ci import github
from reconciler.adapters.files import manifests, operator_contract
from reconciler.adapters.kube import jsonstream
from reconciler.core.base import selectors
from reconciler.core.base.selectors import Requirement
from reconciler.core.images import history, os_tags
from reconciler.core.views import fleet_page
from reconciler.errors import GpudrvError
from tests.unit.fake_kube import HOST, always
from tests.unit.fake_kube import gateway as faked

LONG = "9" * 5000  # int() refuses a text of more than 4,300 digits (a ValueError)


def gateway(answer: Any) -> kube.Gateway:
    return faked(always(answer))[0]


# --- lists: whoever reads a list gets a list of named objects of the resource's shape ------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"items": "x"},
            "sent a ClusterPolicy list the API never sends: items is the string 'x', not a list",
        ),
        ({"items": 5}, "sent a ClusterPolicy list the API never sends: items is the number 5, not a list"),
        (
            {"items": {"a": 1}},
            "sent a ClusterPolicy list the API never sends: items is an object, not a list",
        ),
        (
            {"items": [7]},
            "sent a ClusterPolicy list the API never sends: items[0] is the number 7, not an object",
        ),
        (
            {"items": [{"metadata": "x"}]},
            "sent a ClusterPolicy list the API never sends: items[0].metadata is the string",
        ),
        (
            {"items": [{"metadata": {}}]},
            "sent a ClusterPolicy list the API never sends: items[0].metadata.name is missing",
        ),
    ],
)
def test_a_list_of_the_wrong_shape_is_one_error(document: object, message: str) -> None:
    with pytest.raises(GpudrvError) as caught:
        list(gateway(document).pages(kube.CLUSTER_POLICIES))
    assert str(caught.value).startswith(f"the cluster at {HOST} ")
    assert message in str(caught.value)


def test_a_list_of_the_right_shape_and_an_object_pass() -> None:
    listed = {"items": [{"metadata": {"name": "a"}}], "metadata": {}}
    assert list(gateway(listed).pages(kube.CLUSTER_POLICIES)) == listed["items"]
    assert list(gateway(b'{"items": null, "kind": "NodeList"}').pages(kube.NODES)) == []
    assert gateway(b'{"metadata": {"name": "n"}}').get(kube.NODES, "n") == {"metadata": {"name": "n"}}


def test_events_of_the_wrong_shape_are_one_error() -> None:
    document = {"items": [{"metadata": {"name": "e"}, "involvedObject": "node-1"}], "metadata": {}}
    with pytest.raises(GpudrvError, match=r"sent an Event list .*items\[0\]\.involvedObject is the string"):
        list(gateway(document).items(kube.EVENTS))


# --- numbers longer than int() reads --------------------------------------------------------------------


def test_a_number_of_5000_digits_in_an_answer_is_one_error() -> None:
    data = f'{{"items": [], "metadata": {{"resourceVersion": {LONG}}}}}'.encode()
    with pytest.raises(GpudrvError, match=r"not JSON: a number of more than 4,300 digits$"):
        gateway(data).get(kube.NODES, "n")
    with pytest.raises(jsonstream.StreamError, match="a number of more than 4,300 digits"):
        list(jsonstream.ListStream([f'{{"items": [{{"n": {LONG}}}]}}'.encode()]))


def test_a_gt_value_of_5000_digits_is_too_long_as_for_the_scheduler() -> None:
    assert selectors.parse_int64(LONG) is None
    assert selectors.parse_int64("-" + LONG) is None
    assert selectors.parse_int64("0" * 5000 + "42") == 42  # Go's ParseInt takes leading zeros
    assert selectors.parse_int64("9223372036854775807") == 2**63 - 1
    assert selectors.parse_int64("9223372036854775808") is None
    problem = selectors.problem(Requirement("a", selectors.GT, (LONG,)))
    assert problem == "a Gt: the value is too long (5,000 digits; an int64 has at most 19)"
    assert (
        selectors.problem(Requirement("a", selectors.LT, ("x",))) == "a Lt: the value 'x' is not an integer"
    )
    # A node label of 5,000 digits is no integer to compare: the node does not match.
    reason = selectors.value_why_not(Requirement("a", selectors.GT, ("1",)), LONG)
    assert reason is not None and "is not an integer" in reason


def test_natural_order_with_numbers_of_any_length() -> None:
    names = [f"n{LONG}", "n10", "n9", "n²", "n09", "n"]
    assert sorted(names, key=fleet_page.natural) == ["n", "n9", "n09", "n10", f"n{LONG}", "n²"]


def test_an_os_major_or_a_release_of_5000_digits() -> None:
    rule = operator_contract.rules().for_version("v26.3.1")
    with pytest.raises(os_tags.RuleError, match=r"VERSION_ID major '9999.*' is out of range"):
        rule.os_tag("rhel", LONG + ".4")
    assert rule.os_tag("rhel", "9223372036854775807.4") == "rhel9223372036854775807"
    with pytest.raises(os_tags.RuleError, match=r"is not a release like v26\.3\.1"):
        os_tags.parse_release(f"v{LONG}.3.1")


def test_a_pr_number_of_5000_digits_is_no_pr_number() -> None:
    assert history.pr_number(f"add a row (#{LONG})") is None
    assert history.pr_number("add a row (#123)") == 123


# --- manifests and paths ------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "what"), [("[Node]", "a list"), ("{a: b}", "a mapping"), ("5", "int 5")])
def test_a_kind_that_is_not_a_string_is_one_error_at_its_line(tmp_path: Path, kind: str, what: str) -> None:
    (tmp_path / "x.yaml").write_text(f"apiVersion: v1\nmetadata: {{name: x}}\nkind: {kind}\n")
    with pytest.raises(GpudrvError) as caught:
        manifests.load_nodes(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'x.yaml'}:3: kind must be a string, not {what}"
    (tmp_path / "x.yaml").write_text(f"kind: List\nitems:\n- kind: Node\n- kind: {kind}\n")
    with pytest.raises(GpudrvError, match=r"x\.yaml:4: kind must be a string"):
        list(manifests.documents_of_kinds(tmp_path / "x.yaml", {"Pod"}))


def test_a_symlink_loop_or_a_name_too_long_is_one_error(tmp_path: Path) -> None:
    loop = tmp_path / "m.csv"
    loop.symlink_to("m.csv")
    with pytest.raises(GpudrvError, match=r"m\.csv: cannot read: Too many levels of symbolic links$"):
        files.real_path(loop)
    with pytest.raises(GpudrvError, match=r"cannot read: File name too long$"):
        files.real_path(tmp_path / ("x" * 300))
    assert github.workspace_path(str(loop)) == loop.as_posix()  # an annotation's file: as given
