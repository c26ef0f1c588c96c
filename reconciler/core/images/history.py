"""Matrix history: when each row entered the support matrix and, if so, left it.

The input is the text of one `git log -p --unified=0` pass over the matrix file, in order from the
first commit to the last (the git adapter produces it). Rows are compared as ImageKeys read with the
CSV reader, so a re-sorted or re-formatted row (CRLF, quotes, spaces around cells) keeps its original
addition: within one commit its `-` and `+` lines cancel out.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from reconciler.core.images.matrix import FIELDS
from reconciler.core.images.tags import ImageKey

# Each commit's metadata line starts with a byte no patch line can start with.
COMMIT_MARK = "\x01"
LOG_FORMAT = "%x01%H%x00%aN%x00%cI%x00%s"

# A squash merge ends its subject with "(#123)"; a merge commit starts with "Merge pull request #123".
_SQUASH_PR = re.compile(r"\(#(\d+)\)\s*$")
_MERGE_PR = re.compile(r"^Merge pull request #(\d+)\b")


@dataclass(frozen=True)
class CommitInfo:
    """The commit that changed the matrix: who, when it reached the branch, and which pull request."""

    commit: str
    author: str
    date: str  # ISO 8601, committer date: when the change landed on the branch
    pr: int | None


@dataclass(frozen=True)
class CommitDiff:
    info: CommitInfo
    removed: tuple[str, ...]  # row lines, without the leading '-'
    added: tuple[str, ...]  # row lines, without the leading '+'


@dataclass(frozen=True)
class Lifetime:
    """One stay of a row in the matrix; a row removed and added again has two."""

    key: ImageKey
    added: CommitInfo
    removed: CommitInfo | None = None


def pr_number(subject: str) -> int | None:
    """The pull request a subject names, as GitHub writes it for squash and merge commits."""
    match = _SQUASH_PR.search(subject) or _MERGE_PR.match(subject)
    return int(match.group(1)) if match and len(match.group(1)) <= 18 else None  # else no PR number


def commit_info(meta: str) -> CommitInfo:
    """Parse one LOG_FORMAT line (without the mark): hash, author, date, subject, NUL-separated."""
    commit, author, date, subject = meta.split("\x00", 3)
    return CommitInfo(commit, author, date, pr_number(subject))


def read_log(lines: Iterable[str]) -> Iterator[CommitDiff]:
    """CommitDiffs from `git log --format=LOG_FORMAT -p --unified=0` output, as it streams."""
    reader = _LogReader()
    for line in lines:
        if done := reader.feed(line.rstrip("\n")):
            yield done
    if last := reader.finish():
        yield last


@dataclass
class _LogReader:
    """A small state machine: metadata line, then per file a header, then hunks of +/- lines."""

    info: CommitInfo | None = None
    in_hunk: bool = False
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    def feed(self, line: str) -> CommitDiff | None:
        if line.startswith(COMMIT_MARK):
            done = self.finish()
            self.info = commit_info(line[len(COMMIT_MARK) :])
            return done
        if line.startswith("diff --git "):
            self.in_hunk = False  # the ---/+++ header lines that follow are not rows
        elif line.startswith("@@"):
            self.in_hunk = True
        elif self.in_hunk and line and line[0] in "+-":
            (self.added if line[0] == "+" else self.removed).append(line[1:])
        return None

    def finish(self) -> CommitDiff | None:
        if self.info is None:
            return None
        done = CommitDiff(self.info, tuple(self.removed), tuple(self.added))
        self.info, self.in_hunk, self.removed, self.added = None, False, [], []
        return done


def row_key(line: str) -> ImageKey | None:
    """The row a matrix line holds, or None for the header, blank lines and non-rows."""
    try:
        cells = [cell.strip() for cell in next(csv.reader([line.strip()]), [])]
    except csv.Error:
        return None
    if len(cells) != len(FIELDS) or not all(cells) or tuple(cells) == FIELDS:
        return None
    if cells[0].startswith("\ufeff"):  # a BOM'd header is still the header
        return None
    return ImageKey(*cells)


def fold(diffs: Iterable[CommitDiff]) -> list[Lifetime]:
    """Row lifetimes, in the order the rows were added."""
    history = _Fold()
    for diff in diffs:
        history.apply(diff)
    return history.lifetimes()


class _Fold:
    """Counts each row's copies: a row is in the matrix while its count is positive (duplicates
    count twice, so removing one copy of a duplicated row does not end its lifetime)."""

    def __init__(self) -> None:
        self._counts: dict[ImageKey, int] = {}
        self._open: dict[ImageKey, int] = {}
        self._lifetimes: list[Lifetime] = []
        self._keys: dict[str, ImageKey | None] = {}

    def apply(self, diff: CommitDiff) -> None:
        for key, delta in self._deltas(diff).items():
            before = self._counts.get(key, 0)
            after = max(before + delta, 0)
            self._counts[key] = after
            if before == 0 and after > 0:
                self._open[key] = len(self._lifetimes)
                self._lifetimes.append(Lifetime(key, diff.info))
            elif before > 0 and after == 0:
                index = self._open.pop(key)
                self._lifetimes[index] = Lifetime(key, self._lifetimes[index].added, diff.info)

    def lifetimes(self) -> list[Lifetime]:
        return list(self._lifetimes)

    def _deltas(self, diff: CommitDiff) -> dict[ImageKey, int]:
        # Added lines first, so new rows open in file order.
        deltas: dict[ImageKey, int] = {}
        for lines, sign in ((diff.added, 1), (diff.removed, -1)):
            for line in lines:
                if (key := self._key(line)) is not None:
                    deltas[key] = deltas.get(key, 0) + sign
        return deltas

    def _key(self, line: str) -> ImageKey | None:
        # A re-sort repeats the same lines as '-' and '+': read each distinct line once.
        if line not in self._keys:
            self._keys[line] = row_key(line)
        return self._keys[line]


def current_addition(lifetimes: Iterable[Lifetime], key: ImageKey) -> CommitInfo | None:
    """The commit that added `key` for its stay in the matrix now, None if it is not in it."""
    return next((life.added for life in lifetimes if life.key == key and life.removed is None), None)
