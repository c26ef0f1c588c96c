"""Issue 12, item 6: `-l` selectors parsed as apimachinery's labels.Parse does, matched by selectors.py."""

from __future__ import annotations

import pytest

from reconciler.core.base.label_selector import SelectorError, parse

LABELS = {"pool": "a100", "zone": "eu-1", "rank": "5", "empty": ""}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("pool=a100", True),
        ("pool==a100", True),
        ("pool=h100", False),
        ("pool!=h100", True),
        ("missing!=x", True),  # != and notin select nodes without the label, as the API server does
        ("pool in (h100, a100)", True),
        ("pool in (h100)", False),
        ("pool notin (a100)", False),
        ("missing notin (a100)", True),
        ("pool", True),
        ("missing", False),
        ("!missing", True),
        ("!pool", False),
        ("rank>4", True),
        ("rank<5", False),
        ("zone>1", False),  # not an integer: never Gt
        ("empty=", True),
        ("pool=a100,zone=eu-1", True),
        (" pool = a100 , zone in (eu-1) ", True),
        ("pool=a100,zone=us-1", False),
        ("example.com/team=ml", False),
    ],
)
def test_matching(text: str, selected: bool) -> None:
    assert parse(text).matches(LABELS) is selected


@pytest.mark.parametrize(
    "text",
    [
        "pool=a100,zone in (eu-1,us-1),!spare,rank>3,empty=",
        "a!=b",
        "x notin (p,q)",
        "k",
    ],
)
def test_the_text_for_the_api_server_reads_back_the_same(text: str) -> None:
    selector = parse(text)
    assert parse(selector.text()) == selector


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a b", "after 'a' expected"),
        ("=b", "expected a label key"),
        ("a=b,", "no requirement after it"),
        ("a in ()", "needs at least one value"),
        ("a in (x", "expected ',' or ')'"),
        ("a in x", "expected '(' after a in"),
        ("!", "a label key after '!'"),
        ("a>x", "is not an integer"),
        ("-bad=x", "is not a valid label key"),
        ("a=b c", "expected ',' before 'c'"),
        ("a=" + "v" * 64, "is not a valid label value"),
        (",", "expected a label key"),
        ("a=b\n::error::x", "expected ',' before"),
    ],
)
def test_what_labels_parse_refuses(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError, match=None) as caught:
        parse(text)
    assert fragment in str(caught.value)
