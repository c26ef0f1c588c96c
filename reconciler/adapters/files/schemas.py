"""The JSON Schemas in schemas/: at the repository root, or inside an installed wheel."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.errors import GpudrvError

_PACKAGE = Path(__file__).resolve().parents[2]
_CANDIDATES = (_PACKAGE / "_schemas", _PACKAGE.parent / "schemas")


@cache
def load(name: str) -> dict[str, Any]:
    for folder in _CANDIDATES:
        path = folder / f"{name}.schema.json"
        if path.is_file():
            loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return loaded
    raise GpudrvError(f"schema {name} not found in {' or '.join(map(str, _CANDIDATES))}; reinstall gpudrv")
