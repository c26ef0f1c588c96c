"""Line numbers inside a YAML document loaded by ruamel.yaml's round-trip loader (see manifests.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any


def line_of(document: Any, path: Sequence[str | int], default: int) -> int:
    """The 1-based line of the deepest key or item of `path` that the document has: the value at fault,
    or the mapping it is missing from; `default` when the loader kept no position."""
    line, node = default, document
    for step in path:
        found = _position(node, step)
        if found is None:
            break
        line, node = found + 1, node[step]
    return line


def _position(node: Any, step: str | int) -> int | None:
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if isinstance(node, dict) and step in node:
            return int(lc.key(step)[0])
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            return int(lc.item(step)[0])
    except (KeyError, IndexError, TypeError):
        return None
    return None


# A plain scalar that YAML resolves to a number, boolean, null or date ends at a comment, at a flow
# indicator (`,` `]` `}` cannot be part of one) or at the end of its line: it is never quoted, and
# never spans lines (folding would put a space in it, and then it would be a string).
_PLAIN_END = re.compile(r"\s#|[,\]}]|$")
_PROPERTY = re.compile(r"[&!]\S*\s+")  # an anchor (&a) or a tag (!!float) before the scalar
_NULLS = frozenset({"~", "null", "Null", "NULL"})


def written(text: str, document: Any, path: Sequence[str | int]) -> str | None:
    """The value at `path` exactly as the file `text` writes it, when it is a plain (unquoted) scalar
    on one line: `22.10` where YAML loaded 22.1, `0x226` for 550. An empty string for a value left
    out (`key:`); None when the loader kept no position or the text there is not a plain scalar."""
    if not path:
        return None
    *parents, last = path
    node = document
    try:
        for step in parents:
            node = node[step]
        value = node[last]
        line, column = node.lc.item(last) if isinstance(last, int) else node.lc.value(last)
    except (AttributeError, KeyError, IndexError, TypeError):
        return None
    lines = _lines(text)
    rest = lines[line][column:].rstrip("\r") if 0 <= line < len(lines) else ""
    for _ in range(2):  # `&a !!int 06` -> `06`
        if (prop := _PROPERTY.match(rest)) is not None:
            rest = rest[prop.end() :]
    end = _PLAIN_END.search(rest)
    source = rest[: end.start() if end else len(rest)].rstrip()
    if value is None:
        # A value left out has no text of its own: ruamel places it at the next token.
        return source if source in _NULLS else ""
    if not source or source[0] in "\"'*|>[{":
        return None  # quoted, an alias, a block scalar or a collection: not a plain scalar
    return source


@lru_cache(maxsize=4)
def _lines(text: str) -> tuple[str, ...]:
    """The text's lines, split once: a file with 20,000 values to quote is not split 20,000 times."""
    return tuple(text.split("\n"))
