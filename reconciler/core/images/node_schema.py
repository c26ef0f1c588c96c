"""Node manifests against schemas/node-manifest.schema.json: each problem with the path to the value
at fault, so the caller can name its line. Never raises on bad content: a PR author sees every problem.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema is imported when a manifest is checked: live commands never pay for it
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

    Checker = Validator

Path = tuple[str | int, ...]
# The value at a path as the file writes it (see adapters/positions.written), or None if unknown.
Written = Callable[[Path], str | None]
LABELS: Path = ("metadata", "labels")


@dataclass(frozen=True)
class Problem:
    """A problem in a Node manifest file, at the line of the label (or field) at fault."""

    file: str
    line: int
    message: str

    def text(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Report:
    """Every Node manifest under a folder, checked: how many, and all their problems."""

    folder: str
    nodes: int
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Violation:
    path: Path  # from the document root to the value at fault (or to where it is missing)
    message: str


def validator(schema: Mapping[str, Any]) -> Checker:
    """A checker for `schema` that checks each string value (a label key, a label value) against each
    subschema once: a fleet's nodes share most of their labels, and 10,000 Node manifests made
    10,000 times the same walk through labelKey and labelValue. `properties`, `additionalProperties`
    and `propertyNames` do what jsonschema's do (jsonschema/_keywords.py), through that memo; each
    error is copied out, as the caller prefixes its path in place. A `$ref` with nothing beside it
    (`{"$ref": "#/$defs/labels"}`) is replaced by what it names, so it is not looked up for each node.
    A schema with an `$id` below its root resolves `#...` differently in places: it is used as given."""
    plain = _strict()
    if _nested_id(schema, top=True):
        checker: Checker = plain(schema)
        return checker
    import jsonschema

    schema = _inlined(schema, schema.get("$defs") or {}, ())

    memo: dict[tuple[int, str], list[ValidationError]] = {}

    def descend(
        checker: Any,  # jsonschema's validators have descend; its Validator protocol does not say so
        instance: Any,
        subschema: Any,
        path: str | None = None,
        schema_path: str | None = None,
    ) -> Iterator[ValidationError]:
        if not isinstance(instance, str):
            yield from checker.descend(instance, subschema, path=path, schema_path=schema_path)
            return
        found = memo.get((id(subschema), instance))
        if found is None:
            found = memo[(id(subschema), instance)] = [
                _copy(error) for error in checker.descend(instance, subschema)
            ]
        for template in found:
            error = _copy(template)
            if path is not None:
                error.path.appendleft(path)
            if schema_path is not None:
                error.schema_path.appendleft(schema_path)
            yield error

    def properties(checker: Checker, value: Any, instance: Any, _: Any) -> Iterator[ValidationError]:
        if checker.is_type(instance, "object"):
            for name, subschema in value.items():
                if name in instance:
                    yield from descend(checker, instance[name], subschema, path=name, schema_path=name)

    def additional(checker: Checker, value: Any, instance: Any, subschema: Any) -> Iterator[ValidationError]:
        if not (checker.is_type(value, "object") and "patternProperties" not in subschema):
            yield from plain.VALIDATORS["additionalProperties"](checker, value, instance, subschema)
        elif checker.is_type(instance, "object"):
            known = subschema.get("properties", {})
            for name in instance:
                if name not in known:
                    yield from descend(checker, instance[name], value, path=name)

    def names(checker: Checker, value: Any, instance: Any, _: Any) -> Iterator[ValidationError]:
        if checker.is_type(instance, "object"):
            for name in instance:
                yield from descend(checker, name, value)

    keywords = {"properties": properties, "additionalProperties": additional, "propertyNames": names}
    memoized: Checker = jsonschema.validators.extend(plain, keywords)(schema)  # type: ignore[no-untyped-call]
    return memoized


def _inlined(node: Any, defs: Mapping[str, Any], inside: tuple[str, ...]) -> Any:
    """`node` with every lone `{"$ref": "#/$defs/NAME"}` replaced by that definition (itself inlined;
    one that refers to itself, through any chain, keeps its `$ref`). Nothing else changes: the same
    keywords apply to the same values, and an error's `schema` is the definition's own mapping."""
    if isinstance(node, list):
        return [_inlined(item, defs, inside) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    name = ref.removeprefix("#/$defs/") if isinstance(ref, str) and ref.startswith("#/$defs/") else ""
    if len(node) == 1 and name in defs and "/" not in name and name not in inside:
        return _inlined(defs[name], defs, (*inside, name))
    return {key: _inlined(value, defs, inside) for key, value in node.items()}


def _copy(error: ValidationError) -> ValidationError:
    return type(error).create_from(error)


def _nested_id(schema: Any, *, top: bool = False) -> bool:
    if isinstance(schema, Mapping):
        return (not top and "$id" in schema) or any(_nested_id(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_nested_id(item) for item in schema)
    return False


def violations(
    document: Mapping[str, Any], checker: Checker, written: Written | None = None
) -> list[Violation]:
    """One violation per value at fault (a missing one: at the path it is missing from, plus its key),
    the most specific rule first, in the schema's order. `written` gives a value's source text, so
    the advice for a label YAML did not load as a string quotes what the file says."""
    generic = (
        checker.schema.get("$defs", {}).get("labelValue") if isinstance(checker.schema, Mapping) else None
    )
    found: dict[Path, str] = {}
    # A label's own rule (digits only) says more than the rule every label value follows.
    for error in sorted(checker.iter_errors(document), key=lambda error: error.schema == generic):
        for path, message in _described(error, written):
            found.setdefault(path, message)
    return [Violation(path, message) for path, message in found.items()]


def _pattern(
    checker: Checker, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    # JSON Schema patterns are ECMA-262: '$' is the end of the input. Python's '$' also matches
    # before a final newline, which would let "550\n" pass as digits only.
    from jsonschema.exceptions import ValidationError

    if checker.is_type(instance, "string") and re.search(_end_anchored(pattern), instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _end_anchored(pattern: str) -> str:
    return pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern


@cache
def _strict() -> Any:
    """Draft 2020-12 with ECMA-262's '$' in patterns."""
    import jsonschema

    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.Draft202012Validator, {"pattern": _pattern}
    )


def _path(error: ValidationError) -> Path:
    if _is_key(error):  # jsonschema reports a bad key at its mapping: point at the key itself
        return (*error.absolute_path, str(error.instance))
    return tuple(error.absolute_path)


def _is_key(error: ValidationError) -> bool:
    return "propertyNames" in error.schema_path and isinstance(error.instance, str)


def _described(error: ValidationError, written: Written | None) -> list[tuple[Path, str]]:
    path = _path(error)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    why = schema.get("description")
    if error.validator == "required":
        # jsonschema names each missing key only in its message: compute them all here instead.
        return [
            ((*path, key), f"{_where((*path, key))} is missing" + (f": {why}" if why else ""))
            for key in _missing(error)
        ]
    if _is_key(error):
        return [(path, f"label key {_shown(error.instance)}: {why or error.message}")]
    if error.validator == "type" and path[:-1] == LABELS:  # YAML made a number or boolean of it
        return [(path, must_be_string(_where(path), error.instance, written(path) if written else None))]
    separator = "=" if path[:-1] == LABELS else " "
    return [(path, f"{_where(path)}{separator}{_shown(error.instance)}: {why or error.message}")]


def _missing(error: ValidationError) -> list[str]:
    required = error.validator_value if isinstance(error.validator_value, list) else []
    present = error.instance if isinstance(error.instance, Mapping) else {}
    return [str(key) for key in required if key not in present]


def _where(path: Path) -> str:
    if len(path) == 3 and path[:2] == LABELS:
        return f"label {path[2]}"
    return ".".join(str(part) for part in path) or "the document"


def must_be_string(where: str, value: Any, written: str | None) -> str:
    """`label K must be a string; quote it: "22.10" (unquoted, YAML reads 22.10 as the number 22.1)`:
    the advice quotes the text as the file wrote it (`written`), never the value YAML made of it,
    which may differ (22.10 is 22.1, 06 is 6, 0x226 is 550). Without the text, the value as YAML."""
    if isinstance(value, Mapping | list):
        return f"{where} must be a string, not a {'mapping' if isinstance(value, Mapping) else 'list'}"
    if written is None:
        return f'{where} must be a string; quote it: "{_plain(value)}"'
    quoted = '"' + written.replace("\\", "\\\\").replace('"', '\\"') + '"'
    unquoted = f"unquoted, YAML reads {written}" if written else "YAML reads a value left out"
    return f"{where} must be a string; quote it: {quoted} ({unquoted} as {_reading(value)})"


def _reading(value: Any) -> str:
    """What YAML made of an unquoted scalar, in words."""
    for kind, words in _READINGS:
        if isinstance(value, kind):
            return words(value)
    tag = getattr(value, "tag", None)  # e.g. `=` and `<<`: YAML 1.1's value and merge keys
    return f"a {tag} node" if tag is not None else f"a {type(value).__name__}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN, not a number"
    if math.isinf(value):
        return "minus infinity" if value < 0 else "infinity"
    return f"the number {float(value)!r}"


_READINGS: tuple[tuple[type, Callable[[Any], str]], ...] = (
    (bool, lambda value: f"the boolean {'true' if value else 'false'}"),  # first: a bool is an int
    (int, lambda value: f"the number {int(value)}"),
    (float, _number),
    (datetime.datetime, lambda value: f"the timestamp {value.isoformat()}"),  # first: it is a date
    (datetime.date, lambda value: f"the date {value.isoformat()}"),
    (type(None), lambda _: "null, no value"),
)


def _plain(value: Any) -> str:
    """How the value reads in YAML: what to put between the quotes."""
    return "" if value is None else _shown(value)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    return str(value) if isinstance(value, int | float) else type(value).__name__
