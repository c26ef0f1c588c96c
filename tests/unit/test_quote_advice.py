"""Issue 18, item 3: "quote it" advice quotes the label value exactly as the file writes it, for every
plain-scalar form that ruamel's loader turns into something other than a string, and says why."""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.error import MantissaNoDotYAML1_1Warning
from ruamel.yaml.resolver import implicit_resolvers

from reconciler.adapters.files import manifests, positions
from reconciler.commands import manifest_check
from reconciler.core.images import node_schema
from reconciler.errors import GpudrvError

# One form per branch of ruamel's implicit resolvers (see test_every_resolver_is_covered).
BOTH = [
    # bool
    "true", "True", "TRUE", "false", "False", "FALSE",
    # float: dot, dot and exponent, exponent only, leading dot, infinities, NaN
    "22.10", "5.", "1_0.5", "5.5e2", "1.0e+3", "-5.5E-2", "1e3", "+12e03", ".5", ".5e-3",
    ".inf", ".Inf", "-.inf", "+.INF", ".nan", ".NaN", ".NAN",
    # int: binary, octal, decimal (leading zero, sign, underscores), hexadecimal
    "0b101", "-0b1_0", "017", "06", "0", "+12", "-7", "1_000", "0x226", "0xFF", "-0x_1A",
    # null (an empty value is tested on its own), merge key, value key
    "~", "null", "Null", "NULL", "<<", "=",
    # timestamp: date, date and time with T, t or blanks, fraction, zone
    "2024-01-01", "2024-1-1T1:00:00", "2024-01-01 10:00:00", "2024-01-01t10:00:00.5Z",
    "2001-12-14 21:59:43.10 -5", "2001-12-14T21:59:43+05:30",
]  # fmt: skip
YAML_12_ONLY = ["0o17", "+.5", "-0"]
YAML_11_ONLY = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
    "190:20:30.15", "-1:30.5",  # sexagesimal floats
    "190:20:30", "1:20", "-1:20",  # sexagesimal ints
]  # fmt: skip
CASES = [("1.2", form) for form in BOTH + YAML_12_ONLY] + [("1.1", form) for form in BOTH + YAML_11_ONLY]
KEY = "example.com/value"


def header(version: str) -> str:
    return "%YAML 1.1\n---\n" if version == "1.1" else ""


def loaded(version: str, form: str) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MantissaNoDotYAML1_1Warning)  # YAML 1.1's 1e3: a float all the same
        return YAML(typ="rt").load(f"{header(version)}k: {form}\n")["k"]


def layouts(form: str, version: str = "1.2") -> dict[str, str]:
    """The labels mapping with the value at fault in each way YAML allows a plain scalar there."""
    return {
        "block": f"  labels:\n    a: x\n    {KEY}: {form}\n    b: y\n",
        "comment": f"  labels:\n    {KEY}: {form}  # the unquoted value\n",
        "flow": f'  labels: {{a: "1", {KEY}: {form}, b: "2"}}\n',
        "flow-last": f"  labels: {{{KEY}: {form}}}\n",
        "anchor": f"  labels:\n    {KEY}: &v {form}\n",
        "tag-and-anchor": f"  labels:\n    {KEY}: &v !!{_tag(version, form)} {form}\n",
        "next-line": f"  labels:\n    {KEY}:\n      {form}\n",
    }


def _tag(version: str, form: str) -> str:
    """The YAML core tag of what the form loads as (other tags are refused: see yaml_load.py)."""
    value = loaded(version, form)
    for kind, tag in ((str, "str"), (bool, "bool"), (int, "int"), (float, "float"), (type(None), "null")):
        if isinstance(value, kind):
            return tag
    return "timestamp" if isinstance(value, datetime.date) else type(value).__name__


def node_file(folder: Path, version: str, labels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "node.yaml"
    path.write_text(f"{header(version)}apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n{labels}")
    return path


def test_every_resolver_is_covered() -> None:
    """Each tag ruamel resolves a plain scalar to, other than str, has forms above, in both versions
    (`tag:yaml.org,2002:yaml` is `!`, `&` and `*` alone: tag, anchor and alias syntax, no value)."""
    for version, forms in (((1, 2), BOTH + YAML_12_ONLY), ((1, 1), BOTH + YAML_11_ONLY)):
        tags = {str(tag) for versions, tag, _, _ in implicit_resolvers if version in versions}
        tags.discard("tag:yaml.org,2002:yaml")
        covered: set[str] = set()
        for form in forms:
            for _, tag, regexp, _ in (entry for entry in implicit_resolvers if version in entry[0]):
                if regexp.match(form):
                    covered.add(str(tag))
        assert tags <= covered, tags - covered


@pytest.mark.parametrize(("version", "form"), CASES)
def test_the_advice_quotes_the_source_text(tmp_path: Path, version: str, form: str) -> None:
    value = loaded(version, form)
    assert not isinstance(value, str), f"{form} loads as a string in YAML {version}"
    expected = f'quote it: "{form}" (unquoted, YAML reads {form} as '
    for layout, labels in layouts(form, version).items():
        if layout == "tag-and-anchor" and form in {"<<", "="}:
            continue  # no standard tag to write for these
        folder = tmp_path / layout
        path = node_file(folder, version, labels)
        with pytest.raises(GpudrvError) as error:
            manifests.load_nodes(folder)
        assert f"node node-a: label {KEY} must be a string; {expected}" in str(error.value), layout
        assert str(error.value).startswith(f"{path}:"), layout
        report = manifest_check.check(folder)
        advice = [problem.message for problem in report.problems if KEY in problem.message]
        assert advice and expected in advice[0], (layout, advice)


@pytest.mark.parametrize("layout", ["block", "block-last", "flow", "flow-last"])
def test_a_value_left_out(tmp_path: Path, layout: str) -> None:
    labels = {
        "block": f"  labels:\n    {KEY}:\n    b: y\n",
        "block-last": f"  labels:\n    {KEY}:\n",
        "flow": f"  labels: {{{KEY}: , b: y}}\n",
        "flow-last": f"  labels: {{{KEY}: }}\n",
    }[layout]
    node_file(tmp_path, "1.2", labels)
    expected = f'label {KEY} must be a string; quote it: "" (YAML reads a value left out as null, no value)'
    with pytest.raises(GpudrvError, match=r"quote it") as error:
        manifests.load_nodes(tmp_path)
    assert expected in str(error.value)
    assert [p.message for p in manifest_check.check(tmp_path).problems if KEY in p.message] == [expected]


@pytest.mark.parametrize(
    ("form", "reading"),
    [
        ("22.10", "the number 22.1"),
        ("06", "the number 6"),
        ("0x226", "the number 550"),
        ("5.5e2", "the number 550.0"),
        ("true", "the boolean true"),
        ("~", "null, no value"),
        (".inf", "infinity"),
        ("-.inf", "minus infinity"),
        (".nan", "NaN, not a number"),
        ("2024-01-01", "the date 2024-01-01"),
        ("2024-01-01 10:00:00", "the timestamp 2024-01-01T10:00:00"),
        ("=", "a tag:yaml.org,2002:value node"),
    ],
)
def test_why_the_unquoted_form_is_wrong(form: str, reading: str) -> None:
    message = node_schema.must_be_string("label x", loaded("1.2", form), form)
    assert (
        message == f'label x must be a string; quote it: "{form}" (unquoted, YAML reads {form} as {reading})'
    )


def test_without_the_source_text_the_loaded_value_as_before() -> None:
    assert node_schema.must_be_string("label x", 7, None) == 'label x must be a string; quote it: "7"'
    assert node_schema.must_be_string("label x", {"a": 1}, None) == "label x must be a string, not a mapping"
    assert node_schema.must_be_string("label x", [1], "[1]") == "label x must be a string, not a list"
    assert node_schema.must_be_string("label x", datetime.date(2024, 1, 1), None).startswith("label x")


def test_written_is_none_when_it_is_not_a_plain_scalar() -> None:
    text = 'm:\n  a: "22.10"\n  b: [1]\n  s: 1 # c\n  t: &a !!int 06\n  u: *a\n'
    document = YAML(typ="rt").load(text)
    assert positions.written(text, document, ("m", "a")) is None  # quoted
    assert positions.written(text, document, ("m", "b")) is None  # a list
    assert positions.written(text, document, ("m", "b", 0)) == "1"
    assert positions.written(text, document, ("m", "s")) == "1"
    assert positions.written(text, document, ("m", "t")) == "06"
    assert positions.written(text, document, ("m", "u")) == "06"  # an alias: the text it stands for
    assert positions.written(text, document, ("m", "missing")) is None
    assert positions.written(text, document, ()) is None
    assert positions.written(text, {"m": {"s": 1}}, ("m", "s")) is None  # no positions kept


def test_crlf_files(tmp_path: Path) -> None:
    (tmp_path / "n.yaml").write_bytes(
        b"kind: Node\r\nmetadata:\r\n  name: n\r\n  labels:\r\n    k: 22.10\r\n"
    )
    with pytest.raises(
        GpudrvError, match=r'n\.yaml:5: node n: label k must be a string; quote it: "22\.10" \('
    ):
        manifests.load_nodes(tmp_path)
