"""The GPU Operator chart's data file, loaded once, and `render` bound to it."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.core.contract import helm_chart

CHART_FILE = files.DATA / "gpu-operator-chart.json"


@cache
def charts(path: Path = CHART_FILE) -> helm_chart.Charts:
    return files.read_json(path, helm_chart.parse_charts)


def render(values: Mapping[str, Any], chart_version: str) -> helm_chart.Rendered:
    """helm_chart.render with the shipped chart data."""
    return helm_chart.render(values, chart_version, charts())
