"""The one contract of -o json and -o yaml, for every command: one object, never a bare list.

- `kind` names the command (`audit`, `matrix-validate`, ...) and `ok` is true exactly when the command
  exits 0; these two come first, and each kind's schema is schemas/output/<kind>.schema.json.
- The same key means the same thing everywhere: `nodes` is a list of objects, one per node, each
  naming it under `node`; a count ends in `_count` (`node_count`); `findings` are what makes the exit
  code 1 (or 2 for the validators); `tag` is an image tag, `image` its full reference; `origin` is
  `file:line`; `upgrade_state` is the node's nvidia.com/gpu-driver-upgrade-state.
- -o yaml is the same data as -o json.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.core.base.github_text import json_safe
from reconciler.render.yaml_out import yaml_text

FORMS = ("json", "yaml")


def document(kind: str, ok: bool, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "ok": ok, **fields}


def text(value: dict[str, Any], form: str) -> str:
    """`value` as JSON (the default) or YAML text, safe to print inside GitHub Actions."""
    return yaml_text(value) if form == "yaml" else json_text(value)


def json_text(value: object, indent: int | None = 2) -> str:
    """`value` as JSON text for stdout: `##[` spelled `##\\u005b`, the same JSON string, which neither
    the runner nor the guard of actions_guard.py takes for a workflow command."""
    return json_safe(json.dumps(value, indent=indent))


def structured(form: str) -> bool:
    """Does -o ask for data (json, yaml) rather than text for people?"""
    return form in FORMS
