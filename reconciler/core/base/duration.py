"""Durations written as kubectl writes them: `20s`, `5m`, `1h30m`, `500ms`; a bare number is seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse(text: str) -> float:
    """Seconds; raises ValueError with a message fit for the user."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    parts = _PART.findall(value)
    if not value or "".join(number + unit for number, unit in parts) != value:
        raise ValueError(f"invalid duration {text!r}: write it as kubectl does, like 20s, 5m or 1h30m")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def show(seconds: float) -> str:
    """The shortest kubectl-style spelling: 20s, 5m, 1h30m."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
