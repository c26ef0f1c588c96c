"""GitHub Actions output as text: workflow-command annotations, step-summary Markdown, and the
runner's rules for what it reads as a command. Pure: adapters/ci/github.py places and prints it.

Messages, properties and table cells come from manifests and the matrix (names, label values, CSV
cells), so they are escaped as the runner expects: `%` first, then CR and LF; in properties also `:`
and `,`, which separate them. Once CR and LF are escaped no value can start a line of its own
(`::warning::`, `::stop-commands::`). The runner also reads the older form `##[command]` anywhere in a
line, so `##[` is written `##\\[`. Everything else gpudrv prints in Actions goes through the guard of
adapters/ci/actions_guard.py (whose doc gives the runner's rules); the annotations, gpudrv's own
commands, go round it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Level = Literal["error", "warning", "notice"]
LEVELS: tuple[Level, ...] = ("error", "warning", "notice")

# GitHub shows at most 10 annotations of each level per step and drops the rest silently.
SHOWN_PER_LEVEL = 10
# The step summary takes 1 MiB per step; one command's section stays well under it.
SUMMARY_LIMIT = 1024 * 1024
SECTION_BUDGET = 256 * 1024
MAX_ROWS = 500

_ORIGIN = re.compile(r"(?P<file>.+):(?P<line>[0-9]+)")
# Markdown that could turn a value into markup, a link or HTML; `|` would end a table cell.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~&])")


# --- annotations -------------------------------------------------------------------------------


def escape_data(text: str) -> str:
    escaped = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return escaped.replace("##[", "##\\[")  # the runner's older command form, read anywhere in a line


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Level, message: str, file: str | None = None, line: int | None = None, title: str | None = None
) -> str:
    """`::warning file=F,line=L,title=T::message`; properties that are None are left out."""
    properties = {"file": file, "line": None if line is None else str(line), "title": title}
    given = ",".join(
        f"{key}={escape_property(value)}" for key, value in properties.items() if value is not None
    )
    return f"::{level}{' ' + given if given else ''}::{escape_data(message)}"


@dataclass(frozen=True)
class Annotation:
    """`file` as given (a path gpudrv read); github.publish places it from the workspace root."""

    level: Level
    message: str
    file: str | None = None
    line: int | None = None
    title: str | None = None

    def command(self) -> str:
        return annotation(self.level, self.message, self.file, self.line, self.title)


def at(level: Level, message: str, origin: str | None, title: str | None = None) -> Annotation:
    """An annotation at a `file:line` origin (or `file`, or nowhere when None)."""
    file, line = split_origin(origin)
    return Annotation(level, message, file, line, title)


def split_origin(origin: str | None) -> tuple[str | None, int | None]:
    """`dir/x.yaml:12` -> ("dir/x.yaml", 12); the path as given (github.publish places it)."""
    if origin is None:
        return None, None
    match = _ORIGIN.fullmatch(origin)
    if match is None:
        return origin, None
    return match["file"], int(match["line"])


def shown(annotations: Sequence[Annotation]) -> list[Annotation]:
    """Errors, then warnings, then notices, each in the given order (the most important first).
    Past what GitHub shows of a level, the last shown slot says how many more the summary lists."""
    result: list[Annotation] = []
    for level in LEVELS:
        same = [item for item in annotations if item.level == level]
        if len(same) > SHOWN_PER_LEVEL:
            more = len(same) - (SHOWN_PER_LEVEL - 1)
            note = Annotation(level, f"{more} more {level}s: see the job summary", title="gpudrv")
            same = [*same[: SHOWN_PER_LEVEL - 1], note]
        result += same
    return result


# --- Markdown for the step summary --------------------------------------------------------------


def text(value: str) -> str:
    """Untrusted text as literal Markdown on one line: no markup, link, HTML or table break."""
    return _MARKDOWN.sub(r"\\\1", _one_line(value))


def code(value: str) -> str:
    """Untrusted text as a code span on one line (nothing inside one is markup)."""
    flat = _one_line(value).replace("|", "\\|")  # GFM splits table cells before code spans
    if not flat:
        return ""
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat[0] in "` " or flat[-1] in "` " else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _one_line(value: str) -> str:
    return re.sub(r"[\r\n]+", " ", value)


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]  # cells already Markdown (see text() and code())


@dataclass(frozen=True)
class Summary:
    """One command's section of the step summary: a heading, a lead paragraph and tables."""

    heading: str
    lead: str = ""
    tables: Sequence[Table] = field(default_factory=tuple)

    def markdown(self, budget: int = SECTION_BUDGET, max_rows: int = MAX_ROWS) -> str:
        lines = [f"### {self.heading}", ""] + ([self.lead, ""] if self.lead else [])
        used = _lines_size(lines)
        for table in self.tables:
            block = _table_lines(table, budget - used, max_rows)
            lines += [*block, ""]
            used += _lines_size(block) + 1
        return "\n".join(lines)


def _table_lines(table: Table, budget: int, max_rows: int) -> list[str]:
    """The table's rows in order while they fit in `budget` bytes, then one "and N more" line."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    reserve = 100  # room for the closing line
    used = _lines_size(lines) + reserve
    for count, row in enumerate(table.rows):
        line = "| " + " | ".join(row) + " |"
        if count == max_rows or used + size(line) + 1 > budget:
            more = len(table.rows) - count
            return [*lines, "", f"_... and {more} more; run the command locally for the full list._"]
        lines.append(line)
        used += size(line) + 1
    return lines


def _lines_size(lines: Sequence[str]) -> int:
    return sum(size(line) + 1 for line in lines)


def size(text: str) -> int:
    """Its size in the summary file (written with backslashreplace: a file name may not be UTF-8)."""
    return len(text.encode("utf-8", "backslashreplace"))


# --- what the runner reads as a workflow command ----------------------------------------------

# Characters a culture-sensitive .NET comparison may skip: C0/C1 controls that are not line breaks or
# blanks, format characters (Cf) and the other default-ignorable code points (variation selectors, ...).
IGNORABLE = (
    "\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u00ad\u034f\u061c\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
IGNORED = f"[{IGNORABLE}]*"  # any run of them, where the runner's comparison skips it
_LEGACY = re.compile(f"#{IGNORED}#{IGNORED}\\[")  # `##[`
LEADING_COLON = re.compile(rf"^([\s{IGNORABLE}]*):")  # a value's first visible character, if a colon


def neutral_legacy(text: str, bracket: str) -> str:
    """`text` with the `[` of every `##[` spelled `bracket` (`\\[`, `\\u005b`, `&#91;`)."""
    return _LEGACY.sub(lambda found: found[0][:-1] + bracket, text)


def json_safe(text: str) -> str:
    """JSON (or YAML) text with the `[` of `##[` spelled `\\u005b`: the same value inside a string or
    a double-quoted scalar, and no workflow command (the guard's `\\[` would not be valid JSON)."""
    return neutral_legacy(text, "\\u005b")
