"""GitHub Actions: annotations on a file and line, and the job's Markdown step summary.

Messages, properties and table cells come from manifests and the matrix (names, label values, CSV
cells), so they are escaped as the runner expects: `%` first, then CR and LF; in properties also `:`
and `,`, which separate them. Once CR and LF are escaped no value can start a line of its own
(`::warning::`, `::stop-commands::`). The runner also reads the older form `##[command]` anywhere in a
line, so `##[` is written `##\\[`. Everything else gpudrv prints in Actions goes through the guard of
actions_guard.py; the annotations, gpudrv's own commands, go round it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reconciler.adapters import files
from reconciler.adapters.ci import actions_guard
from reconciler.errors import GpudrvError

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
    """`dir/x.yaml:12` -> ("dir/x.yaml", 12), the path as GitHub places it (see workspace_path)."""
    if origin is None:
        return None, None
    match = _ORIGIN.fullmatch(origin)
    if match is None:
        return workspace_path(origin), None
    return workspace_path(match["file"]), int(match["line"])


def workspace_path(file: str) -> str:
    """GitHub places annotations by path from the repository root: $GITHUB_WORKSPACE, where a
    workflow's steps start. Paths outside it are left as given."""
    try:
        root = files.absolute(Path(os.environ.get("GITHUB_WORKSPACE") or ".")).resolve()
        absolute = files.absolute(Path(file)).resolve()
    except (OSError, RuntimeError):  # a name too long, a symlink loop (3.11's resolve: RuntimeError)
        return Path(file).as_posix()
    return absolute.relative_to(root).as_posix() if absolute.is_relative_to(root) else Path(file).as_posix()


def error_annotation(error: GpudrvError) -> Annotation:
    """A GpudrvError as an annotation, at its file and line when it has both."""
    if error.file is None or error.line is None:
        return Annotation("error", str(error), title="gpudrv")
    return Annotation("error", error.message, workspace_path(error.file), error.line, "gpudrv")


def count(number: int, noun: str) -> str:
    """`1 GPU node`, `2 GPU nodes`."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


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
        used = _size(lines)
        for table in self.tables:
            block = _table_lines(table, budget - used, max_rows)
            lines += [*block, ""]
            used += _size(block) + 1
        return "\n".join(lines)


def _table_lines(table: Table, budget: int, max_rows: int) -> list[str]:
    """The table's rows in order while they fit in `budget` bytes, then one "and N more" line."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    reserve = 100  # room for the closing line
    used = _size(lines) + reserve
    for count, row in enumerate(table.rows):
        line = "| " + " | ".join(row) + " |"
        if count == max_rows or used + _bytes(line) + 1 > budget:
            more = len(table.rows) - count
            return [*lines, "", f"_... and {more} more; run the command locally for the full list._"]
        lines.append(line)
        used += _bytes(line) + 1
    return lines


def _size(lines: Sequence[str]) -> int:
    return sum(_bytes(line) + 1 for line in lines)


def _bytes(text: str) -> int:
    """Its size in the summary file (written with backslashreplace: a file name may not be UTF-8)."""
    return len(text.encode("utf-8", "backslashreplace"))


def append_summary(summary: Summary) -> None:
    """Append the section to $GITHUB_STEP_SUMMARY in one write (a no-op outside GitHub Actions),
    sized to what the step's 1 MiB still holds."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    path = Path(target)
    existing = path.stat().st_size if path.exists() else 0
    budget = min(SECTION_BUDGET, SUMMARY_LIMIT - existing - 1024)
    markdown = summary.markdown(budget) + "\n"
    if _bytes(markdown) > SUMMARY_LIMIT - existing:
        return  # the step's summary is full: GitHub would reject all of it
    try:
        # backslashreplace: a file name that is not UTF-8 (surrogate escapes) must not end the run.
        with path.open("a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(markdown)
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot write the step summary: {exc.strerror}") from None


def publish(annotations: Sequence[Annotation], summary: Summary, closing: str) -> None:
    """Print the annotations GitHub will show, most important first, then a closing line of counts
    (fixed text only: it must not carry untrusted values), and append the summary."""
    for item in shown(annotations):
        actions_guard.command(item.command())
    print(closing)
    append_summary(summary)


def print_rendered(text: str) -> None:
    """Print a github renderer's text: its annotation lines (made by annotation(), every value escaped,
    so each is one line that starts with `::`) go round the guard; its other lines go through it."""
    for line in text.split("\n"):
        if line.startswith("::"):
            actions_guard.command(line)
        else:
            print(line)


def json_text(value: object, indent: int | None = 2) -> str:
    """`value` as JSON text for stdout: `##[` spelled `##\\u005b`, the same JSON string, which neither
    the runner nor the guard of actions_guard.py takes for a workflow command."""
    return actions_guard.json_safe(json.dumps(value, indent=indent))
