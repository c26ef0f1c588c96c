"""Line numbers inside a YAML document loaded by ruamel.yaml's round-trip loader (see manifests.py)."""

from __future__ import annotations

from collections.abc import Sequence
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
