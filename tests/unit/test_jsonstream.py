"""A list response item by item: the same items as json.loads, however the bytes are cut into chunks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import jsonstream
from reconciler.adapters.kube.jsonstream import ListStream, StreamError


def cut(data: bytes, *sizes: int) -> Iterator[bytes]:
    """`data` in chunks of the given sizes, in turn, then the rest."""
    position, turn = 0, 0
    while position < len(data):
        size = sizes[turn % len(sizes)] if sizes else len(data)
        yield data[position : position + size]
        position, turn = position + size, turn + 1


def read(data: bytes, *sizes: int) -> tuple[list[Any], dict[str, Any]]:
    stream = ListStream(cut(data, *sizes))
    return list(stream), stream.members


NODE_LIST = {
    "kind": "PartialObjectMetadataList",
    "apiVersion": "meta.k8s.io/v1",
    "metadata": {"resourceVersion": "42", "continue": "token"},
    "items": [
        {"metadata": {"name": f"n{i}", "labels": {"k": "v" * i, "é": "ü"}}, "n": [i, -i * 1.5, 10**i]}
        for i in range(20)
    ],
}


@pytest.mark.parametrize("sizes", [(), (1,), (2, 3), (7,), (4096,)])
def test_items_and_members_whatever_the_chunks(sizes: tuple[int, ...]) -> None:
    data = json.dumps(NODE_LIST, ensure_ascii=False).encode()
    items, members = read(data, *sizes)
    assert items == NODE_LIST["items"]
    assert members == {key: value for key, value in NODE_LIST.items() if key != "items"}


def test_an_item_is_parsed_once_per_chunk_of_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text is gathered to CHUNK characters before a parse is retried: small network reads do not
    make a large item be parsed again and again."""
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    document = {"items": [{"labels": {f"key{j}": "x" * 50 for j in range(200)}} for _ in range(50)]}
    data = json.dumps(document).encode()
    stream = ListStream(cut(data, 512))
    calls = 0
    scan = stream._scan

    def counted(text: str, position: int) -> Any:
        nonlocal calls
        calls += 1
        return scan(text, position)

    stream._scan = counted  # type: ignore[method-assign]
    assert list(stream) == document["items"]
    assert calls < 1.2 * (len(document["items"]) + 1)


def test_whitespace_anywhere_and_an_empty_list() -> None:
    assert read(b' { "kind" : "L" , "items" : [ ] } \n', 3) == ([], {"kind": "L"})
    assert read(b'{"items":[ 1 ,\n 2 ]}', 1) == ([1, 2], {})
    assert read(b"{}") == ([], {})


def test_a_number_cut_by_the_chunk_is_read_whole() -> None:
    assert read(b'{"items":[12345,678],"n":90}', 3)[0] == [12345, 678]
    assert read(b'{"items":[12345,678],"n":90}', 3)[1] == {"n": 90}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"items":[{"a":1},{"b":', "Expecting value"),  # cut short: the server died mid-list
        (b'{"items":[1,2]', "found the end of the body"),
        (b'[{"a":1}]', "expected one of '{'"),
        (b'{"items":[1]} {}', "more data after the list"),
        (b'{"items":[1 2]}', "expected one of ',]'"),
        (b'{"items":[1], 3: 4}', "key is not a string"),
        (b'{"items":["\xff"]}', "not UTF-8"),
        (b"", "found the end of the body"),
    ],
)
def test_what_is_not_a_whole_list_is_one_error(data: bytes, message: str) -> None:
    with pytest.raises(StreamError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read(data, 5)


def test_a_value_that_never_ends_is_refused_before_it_fills_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "MAX_PENDING", 1000)
    monkeypatch.setattr(jsonstream, "CHUNK", 100)
    endless = (b'{"items":[{"a":"', *(b"x" * 100 for _ in range(100)))
    with pytest.raises(StreamError, match="longer than"):
        list(ListStream(iter(endless)))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(JSON_VALUES, max_size=8),
    members=st.dictionaries(st.text(max_size=6).filter(lambda key: key != "items"), JSON_VALUES, max_size=3),
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=4),
    ascii_only=st.booleans(),
)
def test_any_list_in_any_chunks(
    items: list[Any], members: dict[str, Any], sizes: list[int], ascii_only: bool
) -> None:
    data = json.dumps({**members, "items": items}, ensure_ascii=ascii_only).encode()
    assert read(data, *sizes) == (items, members)
