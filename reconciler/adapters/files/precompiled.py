"""NVIDIA's precompiled driver recipes, a data file (reconciler/data/precompiled-recipes.json)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from reconciler.adapters import files
from reconciler.core.images import build_plan

RECIPES_FILE = files.DATA / "precompiled-recipes.json"


@cache
def recipes(path: Path = RECIPES_FILE) -> build_plan.Recipes:
    return files.read_json(path, build_plan.parse_recipes)
