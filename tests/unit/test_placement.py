"""The placement evaluator: nodeSelector and required node affinity with Kubernetes' exact semantics."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.base import selectors
from reconciler.core.base.selectors import Requirement
from reconciler.core.cuda import placement
from reconciler.core.cuda.placement import Placement, SpecError, Term
from reconciler.core.images.tags import Node

MAJOR = "nvidia.com/cuda.driver.major"
VERSION_ID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
LAB = [
    Node("lab-node-0", {MAJOR: "550", VERSION_ID: "22.04"}),
    Node("lab-node-1", {MAJOR: "535", VERSION_ID: "22.04"}),
    Node("lab-node-2", {MAJOR: "550", VERSION_ID: "24.04"}),
]


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, values)


def affinity(*terms: Term, selector: dict[str, str] | None = None) -> Placement:
    return Placement(tuple((selector or {}).items()), terms)


def matches(requirement: Requirement, labels: dict[str, str]) -> bool:
    return affinity(Term((requirement,))).why_not(Node("n", labels)) is None


# --- every operator, with and without the label ---------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (req("k", "In", "a", "b"), {"k": "b"}, True),
        (req("k", "In", "a"), {"k": "c"}, False),
        (req("k", "In", "a"), {}, False),
        (req("k", "In", ""), {"k": ""}, True),  # the empty value is a value
        (req("k", "NotIn", "a"), {"k": "b"}, True),
        (req("k", "NotIn", "a"), {"k": "a"}, False),
        (req("k", "NotIn", "a"), {}, True),  # a node without the label is not in the set
        (req("k", "Exists"), {"k": ""}, True),
        (req("k", "Exists"), {}, False),
        (req("k", "DoesNotExist"), {}, True),
        (req("k", "DoesNotExist"), {"k": ""}, False),
        (req("k", "Gt", "560"), {"k": "570"}, True),
        (req("k", "Gt", "560"), {"k": "560"}, False),  # strictly greater
        (req("k", "Gt", "560"), {"k": "550"}, False),
        (req("k", "Gt", "560"), {}, False),
        (req("k", "Lt", "560"), {"k": "550"}, True),
        (req("k", "Lt", "560"), {"k": "560"}, False),  # strictly less
        (req("k", "Lt", "560"), {}, False),
        (req("k", "Gt", "100"), {"k": "0570"}, True),  # leading zeros are base 10, not octal
        (req("k", "Lt", "100"), {"k": "+5"}, True),  # ParseInt accepts a sign
        (req("k", "Lt", "0"), {"k": "-5"}, True),
        (req("k", "Gt", "0"), {"k": "9223372036854775807"}, True),
        (req("k", "Lt", "999"), {"k": "-9223372036854775808"}, True),
    ],
)
def test_operators(requirement: Requirement, labels: dict[str, str], expected: bool) -> None:
    assert matches(requirement, labels) is expected


@pytest.mark.parametrize(
    "value", ["beta", "", "5.5", " 5", "5 ", "5_0", "0x10", "1e3", "\u0665", "9223372036854775808", "--5"]
)
@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_gt_lt_never_match_a_label_that_is_not_an_int64(operator: str, value: str) -> None:
    assert not matches(req("k", operator, "0"), {"k": value})
    assert not matches(req("k", operator, "9223372036854775807"), {"k": value})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("550", 550),
        ("07", 7),
        ("+5", 5),
        ("-5", -5),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("", None),
        ("+", None),
        ("5_0", None),
        ("\u0665", None),  # int() would read this Arabic-Indic digit; Go does not
        (" 5", None),
    ],
)
def test_parse_int64_is_go_strconv(text: str, expected: int | None) -> None:
    assert selectors.parse_int64(text) == expected


# --- what the scheduler cannot parse: the term matches no node, other terms still count -----------


@pytest.mark.parametrize(
    ("requirement", "complaint"),
    [
        (req("k", "Gt", "abc"), "the value 'abc' is not an integer"),
        (req("k", "Lt", "5.0"), "the value '5.0' is not an integer"),
        (req("k", "Gt", "-1"), "'-1' is not a valid label value"),  # an integer, but not a label value
        (req("k", "Gt", "1", "2"), "needs exactly one value"),
        (req("k", "Lt"), "needs exactly one value"),
        (req("k", "In"), "needs at least one value"),
        (req("k", "NotIn"), "needs at least one value"),
        (req("k", "Exists", "x"), "takes no values"),
        (req("k", "DoesNotExist", "x"), "takes no values"),
        (req("k", "Equals", "x"), "unknown operator 'Equals'"),
        (req("k", "in", "x"), "unknown operator 'in'"),  # case matters
        (req("not a key", "Exists"), "'not a key' is not a valid label key"),
        (req("", "Exists"), "'' is not a valid label key"),
        (req("k", "NotIn", "not valid!"), "'not valid!' is not a valid label value"),
    ],
)
def test_unparseable_requirement_makes_its_term_match_no_node(
    requirement: Requirement, complaint: str
) -> None:
    term = Term((requirement,))
    nodes = [Node("a", {"k": "x"}), Node("b", {"k": "7"}), Node("c", {})]
    fit = placement.evaluate(affinity(term), nodes)
    assert fit.nodes == ()
    for reason in fit.reasons.values():
        assert reason.startswith("the scheduler cannot parse the term: ")
        assert complaint in reason
    # A valid second term still admits the nodes it matches.
    fit = placement.evaluate(affinity(term, Term((req("k", "Exists"),))), nodes)
    assert fit.nodes == ("a", "b")
    assert fit.reasons["c"].startswith("term 1: the scheduler cannot parse the term: ")
    assert fit.reasons["c"].endswith("; term 2: k is missing (Exists)")


def test_a_broken_expression_spoils_the_whole_term_even_if_the_others_match() -> None:
    term = Term((req("k", "Exists"), req("k", "Gt", "x")))
    assert placement.evaluate(affinity(term), [Node("a", {"k": "1"})]).nodes == ()


def test_empty_terms_and_no_terms_match_no_node() -> None:
    node = Node("a", {"k": "v"})
    assert affinity(Term()).why_not(node) == "the term is empty, and an empty term matches no node"
    assert affinity().why_not(node) == "the required node affinity has no terms, so it matches no node"
    assert affinity(Term(), Term((req("k", "Exists"),))).why_not(node) is None


def test_no_required_affinity_admits_every_node() -> None:
    assert placement.evaluate(Placement(), LAB).nodes == ("lab-node-0", "lab-node-1", "lab-node-2")


# --- terms ORed, expressions ANDed, nodeSelector ANDed with both ------------------------------------


def test_lab_cuda12_job_one_term_two_expressions() -> None:
    term = Term((req(MAJOR, "In", "550"), req(VERSION_ID, "In", "22.04")))
    fit = placement.evaluate(affinity(term), LAB)
    assert fit.nodes == ("lab-node-0",)
    assert fit.reasons == {
        "lab-node-1": f"{MAJOR}=535 is not In [550]",
        "lab-node-2": f"{VERSION_ID}=24.04 is not In [22.04]",
    }


def test_lab_cuda13_job_gt_560_fits_no_node() -> None:
    fit = placement.evaluate(affinity(Term((req(MAJOR, "Gt", "560"),))), LAB)
    assert fit.nodes == ()
    assert fit.reasons["lab-node-0"] == "nvidia.com/cuda.driver.major=550 is not Gt 560"
    assert fit.reasons["lab-node-1"] == "nvidia.com/cuda.driver.major=535 is not Gt 560"


def test_terms_are_ored_and_each_reports_its_first_failure() -> None:
    first = Term((req(MAJOR, "In", "535"), req("missing", "Exists")))
    second = Term((req(VERSION_ID, "In", "24.04"),))
    fit = placement.evaluate(affinity(first, second), LAB)
    assert fit.nodes == ("lab-node-2",)
    assert fit.reasons == {
        "lab-node-0": f"term 1: {MAJOR}=550 is not In [535]; term 2: {VERSION_ID}=22.04 is not In [24.04]",
        "lab-node-1": f"term 1: missing is missing (Exists); term 2: {VERSION_ID}=22.04 is not In [24.04]",
    }


def test_node_selector_is_anded_with_the_affinity_and_checked_first() -> None:
    term = Term((req(MAJOR, "In", "550", "535"),))
    fit = placement.evaluate(affinity(term, selector={VERSION_ID: "22.04", "pool": "gpu"}), LAB)
    assert fit.nodes == ()
    assert fit.reasons["lab-node-0"] == "pool is missing (nodeSelector pool=gpu)"
    assert fit.reasons["lab-node-2"] == f"{VERSION_ID}=24.04 is not 22.04 (nodeSelector)"
    fit = placement.evaluate(affinity(term, selector={VERSION_ID: "22.04"}), LAB)
    assert fit.nodes == ("lab-node-0", "lab-node-1")


@pytest.mark.parametrize(
    ("requirement", "reason"),
    [
        (req("k", "In", "a", "b"), "k=c is not In [a, b]"),
        (req("k", "NotIn", "c"), "k=c is excluded by NotIn [c]"),
        (req("k", "DoesNotExist"), "k=c is set (DoesNotExist)"),
        (req("k", "Lt", "3"), "k=c is not an integer (Lt 3)"),
        (req("other", "In", "a"), "other is missing (In [a])"),
        (req("other", "Exists"), "other is missing (Exists)"),
        (req("other", "Gt", "3"), "other is missing (Gt 3)"),
    ],
)
def test_reasons_name_the_nodes_value(requirement: Requirement, reason: str) -> None:
    assert affinity(Term((requirement,))).why_not(Node("n", {"k": "c"})) == reason


# --- matchFields: metadata.name only, In/NotIn with one value -------------------------------------------


def test_match_fields_on_the_node_name() -> None:
    only_b = Term(fields=(req("metadata.name", "In", "b"),))
    not_b = Term(fields=(req("metadata.name", "NotIn", "b"),))
    nodes = [Node("a"), Node("b")]
    assert placement.evaluate(affinity(only_b), nodes).nodes == ("b",)
    assert placement.evaluate(affinity(only_b), nodes).reasons == {"a": "metadata.name=a is not In [b]"}
    assert placement.evaluate(affinity(not_b), nodes).nodes == ("a",)


def test_match_fields_other_keys_read_as_empty_and_bad_shapes_match_nothing() -> None:
    nodes = [Node("a")]
    assert placement.evaluate(affinity(Term(fields=(req("spec.x", "In", "v"),))), nodes).nodes == ()
    assert placement.evaluate(affinity(Term(fields=(req("spec.x", "NotIn", "v"),))), nodes).nodes == ("a",)
    two = Term(fields=(req("metadata.name", "In", "a", "b"),))
    assert placement.evaluate(affinity(two), nodes).nodes == ()
    exists = Term(fields=(req("metadata.name", "Exists", "a"),))
    assert "is not In or NotIn" in str(placement.evaluate(affinity(exists), nodes).reasons["a"])


def test_expressions_and_fields_in_one_term_are_anded() -> None:
    term = Term((req(MAJOR, "In", "550"),), (req("metadata.name", "NotIn", "lab-node-0"),))
    assert placement.evaluate(affinity(term), LAB).nodes == ("lab-node-2",)


# --- keys and values as the API defines them ----------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("k", True),
        (MAJOR, True),
        ("a.b/c_d-e.f", True),
        ("A/b", False),  # the prefix is a lowercase DNS subdomain
        ("/b", False),
        ("a/", False),
        ("a/b/c", False),
        ("-a", False),
        ("a" * 63, True),
        ("a" * 64, False),
        (f"{'p' * 253}/n", True),
        (f"{'p' * 254}/n", False),
    ],
)
def test_valid_label_key(key: str, valid: bool) -> None:
    assert selectors.valid_label_key(key) is valid


def test_label_keys_collects_selector_and_expression_keys() -> None:
    term = Term((req(MAJOR, "Gt", "560"),), (req("metadata.name", "In", "a"),))
    assert affinity(term, selector={"pool": "gpu"}).label_keys() == {MAJOR, "pool"}


# --- reading pod specs --------------------------------------------------------------------------------


def pod_spec(**spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:24.07-py3"}], **spec}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {placement.REQUIRED: {"nodeSelectorTerms": list(terms)}}}


TERM = {"matchExpressions": [{"key": MAJOR, "operator": "Gt", "values": ["560"]}]}


@pytest.mark.parametrize(
    ("kind", "document"),
    [
        ("Pod", {"spec": pod_spec(affinity=required(TERM))}),
        ("Job", {"spec": {"template": {"spec": pod_spec(affinity=required(TERM))}}}),
        ("Deployment", {"spec": {"template": {"spec": pod_spec(affinity=required(TERM))}}}),
        ("StatefulSet", {"spec": {"template": {"spec": pod_spec(affinity=required(TERM))}}}),
        (
            "CronJob",
            {"spec": {"jobTemplate": {"spec": {"template": {"spec": pod_spec(affinity=required(TERM))}}}}},
        ),
    ],
)
def test_workload_reads_the_pod_template_of_each_kind(kind: str, document: dict[str, Any]) -> None:
    item = placement.workload({"kind": kind, "metadata": {"name": "w", "namespace": "ns"}, **document})
    assert (item.ref, item.images) == (f"{kind} ns/w", ("nvcr.io/nvidia/pytorch:24.07-py3",))
    assert item.placement == affinity(Term((req(MAJOR, "Gt", "560"),)))


def test_workload_defaults_and_images() -> None:
    spec = pod_spec(initContainers=[{"name": "i", "image": "busybox"}], nodeSelector={"pool": "gpu"})
    item = placement.workload({"kind": "Pod", "metadata": {"name": "p"}, "spec": spec}, "f.yaml", 3)
    assert (item.namespace, item.origin, item.scheduler) == ("default", "f.yaml:3", None)
    assert item.images == ("busybox", "nvcr.io/nvidia/pytorch:24.07-py3")
    assert item.placement == Placement((("pool", "gpu"),), None)


def test_required_affinity_present_but_without_terms_is_no_terms() -> None:
    spec = pod_spec(affinity={"nodeAffinity": {placement.REQUIRED: {}}})
    assert placement.placement_of(spec) == Placement((), ())


def test_preferred_affinity_is_ignored() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}}
    assert placement.placement_of(pod_spec(affinity=preferred)) == Placement()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            pod_spec(
                affinity=required({"matchExpressions": [{"key": "k", "operator": "In", "values": [22.04]}]})
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            '.matchExpressions[0].values[0] must be a string; quote it: "22.04"',
        ),
        (pod_spec(nodeSelector={"gpu": True}), 'spec.nodeSelector.gpu must be a string; quote it: "true"'),
        (pod_spec(nodeSelector=["a"]), "spec.nodeSelector must be a mapping, not a list"),
        (
            pod_spec(affinity=required({"matchExpressions": {"key": "k"}})),
            "nodeSelectorTerms[0].matchExpressions must be a list, not a mapping",
        ),
        (pod_spec(containers=[{"image": None}, "x"]), "spec.containers[1] must be a mapping, not str 'x'"),
    ],
)
def test_malformed_specs_name_the_path(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        placement.workload({"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert str(caught.value).endswith(message)
    assert caught.value.path[0] == "spec"


def test_workload_needs_a_known_kind_and_a_name() -> None:
    with pytest.raises(SpecError, match="'DaemonSet' is not one of Pod, Job"):
        placement.workload({"kind": "DaemonSet", "metadata": {"name": "d"}})
    with pytest.raises(SpecError, match=r"^metadata\.name is missing$"):
        placement.workload({"kind": "Pod", "metadata": {}, "spec": {}})


def test_dotted_paths() -> None:
    assert placement.dotted(("spec", "containers", 0, "image")) == "spec.containers[0].image"
    assert placement.dotted(()) == ""
