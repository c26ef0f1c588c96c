"""Versions as the NVIDIA Container Toolkit reads them: Masterminds/semver v3.5.0's NewVersion.

The toolkit's requirement properties (cuda, driver, arch) and the legacy CUDA_VERSION rule parse every
version with github.com/Masterminds/semver/v3 NewVersion, which by default coerces: `12`, `12.4`,
`v12.4`, `550.127.05` (leading zeros allowed) are versions; a fourth part, a space or a sign is not.
docs/research/cuda-requirements.md cites the rules this module follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_VERSION_LEN = 256
_UINT64_MAX = 2**64 - 1
_LOOSE = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
)

INVALID = "invalid semantic version"
TOO_LONG = f"version string is too long (max {MAX_VERSION_LEN} bytes)"
STARTS_ZERO = "version segment starts with 0"


class VersionError(ValueError):
    """The library's error text, verbatim (the toolkit wraps it in its own messages)."""


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: str

    def compare(self, other: Version) -> int:
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if self.pre == other.pre == "":
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        return _compare_prerelease(self.pre, other.pre)


def parse(text: str) -> Version:
    """NewVersion(text) with the library's default (coercing) mode; raises VersionError."""
    if len(text.encode()) > MAX_VERSION_LEN:
        raise VersionError(TOO_LONG)
    found = _LOOSE.fullmatch(text)
    if found is None:
        raise VersionError(INVALID)
    major = _segment(found[1])
    minor = _segment(found[2][1:]) if found[2] else 0
    patch = _segment(found[3][1:]) if found[3] else 0
    pre = found[5] or ""
    for part in pre.split(".") if pre else ():
        if part.isascii() and part.isdigit() and len(part) > 1 and part[0] == "0":
            raise VersionError(STARTS_ZERO)
    return Version(major, minor, patch, pre)


def _segment(digits: str) -> int:
    value = int(digits)
    if value > _UINT64_MAX:
        raise VersionError(
            f'error parsing version segment: strconv.ParseUint: parsing "{digits}": value out of range'
        )
    return value


def _compare_prerelease(mine: str, theirs: str) -> int:
    left, right = mine.split("."), theirs.split(".")
    for index in range(max(len(left), len(right))):
        result = _compare_part(
            left[index] if index < len(left) else "", right[index] if index < len(right) else ""
        )
        if result:
            return result
    return 0


def _uint(text: str) -> int | None:
    if not text or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= _UINT64_MAX else None


def _compare_part(mine: str, theirs: str) -> int:
    if mine == theirs:
        return 0
    if not mine:
        return -1
    if not theirs:
        return 1
    mine_number, their_number = _uint(mine), _uint(theirs)
    if mine_number is not None and their_number is not None:
        return 1 if mine_number > their_number else -1
    if mine_number is None and their_number is None:
        return 1 if mine > theirs else -1
    return 1 if mine_number is None else -1  # a number sorts before a word
