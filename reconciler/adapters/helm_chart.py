"""The GPU Operator chart's data file, loaded once, and `render` bound to it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.core import helm_chart
from reconciler.errors import GpudrvError

# Inside the package, so it ships in the wheel with no packaging rule of its own.
CHART_FILE = Path(__file__).resolve().parent.parent / "data" / "gpu-operator-chart.json"


@cache
def charts(path: Path = CHART_FILE) -> helm_chart.Charts:
    try:
        return helm_chart.parse_charts(json.loads(files.read_text(path)))
    except (ValueError, helm_chart.ChartDataError) as exc:
        raise GpudrvError(f"{path}: {exc}") from None


def render(values: Mapping[str, Any], chart_version: str) -> helm_chart.Rendered:
    """helm_chart.render with the shipped chart data."""
    return helm_chart.render(values, chart_version, charts())
