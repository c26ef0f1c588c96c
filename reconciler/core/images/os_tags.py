"""The GPU Operator's os-tag rule, per operator release: how os-release ID and VERSION_ID become the
last part of a precompiled driver image tag (`ubuntu22.04`, `rhel9`).

The rule changed between releases, so it is data (reconciler/data/os-tag-rules.json, each rule with
the operator source it was read from) and the release decides which rule applies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts
_GO_INT_DIGITS = 19  # and what fits its 64-bit int (more digits: ErrRange; int() refuses 4,300)
_VERSION = re.compile(
    r"v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?:\.(?P<patch>[0-9]+))?(?:[-+][0-9A-Za-z.-]+)?"
)

_LINE = re.compile(r"v?([0-9]{1,9})(?:\.([0-9]{1,9}))?")  # v99, v26.9: a release line, not a release
Release = tuple[int, int, int]


class RuleError(ValueError):
    """An operator version gpudrv has no rule for, or a rules file that is not shaped right."""


@dataclass(frozen=True)
class Rule:
    """Which releases it covers (`since` inclusive, `until` exclusive; None is open) and, per os-release
    ID, the first major version whose VERSION_ID is cut to its major number (0: every version)."""

    releases: str
    since: Release | None
    until: Release | None
    major_only: Mapping[str, int] = field(default_factory=dict)
    integer_major: frozenset[str] = frozenset()  # "*": every ID
    lenient_major: bool = False  # v26.3.1+: spaces and a leading v/V are dropped before Atoi
    source: str = ""

    def covers(self, release: Release) -> bool:
        return (self.since is None or release >= self.since) and (self.until is None or release < self.until)

    def os_tag(self, os_id: str, version_id: str) -> str:
        """`ubuntu` + `22.04` gives `ubuntu22.04`; an ID cut to the major version gives `rhel9`.
        RuleError when the operator itself would fail on the VERSION_ID (its major is no integer)."""
        major = version_id.split(".", 1)[0]
        number = self._major_number(os_id, major)
        threshold = self.major_only.get(os_id)
        if threshold is not None and (threshold == 0 or (number is not None and number >= threshold)):
            return f"{os_id}{major}"
        return f"{os_id}{version_id}"

    def _major_number(self, os_id: str, major: str) -> int | None:
        if not ({"*", os_id} & self.integer_major):
            return None
        text = major.strip().removeprefix("v").removeprefix("V") if self.lenient_major else major
        if _GO_INT.fullmatch(text) is None or len(text.lstrip("+-").lstrip("0")) > _GO_INT_DIGITS:
            what = "is not an integer" if _GO_INT.fullmatch(text) is None else "is out of range"
            raise RuleError(
                f"VERSION_ID major {major[:40]!r} {what}: GPU Operator {self.releases} "
                "fails to compute an os tag for it"
            )
        return int(text)


@dataclass(frozen=True)
class Rules:
    rules: tuple[Rule, ...]
    lines: tuple[tuple[int, int], ...]  # the release lines (major, minor) the operator has shipped

    @property
    def newest(self) -> Rule:
        return self.rules[-1]

    def for_version(self, version: str) -> Rule:
        """The rule of an operator release like `v26.3.1`; RuleError for one gpudrv does not know, and
        for a release line (`v99`, `v26.9`: a chart's partial version) none of whose lines it knows."""
        known = ", ".join(f"v{major}.{minor}" for major, minor in self.lines)
        line = _LINE.fullmatch(version.strip())
        if line is not None and not any(
            major == int(line[1]) and (line[2] is None or minor == int(line[2]))
            for major, minor in self.lines
        ):
            raise RuleError(f"unknown GPU Operator release line {version!r}: gpudrv knows the lines {known}")
        release = parse_release(version)
        if release[:2] not in self.lines:
            raise RuleError(f"unknown GPU Operator release {version!r}: gpudrv knows the lines {known}")
        return next(rule for rule in self.rules if rule.covers(release))


def parse_release(version: str) -> Release:
    match = _VERSION.fullmatch(version.strip())
    if match is None or len(version) > 64:  # no release number runs to thousands of digits
        raise RuleError(f"GPU Operator version {version[:64]!r} is not a release like v26.3.1")
    return int(match["major"]), int(match["minor"]), int(match["patch"] or 0)


def parse_rules(data: Mapping[str, Any]) -> Rules:
    """The rules file's content, checked: rules in release order, covering every known line once."""
    try:
        rules = tuple(_rule(item) for item in data["rules"])
        lines = tuple(_line(text) for text in data["releaseLines"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RuleError(f"os-tag rules: {exc}") from None
    for major, minor in lines:
        covering = [rule for rule in rules if rule.covers((major, minor, 0))]
        if len(covering) != 1:
            raise RuleError(f"os-tag rules: release line v{major}.{minor} is covered {len(covering)} times")
    if not rules or rules[-1].until is not None:
        raise RuleError("os-tag rules: the last rule must be open-ended (the newest rule)")
    return Rules(rules, lines)


def _rule(item: Mapping[str, Any]) -> Rule:
    major_only = item.get("majorOnlyFrom") or {}
    if not all(isinstance(key, str) and isinstance(value, int) for key, value in major_only.items()):
        raise ValueError(f"majorOnlyFrom of {item.get('releases')!r} maps IDs to major versions")
    return Rule(
        releases=str(item["releases"]),
        since=_bound(item.get("since")),
        until=_bound(item.get("until")),
        major_only=dict(major_only),
        integer_major=frozenset(str(os_id) for os_id in item.get("integerMajor") or ()),
        lenient_major=bool(item.get("lenientMajor", False)),
        source=str(item["source"]),
    )


def _bound(text: Any) -> Release | None:
    return None if text is None else parse_release(str(text))


def _line(text: str) -> tuple[int, int]:
    major, minor, _ = parse_release(text)
    return major, minor


def describe(rule: Rule, ids: Sequence[str] = ()) -> str:
    """One line for messages: which IDs keep only the major version under this rule."""
    cut = [f"{os_id}" + (f" from {os_id}{n}" if n else "") for os_id, n in sorted(rule.major_only.items())]
    subset = [item for item in cut if not ids or item.split()[0] in ids]
    return f"{rule.releases}: " + (
        ", ".join(subset) + " keep the major version" if subset else "ID+VERSION_ID"
    )
