"""The Node manifest checker's memo (core/images/node_schema.py validator: each label key and value
checked once, lone `$ref`s inlined) says what jsonschema alone says, on documents it has seen and on
new ones; and the YAML reader kept for the next text (adapters/files/yaml_load.py) reads it as a new
one would, after an error too. Issue 38 item 4: `gpudrv manifests validate` on 10,000 invalid Node
manifests (benchmarks/manifests_validate.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.files import schemas, yaml_load
from reconciler.core.images import node_schema, tags

SCHEMA = schemas.load("node-manifest")
MEMO = node_schema.validator(SCHEMA)  # one for the whole run: later examples hit what earlier ones left
KEYS = st.sampled_from(
    [
        *(tags.GPU_PRESENT, tags.DRIVER_MAJOR, tags.DRIVER_MINOR, tags.DRIVER_REV, tags.KERNEL, tags.OS_ID),
        *(tags.OS_VERSION_ID, "kubernetes.io/hostname", "example.com/rack", "Bad Key", "-x", "a/b/c"),
    ]
)
VALUES = st.one_of(
    st.sampled_from(["true", "false", "550", "5x0", "90", "5.15.0-119-generic", "5.15 0", "ubuntu", ""]),
    st.sampled_from(["Ubuntu", "22.04", "rack-1_", "x" * 64, "a\nb"]),
    st.text(alphabet="abz09._- A", max_size=8),
    st.integers(-3, 600),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.lists(st.just("x"), max_size=1),
)
LABELS = st.one_of(st.dictionaries(KEYS, VALUES, max_size=8), st.none(), st.just(["not", "a", "map"]))
NAMES = st.one_of(st.sampled_from(["gpu-0", "gpu-1", "Bad_Name", ""]), st.integers(0, 3))


def plain() -> Any:
    return node_schema._strict()(SCHEMA)


def found(document: dict[str, Any], checker: Any) -> list[tuple[tuple[str | int, ...], str]]:
    return sorted((v.path, v.message) for v in node_schema.violations(document, checker))


@settings(max_examples=400, deadline=None)
@given(labels=LABELS, name=NAMES, kind=st.sampled_from(["Node", "Pod"]))
def test_the_memo_says_what_jsonschema_says(labels: Any, name: Any, kind: str) -> None:
    metadata: dict[str, Any] = {"name": name} if labels is None else {"name": name, "labels": labels}
    document = {"apiVersion": "v1", "kind": kind, "metadata": metadata}
    assert found(document, MEMO) == found(document, plain())
    assert found(document, MEMO) == found(document, plain())  # the second time, from the memo


def test_a_schema_with_an_id_inside_is_used_as_given() -> None:
    inner = {**SCHEMA, "$defs": {**SCHEMA["$defs"], "labels": {**SCHEMA["$defs"]["labels"], "$id": "x"}}}
    checker = node_schema.validator(inner)
    assert checker.schema is inner


@pytest.mark.parametrize("broken", ["a: [\n", "a: 1\na: 2\n", "a: !!int abc\n", "a: *nowhere\n"])
def test_a_reader_kept_after_an_error_reads_the_next_text_as_a_new_one(broken: str) -> None:
    with pytest.raises(yaml_load.Problem):
        list(yaml_load.documents(broken))
    for version in (None, (1, 1)):
        [document] = yaml_load.documents("a: yes\nb: 010\nc: [1, {d: 2}]\n", version=version)
        fresh = next(iter(yaml_load.documents("a: yes\nb: 010\nc: [1, {d: 2}]\n", version=version)))
        assert document == fresh
        assert document.lc.key("c") == (2, 0) and document["c"].lc.item(1) == (2, 7)
    assert dict(next(yaml_load.documents("a: yes\n"))) == {"a": "yes"}  # YAML 1.2: a string
    assert dict(next(yaml_load.documents("a: yes\n", version=(1, 1)))) == {"a": True}


def test_two_texts_read_at_once_do_not_share_a_reader() -> None:
    first = yaml_load.documents("%YAML 1.1\n---\na: yes\n---\nb: yes\n")
    second = yaml_load.documents("c: yes\n")
    assert dict(next(first)) == {"a": True}
    assert dict(next(second)) == {"c": "yes"}
    assert dict(next(first)) == {"b": "yes"}  # a document without %YAML: 1.2 again
