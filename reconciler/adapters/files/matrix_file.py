"""Appending rows to the support matrix file: read, check and write under one lock, atomically.

`gpudrv matrix add` appends one row, `gpudrv matrix verify --write` the registry's tags the matrix
lacks; both through `append`, so two writers at once never both append to the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reconciler.adapters import files
from reconciler.adapters.sources import read_matrix, require_valid
from reconciler.core.images import matrix
from reconciler.core.images.matrix import Appended
from reconciler.core.images.tags import ImageKey


def append(path: Path, keys: Sequence[ImageKey]) -> list[Appended]:
    """Each key as a row at the end of the matrix, unless it is there already (the file must be valid:
    one error naming its first problem otherwise). The file is written once, if anything was added."""
    with files.locked(path) as target:
        text, existing = read_matrix(path)
        parsed = require_valid(path, existing)
        updated, result = text, []
        seen: dict[ImageKey, int] = {}
        for key in keys:
            row = parsed.find(key)
            if row is not None or key in seen:
                result.append(Appended(key, row.line if row else seen[key], added=False))
                continue
            updated = matrix.append_row(updated, key)
            seen[key] = updated.rstrip("\r\n").count("\n") + 1
            result.append(Appended(key, seen[key], added=True))
        if seen:
            files.write_atomic(target, updated)
    return result
