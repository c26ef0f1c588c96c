import json
from pathlib import Path

import pytest

from reconciler.core.images import matrix, tags
from reconciler.core.images.tags import ImageKey

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "matrix-row.schema.json").read_text())
GOOD = "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n535,5.15.0-107-generic,ubuntu22.04\n"


def parse(text: str) -> matrix.Matrix:
    return matrix.parse(text, SCHEMA)


def problems(text: str) -> list[tuple[int, str]]:
    return [(p.line, p.message) for p in parse(text).problems]


def test_schema_patterns_are_the_cores() -> None:
    props = SCHEMA["properties"]
    assert props["driver_branch"]["pattern"] == tags.BRANCH_PATTERN
    assert props["kernel"]["pattern"] == tags.KERNEL_PATTERN
    assert props["os_tag"]["pattern"] == tags.OS_TAG_PATTERN
    assert SCHEMA["required"] == list(matrix.FIELDS)


def test_good_matrix() -> None:
    parsed = parse(GOOD)
    assert parsed.ok
    assert [row.line for row in parsed.rows] == [2, 3]
    assert parsed.tags() == {"550-5.15.0-119-generic-ubuntu22.04", "535-5.15.0-107-generic-ubuntu22.04"}


@pytest.mark.parametrize(
    "text",
    [
        GOOD.replace("\n", "\r\n"),
        GOOD.rstrip("\n"),
        "\n" + GOOD.replace("\n", "\n\n") + "   \n",
        GOOD.replace("\n", "\r\n").rstrip("\r\n"),
    ],
)
def test_crlf_missing_final_newline_and_blank_lines_are_fine(text: str) -> None:
    parsed = parse(text)
    assert parsed.ok, parsed.problems
    assert len(parsed.rows) == 2


def test_line_numbers_count_blank_lines() -> None:
    text = "driver_branch,kernel,os_tag\n\n550,5.15.0-119-generic,ubuntu22.04\n\n"
    text += "x,5.15.0-119-generic,ubuntu22.04"
    assert problems(text) == [(5, "driver_branch 'x': a driver branch is digits only, like 550")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty matrix: the first line must be the header driver_branch,kernel,os_tag"),
        ("\n\n", "empty matrix: the first line must be the header driver_branch,kernel,os_tag"),
        (
            "branch,kernel,os\n",
            "the header must be exactly driver_branch,kernel,os_tag, found 'branch,kernel,os'",
        ),
        ("driver_branch, kernel, os_tag\n", "the header must be exactly"),
        ("550,5.15.0-119-generic,ubuntu22.04\n", "the header must be exactly"),
        ("\ufeffdriver_branch,kernel,os_tag\n", "byte-order mark"),
    ],
)
def test_header_problems(text: str, expected: str) -> None:
    found = problems(text)
    assert len(found) == 1
    assert expected in found[0][1]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("550,5.15.0-119-generic", "expected 3 fields (driver_branch,kernel,os_tag), found 2"),
        (
            "550,5.15.0-119-generic,ubuntu22.04,extra",
            "expected 3 fields (driver_branch,kernel,os_tag), found 4",
        ),
        (",5.15.0-119-generic,ubuntu22.04", "driver_branch is empty"),
        ("550,,ubuntu22.04", "kernel is empty"),
        ("550,5.15.0-119-generic,", "os_tag is empty"),
        ("r550,5.15.0-119-generic,ubuntu22.04", "driver_branch 'r550': a driver branch is digits only"),
        ("550, 5.15.0-119-generic,ubuntu22.04", "kernel ' 5.15.0-119-generic'"),
        ("550,5.15.0-119-generic,Ubuntu22.04", "os_tag 'Ubuntu22.04'"),
        ('550,"5.15.0-119-generic",ubuntu22.04', None),
        ('550,"5.15,0",ubuntu22.04', "kernel '5.15,0'"),
        ('550,"unterminated,ubuntu22.04', "not a CSV row"),
        ("550," + "5.15.0-" + "1" * 57 + ",ubuntu22.04", "at most 63 characters"),
        ("550,5.15.0-119-generic," + "a" * 60 + "1" * 70, "not a valid image tag"),
        # issue 38: a kernel NFD never reports, an os tag the GPU Operator never makes
        ("550,5.15,ubuntu22.04", "kernel '5.15': a kernel is a release as NFD's kernel-version.full reports"),
        ("550,garbage,ubuntu22.04", "kernel 'garbage'"),
        ("550,5.15.0-119-generic,ubuntu-22.04", "os_tag 'ubuntu-22.04': an os tag is <ID><VERSION_ID>"),
        ("550,5.15.0-119-generic,22.04", "os_tag '22.04'"),
        ("535,5.14.0-427.13.1.el9_4.x86_64,rhel9", None),
        ("550,6.8.0-45-generic,opensuse-leap15.5", None),
    ],
)
def test_row_problems_name_the_field(row: str, expected: str | None) -> None:
    found = problems(f"driver_branch,kernel,os_tag\n{row}\n")
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1
        assert found[0][0] == 2
        assert expected in found[0][1]


def test_every_bad_field_of_a_row_is_reported_in_column_order() -> None:
    found = problems("driver_branch,kernel,os_tag\nx,y z,W\n")
    assert [message.split(" ")[0] for _, message in found] == ["driver_branch", "kernel", "os_tag"]


def test_duplicate_reported_at_the_later_copy() -> None:
    text = GOOD + "550,5.15.0-119-generic,ubuntu22.04\n"
    assert problems(text) == [(4, "duplicate row 550,5.15.0-119-generic,ubuntu22.04 (first at line 2)")]
    assert len(parse(text).rows) == 2


def test_all_problems_are_collected() -> None:
    text = GOOD + "x,1.2.3,ubuntu9\n550,5.15.0-119-generic,ubuntu22.04\n1,2\n"
    assert [line for line, _ in problems(text)] == [4, 5, 6]


def test_find() -> None:
    parsed = parse(GOOD)
    row = parsed.find(ImageKey("535", "5.15.0-107-generic", "ubuntu22.04"))
    assert row is not None
    assert row.line == 3
    assert parsed.find(ImageKey("535", "5.15.0-107-generic", "ubuntu24.04")) is None


@pytest.mark.parametrize(
    ("tag", "parts"),
    [
        ("550-5.15.0-107-generic-ubuntu22.04", ("550", "5.15.0-107-generic", "ubuntu22.04")),
        ("550-6.8.0-52-generic-ubuntu24.04", ("550", "6.8.0-52-generic", "ubuntu24.04")),
        ("535-5.14.0-427.13.1.el9_4.x86_64-rhel9", ("535", "5.14.0-427.13.1.el9_4.x86_64", "rhel9")),
    ],
)
def test_key_from_tag_round_trips(tag: str, parts: tuple[str, str, str]) -> None:
    key = matrix.key_from_tag(tag)
    assert (key.driver_branch, key.kernel, key.os_tag) == parts
    assert key.tag == tag


@pytest.mark.parametrize("tag", ["550", "550-ubuntu22.04", "-5.15-ubuntu", "550-5.15-", ""])
def test_key_from_tag_refuses_what_is_not_three_parts(tag: str) -> None:
    with pytest.raises(ValueError, match="is not <driver-branch>-<kernel>-<os-tag>"):
        matrix.key_from_tag(tag)


def test_row_problems_for_add() -> None:
    assert matrix.row_problems(ImageKey("550", "5.15.0-107-generic", "ubuntu22.04"), SCHEMA) == []
    assert matrix.row_problems(ImageKey("550\n", "5.15.0-107-generic", "ubuntu22.04"), SCHEMA) != []
    assert matrix.row_problems(ImageKey("abc", "5.15.0", "ubuntu22.04"), SCHEMA) == [
        "driver_branch 'abc': a driver branch is digits only, like 550"
    ]


KEY = ImageKey("550", "5.15.0-107-generic", "ubuntu22.04")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (GOOD, GOOD + "550,5.15.0-107-generic,ubuntu22.04\n"),
        (GOOD.rstrip("\n"), GOOD + "550,5.15.0-107-generic,ubuntu22.04\n"),
        (GOOD.replace("\n", "\r\n"), GOOD.replace("\n", "\r\n") + "550,5.15.0-107-generic,ubuntu22.04\r\n"),
        (
            GOOD.replace("\n", "\r\n").rstrip(),
            GOOD.replace("\n", "\r\n") + "550,5.15.0-107-generic,ubuntu22.04\r\n",
        ),
        (GOOD + "\n", GOOD + "\n550,5.15.0-107-generic,ubuntu22.04\n"),
    ],
)
def test_append_keeps_every_existing_byte(before: str, after: str) -> None:
    result = matrix.append_row(before, KEY)
    assert result == after
    assert result.startswith(before)
    assert parse(result).find(KEY) is not None
