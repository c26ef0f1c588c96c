"""The machinery of shapes.py: a Shape (a kind and its JSON Schema), its compiled check, and the one
line that says where a document departs from it.

Each item of a 10,000-node list is checked, so the check is compiled (`Shape.holds`): plain Python
for the few keywords these schemas use, a few microseconds a node where jsonschema takes a
millisecond. jsonschema stays the authority: it is imported, and asked, only for a document the
compiled check does not pass, to say where and why (or that it is valid after all).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True, eq=False)
class Shape:
    """A kind of document and the JSON Schema of the fields gpudrv reads of it."""

    kind: str
    schema: dict[str, Any] = field(repr=False)

    @cached_property
    def validator(self) -> Any:
        import jsonschema  # only for a document `holds` does not pass: a live command rarely pays for it

        return jsonschema.Draft202012Validator(self._whole)

    @cached_property
    def holds(self) -> Callable[[Any], bool]:
        """True only for a document of the shape (False: ask the validator, which may still say yes)."""
        return _compiled(self._whole)

    @property
    def one(self) -> str:
        """`a Node`, `an Event`: the kind with its article, for messages."""
        return f"{'an' if self.kind[:1] in 'AEIOU' else 'a'} {self.kind}"

    @property
    def _whole(self) -> dict[str, Any]:
        return {**self.schema, "type": "object"}  # never null itself


# JSON Schema's types as Python's json module decodes them (bool is an int to Python, not to JSON Schema).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}
_COMPILED_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "minLength"}


def _never(_value: Any) -> bool:
    return False


def _compiled(schema: Mapping[str, Any]) -> Callable[[Any], bool]:
    """A check of `schema` that never passes a document the schema rejects; False for a schema with
    a keyword it does not know (the validator decides)."""
    if set(schema) - _COMPILED_KEYWORDS:
        return _never
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if any(name not in _PYTHON_TYPES for name in names):
        return _never
    types = tuple(kind for name in names for kind in _PYTHON_TYPES[name])
    no_bool = "integer" in names and "boolean" not in names
    if (leaf := _plain_types(schema)) is not None:
        return lambda value: isinstance(value, leaf)  # a leaf: the common case, kept cheap
    properties = {key: _compiled(sub) for key, sub in (schema.get("properties") or {}).items()}
    required = tuple(schema.get("required") or ())
    extra_schema = schema.get("additionalProperties")
    extra = _compiled(extra_schema) if isinstance(extra_schema, dict) else None
    # additionalProperties of one plain type (labels, annotations): one pass over the values.
    extra_types = _plain_types(extra_schema) if isinstance(extra_schema, dict) else None
    items = _compiled(schema["items"]) if "items" in schema else None
    shortest = schema.get("minLength")

    def fits(value: dict[str, Any]) -> bool:
        if any(key not in value for key in required):
            return False
        if extra_types is not None and not properties:
            return all(isinstance(sub, extra_types) for sub in value.values())
        return all(
            check(sub) for key, sub in value.items() if (check := properties.get(key, extra)) is not None
        )

    def holds(value: Any) -> bool:
        if (types and not isinstance(value, types)) or (no_bool and isinstance(value, bool)):
            return False
        if isinstance(value, dict):
            return fits(value)
        if isinstance(value, list) and items is not None:
            return all(items(sub) for sub in value)
        return not (isinstance(value, str) and shortest is not None and len(value) < int(shortest))

    return holds


def _plain_types(schema: Mapping[str, Any]) -> tuple[type, ...] | None:
    """The Python types of a schema that is a type and nothing else (and not "an integer but not a
    boolean", which isinstance cannot say); None for any other schema."""
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else list(kinds) if isinstance(kinds, list) else []
    if set(schema) != {"type"} or not names or any(name not in _PYTHON_TYPES for name in names):
        return None
    if "integer" in names and "boolean" not in names:
        return None
    return tuple(kind for name in names for kind in _PYTHON_TYPES[name])


def problem(shape: Shape, document: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where the document departs from the shape and how (the path to the field, a short reason);
    None when it has the shape."""
    if shape.holds(document):
        return None
    from jsonschema.exceptions import best_match

    validator = shape.validator
    if validator.is_valid(document):
        return None
    error = best_match(validator.iter_errors(document))
    path = tuple(error.absolute_path)
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in (error.instance or {})]
        return (*path, missing[0] if missing else "a field"), "is missing"
    return path, _reason(error)


def _reason(error: Any) -> str:
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"is {describe(error.instance)}, not {_article(' or '.join(k for k in wanted if k != 'null'))}"
    if error.validator == "minLength":
        return "is empty"
    return str(error.message).splitlines()[0][:200]


def _article(kind: str) -> str:
    names = {"object": "an object", "array": "a list", "integer": "an integer", "string": "a string"}
    return " or ".join(names.get(part, f"a {part}") for part in kind.split(" or "))


def describe(value: Any) -> str:
    """A value's JSON kind, with the value itself when it is short: `the number 5`, `a list`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if isinstance(value, int | float):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def dotted(path: Sequence[str | int]) -> str:
    """`metadata.labels["a/b"]`, `items[3]`: a path as a reader finds the field."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.replace("-", "").replace("_", "").isalnum():
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text or "the document"
