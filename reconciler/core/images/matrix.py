"""The support matrix: which precompiled driver images exist. A CSV reviewed in pull requests.

Parsing never raises on bad content: every problem is collected with its line number, so a PR
author sees them all at once.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.core.images.tags import ImageKey, invalid_tag_reason, valid_tag

if TYPE_CHECKING:
    import jsonschema

HEADER = "driver_branch,kernel,os_tag"
FIELDS = tuple(HEADER.split(","))


@dataclass(frozen=True)
class Row:
    key: ImageKey
    line: int


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


@dataclass(frozen=True)
class Appended:
    """A row `matrix add` (or `registry verify --append`) asked for, and where it is in the file."""

    key: ImageKey
    line: int  # where the row is now
    added: bool  # False: it was there already


@dataclass(frozen=True)
class Matrix:
    rows: tuple[Row, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def tags(self) -> frozenset[str]:
        return frozenset(row.key.tag for row in self.rows)

    def find(self, key: ImageKey) -> Row | None:
        return next((row for row in self.rows if row.key == key), None)


def parse(text: str, row_schema: Mapping[str, Any]) -> Matrix:
    """Read matrix text; CRLF, a missing final newline and blank lines are all accepted."""
    lines = [(number, line) for number, line in _lines(text) if line.strip()]
    if not lines:
        return Matrix((), (Problem(1, f"empty matrix: the first line must be the header {HEADER}"),))
    header_line, header = lines[0]
    if header != HEADER:
        return Matrix((), (Problem(header_line, _header_complaint(header)),))
    problems_of = _checker(row_schema)
    rows: list[Row] = []
    problems: list[Problem] = []
    first_seen: dict[ImageKey, int] = {}
    for number, line in lines[1:]:
        key, complaints = _read_row(line, problems_of)
        problems.extend(Problem(number, message) for message in complaints)
        if key is None:
            continue
        if key in first_seen:
            problems.append(
                Problem(number, f"duplicate row {key.as_csv()} (first at line {first_seen[key]})")
            )
            continue
        first_seen[key] = number
        rows.append(Row(key, number))
    return Matrix(tuple(rows), tuple(problems))


def row_problems(key: ImageKey, row_schema: Mapping[str, Any]) -> list[str]:
    """Why this row may not enter the matrix; empty when it may."""
    return _checker(row_schema)(key)


# Schema keywords the quick check below implements exactly as jsonschema does.
_PLAIN_ROW = {
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "additionalProperties",
    "required",
    "properties",
}
_PLAIN_FIELD = {"type", "pattern", "maxLength", "description"}


def _checker(row_schema: Mapping[str, Any]) -> Callable[[ImageKey], list[str]]:
    """The problems of a row. A row that passes the schema's own patterns has none, and no
    jsonschema is needed to say so (importing it costs a live audit more than a 1,000-row matrix);
    it builds the complaint for a row that fails, and checks any schema with other keywords."""
    validator: jsonschema.Draft202012Validator | None = None

    def thorough(key: ImageKey) -> list[str]:
        nonlocal validator
        if validator is None:
            import jsonschema

            validator = jsonschema.Draft202012Validator(row_schema)
        return _key_problems(key, validator)

    properties = row_schema.get("properties") or {}
    plain = (
        set(row_schema) <= _PLAIN_ROW
        and row_schema.get("type") == "object"
        and row_schema.get("additionalProperties") is False
        and set(row_schema.get("required") or ()) == set(FIELDS) == set(properties)
        and all(set(rule) <= _PLAIN_FIELD and rule.get("type") == "string" for rule in properties.values())
    )
    if not plain:
        return thorough
    # jsonschema's `pattern` is re.search with the pattern as written (a value is always a string here).
    patterns = [
        re.compile(properties[name]["pattern"]) if "pattern" in properties[name] else None for name in FIELDS
    ]
    # jsonschema's maxLength counts code points, as len() does.
    lengths = [properties[name].get("maxLength") for name in FIELDS]

    def quick(key: ImageKey) -> list[str]:
        values = (key.driver_branch, key.kernel, key.os_tag)
        fits = all(
            (p is None or p.search(v)) and (n is None or len(v) <= n)
            for p, n, v in zip(patterns, lengths, values, strict=True)
        )
        return [] if fits and valid_tag(key.tag) else thorough(key)

    return quick


def key_from_tag(tag: str) -> ImageKey:
    """Split `<branch>-<kernel>-<os tag>`: the branch ends at the first hyphen, the os tag starts after
    the last one, so an os tag with a hyphen needs the three-part form instead."""
    branch, sep, rest = tag.partition("-")
    kernel, sep2, os_part = rest.rpartition("-")
    if not (sep and sep2 and branch and kernel and os_part):
        raise ValueError(f"tag {tag!r} is not <driver-branch>-<kernel>-<os-tag>")
    return ImageKey(branch, kernel, os_part)


def append_row(text: str, key: ImageKey) -> str:
    """The matrix with `key` as its last line; every existing byte stays as it was."""
    newline = "\r\n" if "\r\n" in text else "\n"
    separator = newline if text and not text.endswith("\n") else ""
    return f"{text}{separator}{key.as_csv()}{newline}"


def _lines(text: str) -> Iterator[tuple[int, str]]:
    # Split on '\n' only: str.splitlines would also split on form feeds and Unicode separators.
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def _header_complaint(found: str) -> str:
    if found.startswith("\ufeff"):
        return f"the header starts with a byte-order mark; save the file as UTF-8 without BOM ({HEADER})"
    return f"the header must be exactly {HEADER}, found {found!r}"


def _read_row(line: str, problems_of: Callable[[ImageKey], list[str]]) -> tuple[ImageKey | None, list[str]]:
    try:
        cells = next(csv.reader([line], strict=True))
    except csv.Error as exc:
        return None, [f"not a CSV row: {exc}"]
    if len(cells) != len(FIELDS):
        return None, [f"expected {len(FIELDS)} fields ({HEADER}), found {len(cells)}"]
    key = ImageKey(*cells)
    complaints = problems_of(key)
    return (None if complaints else key), complaints


def _key_problems(key: ImageKey, validator: jsonschema.Draft202012Validator) -> list[str]:
    row = dict(zip(FIELDS, (key.driver_branch, key.kernel, key.os_tag), strict=True))
    errors = sorted(validator.iter_errors(row), key=lambda error: FIELDS.index(_field(error)))
    schema: Mapping[str, Any] = validator.schema  # type: ignore[assignment]
    complaints = [_describe(error, schema) for error in errors]
    if not complaints and not valid_tag(key.tag):
        complaints.append(invalid_tag_reason(key.tag))
    return complaints


def _field(error: jsonschema.ValidationError) -> str:
    return str(error.path[0]) if error.path and error.path[0] in FIELDS else FIELDS[0]


def _describe(error: jsonschema.ValidationError, schema: Mapping[str, Any]) -> str:
    if not error.path:
        return error.message
    name = _field(error)
    if error.instance == "":
        return f"{name} is empty"
    why = schema.get("properties", {}).get(name, {}).get("description", error.message)
    return f"{name} {error.instance!r}: {why}"
