"""The CUDA check: a driver too old for an image's CUDA major is an error, below its toolkit a warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.base.selectors import Requirement
from reconciler.core.cuda import cuda
from reconciler.core.cuda.cuda import Severity, Version
from reconciler.core.cuda.placement import Placement, Term
from reconciler.core.images.tags import DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV, Node

DATA = Path(__file__).resolve().parents[2] / "reconciler" / "data" / "cuda-compat.json"
PT_2407 = "nvcr.io/nvidia/pytorch:24.07-py3"  # CUDA 12.5.1, toolkit driver 555.42.06
PT_2503 = "nvcr.io/nvidia/pytorch:25.03-py3"  # CUDA 12.8.1, toolkit driver 570.124.06
PT_2512 = "nvcr.io/nvidia/pytorch:25.12-py3"  # CUDA 13.1.0, no toolkit minimum recorded
MAJOR_GT_560 = Placement((), (Term((Requirement(DRIVER_MAJOR, "Gt", "560"),)),))
NO_CONDITION = Placement()


def data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def table() -> cuda.Table:
    return cuda.parse_table(data())


def gpu(name: str, driver: str) -> Node:
    keys = (DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV)
    return Node(name, dict(zip(keys, driver.split("."), strict=False)))


# --- versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("have", "need", "ok"),
    [
        ("550.90.07", "555.42.06", False),
        ("555.42.06", "555.42.06", True),
        ("555.42.10", "555.42.06", True),  # numeric per component: 10 > 06
        ("555.100.01", "555.42.06", True),  # not a string comparison
        ("560", "555.42.06", True),
        ("555", "555.42.06", False),  # a missing component counts as 0
        ("580.65.06", "580", True),
        ("579.99.99", "580", False),
        ("1000.0.0", "580", True),
    ],
)
def test_versions_compare_numerically(have: str, need: str, ok: bool) -> None:
    assert Version.parse(have).at_least(Version.parse(need)) is ok


@pytest.mark.parametrize("text", ["", "5.", ".5", "r550", "550.90.07 ", "5..5", "\u0665\u0665\u0660"])
def test_bad_versions(text: str) -> None:
    with pytest.raises(ValueError, match="is not a version"):
        Version.parse(text)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({DRIVER_MAJOR: "550", DRIVER_MINOR: "90", DRIVER_REV: "07"}, "550.90.07"),
        ({DRIVER_MAJOR: "550", DRIVER_REV: "07"}, "550"),  # a gap ends the version
        ({DRIVER_MAJOR: "550", DRIVER_MINOR: "x", DRIVER_REV: "07"}, "550"),
        ({DRIVER_MAJOR: "5x0"}, None),
        ({DRIVER_MAJOR: ""}, None),
        ({DRIVER_MAJOR: "\u0665\u0665\u0660"}, None),
        ({}, None),
    ],
)
def test_node_driver_from_labels(labels: dict[str, str], expected: str | None) -> None:
    driver = cuda.node_driver(Node("n", labels))
    assert (None if driver is None else driver.text) == expected


# --- the data file ---------------------------------------------------------------------------------


def test_the_data_file_has_the_documented_facts(table: cuda.Table) -> None:
    floors = {major: str(version) for major, version in table.family_minimum.items()}
    assert floors == {13: "580", 12: "525", 11: "450"}
    toolkits = {str(toolkit): str(driver) for toolkit, driver in table.toolkit_minimum.items()}
    assert toolkits == {"12.5.1": "555.42.06", "12.8.1": "570.124.06", "13.0.0": "580.65.06"}
    assert str(table.images[PT_2407]) == "12.5.1"
    assert str(table.images[PT_2503]) == "12.8.1"


def test_every_entry_of_the_data_file_cites_an_nvidia_source() -> None:
    sections = ("family_minimum_driver", "toolkit_minimum_driver", "images")
    for section in sections:
        for entry in data()[section]:
            assert entry["source"].startswith("https://docs.nvidia.com/"), entry


def test_need_of_an_image(table: cuda.Table) -> None:
    need = table.need(PT_2407)
    assert need is not None
    assert (str(need.cuda), str(need.floor), str(need.toolkit)) == ("12.5.1", "525", "555.42.06")
    pinned = table.need(f"{PT_2503}@sha256:{'0' * 64}")  # a digest pin keeps the CUDA inside
    assert pinned is not None
    assert str(pinned.cuda) == "12.8.1"
    thirteen = table.need(PT_2512)
    assert thirteen is not None
    assert (str(thirteen.floor), thirteen.toolkit) == ("580", None)
    assert table.need("nvcr.io/nvidia/pytorch:24.07-py3-igpu") is None  # no guessing at tags
    assert table.need("busybox") is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("images"), "images must be a list"),
        (lambda d: d["images"][0].pop("source"), r"images\[0\] needs the strings image, cuda and source"),
        (lambda d: d["images"][0].update(cuda=12.5), r"images\[0\] needs the strings"),
        (lambda d: d["toolkit_minimum_driver"][1].update(driver="570.x"), "toolkit_minimum_driver: '570.x'"),
        (
            lambda d: d["family_minimum_driver"].pop(0),
            "CUDA 13.0.0: no family_minimum_driver entry for CUDA 13.x",
        ),
        (lambda d: d["images"].append("x"), r"images\[3\] must be an object"),
    ],
)
def test_a_broken_data_file_is_named(change: Any, message: str) -> None:
    document = data()
    change(document)
    with pytest.raises(ValueError, match=message):
        cuda.parse_table(document)


def test_the_data_file_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="the top level must be an object"):
        cuda.parse_table([])


# --- the check ---------------------------------------------------------------------------------------


def test_driver_below_the_major_minimum_is_an_error(table: cuda.Table) -> None:
    admitted = [gpu("old", "550.90.07"), gpu("new", "580.65.06")]
    findings = cuda.check([PT_2512], MAJOR_GT_560, admitted, table)
    assert [(f.severity, f.nodes, f.cuda) for f in findings] == [(Severity.ERROR, ("old",), "13.1.0")]
    assert findings[0].message == (
        "nvcr.io/nvidia/pytorch:25.12-py3 is CUDA 13.1.0, which needs driver >= 580; "
        "old (550.90.07) cannot run it"
    )


def test_driver_between_the_major_minimum_and_the_toolkit_is_a_warning(table: cuda.Table) -> None:
    admitted = [gpu("a", "550.90.07"), gpu("b", "555.42.06"), gpu("c", "535.183.06")]
    findings = cuda.check([PT_2407], MAJOR_GT_560, admitted, table)
    assert [(f.severity, f.nodes) for f in findings] == [(Severity.WARNING, ("a", "c"))]
    assert "minor-version compatibility mode" in findings[0].message
    assert "a (550.90.07), c (535.183.06)" in findings[0].message


def test_error_and_warning_together(table: cuda.Table) -> None:
    admitted = [gpu("ancient", "470.57.02"), gpu("compat", "560.35.03"), gpu("fine", "570.124.06")]
    findings = cuda.check([PT_2503], MAJOR_GT_560, admitted, table)
    assert [(f.severity, f.nodes) for f in findings] == [
        (Severity.ERROR, ("ancient",)),
        (Severity.WARNING, ("compat",)),
    ]


def test_nothing_to_say_when_every_admitted_driver_is_new_enough(table: cuda.Table) -> None:
    assert cuda.check([PT_2407, PT_2503], MAJOR_GT_560, [gpu("n", "575.57.08")], table) == []


def test_no_driver_condition_is_a_warning_even_with_good_drivers(table: cuda.Table) -> None:
    findings = cuda.check([PT_2407], NO_CONDITION, [gpu("n", "575.57.08")], table)
    assert [(f.severity, f.nodes) for f in findings] == [(Severity.WARNING, ())]
    assert findings[0].message == (
        "nvcr.io/nvidia/pytorch:24.07-py3 is CUDA 12.5.1, which needs driver >= 525, but the placement "
        "states no nvidia.com/cuda.driver.* condition, so nothing keeps it off an older driver"
    )


@pytest.mark.parametrize(
    "placement",
    [
        Placement(((DRIVER_MAJOR, "575"),)),
        Placement((), (Term((Requirement(DRIVER_MINOR, "Exists"),)),)),
        Placement((), (Term((Requirement("nvidia.com/cuda.driver-version.major", "Gt", "560"),)),)),
    ],
)
def test_any_driver_label_condition_counts(table: cuda.Table, placement: Placement) -> None:
    assert cuda.check([PT_2407], placement, [gpu("n", "575.57.08")], table) == []


def test_nodes_without_a_readable_driver_are_not_judged(table: cuda.Table) -> None:
    admitted = [Node("cpu", {}), Node("odd", {DRIVER_MAJOR: "beta"})]
    assert cuda.check([PT_2512], MAJOR_GT_560, admitted, table) == []


def test_unknown_images_and_repeated_images(table: cuda.Table) -> None:
    admitted = [gpu("n", "550.90.07")]
    assert cuda.check(["busybox", "nvcr.io/nvidia/cuda:12.5.1-base"], NO_CONDITION, admitted, table) == []
    twice = cuda.check([PT_2407, PT_2407], MAJOR_GT_560, admitted, table)
    assert len(twice) == 1


def test_a_node_with_only_the_major_label_may_be_short_of_the_toolkit(table: cuda.Table) -> None:
    findings = cuda.check([PT_2407], MAJOR_GT_560, [gpu("n", "555")], table)
    assert [(f.severity, f.nodes) for f in findings] == [(Severity.WARNING, ("n",))]
