"""The -o json contract's schemas (schemas/output/<kind>.schema.json) as tests validate against them:
references to the shared schemas beside them (../desired-state.schema.json) resolved in place, as a
validator given the schemas folder would resolve them."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import REPO

SCHEMAS = REPO / "schemas" / "output"


def output_schema(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = resolved(json.loads((SCHEMAS / f"{kind}.schema.json").read_text()))
    return loaded


def resolved(value: Any) -> Any:
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str) and value["$ref"].startswith("../"):
            shared = json.loads((SCHEMAS.parent / value["$ref"].removeprefix("../")).read_text())
            return {key: item for key, item in shared.items() if key not in ("$schema", "$id")}
        return {key: resolved(item) for key, item in value.items()}
    if isinstance(value, list):
        return [resolved(item) for item in value]
    return value
