"""`gpudrv report -o html`: the fleet page, one self-contained HTML file (inline CSS and SVG, no script,
nothing fetched when it is opened; printable).

Jinja2 with autoescape writes it: every value from outside (node names, labels, authors, reasons,
paths) is escaped wherever the template puts it, text or attribute, HTML or inline SVG, without a
call to remember at each place. The pictures are plain SVG whose geometry this module computes (pure
functions, unit-tested): a charting library would bring JavaScript, usually from a CDN.

The page is ASCII (other characters as character references), so any stdout encoding carries it, and
no line of it can read as a GitHub Actions workflow command: values have `[`, CR, LF and a leading `:`
as references.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from reconciler.core.audit import cluster_names
from reconciler.core.base.github_text import LEADING_COLON
from reconciler.core.cuda.cuda_workloads import Judged
from reconciler.core.views.fleet_page import Change, Coverage, NodeRow, Phase, Progress, Status
from reconciler.render import words

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATE = "fleet_page.html.j2"
# Lists that could run to thousands of lines are cut here; the page says how many more there are.
MAX_STUCK = 500
MAX_CHANGES_LISTED = 50
MAX_NODES_PER_IMAGE = 12
MAX_WORKLOADS = 300  # rows of the CUDA workloads table
MAX_LABELLED_POINTS = 12
OPEN_NODES = 200  # the node table starts folded past this many nodes
DENSE_POINTS = 120  # past this, small points without an outline: outlines would hide the line


@dataclass(frozen=True)
class Facts:
    """Where the page's data comes from, and when and by what it was made."""

    generated: datetime
    source: str  # the cluster or the directory the page describes
    matrix: str
    matrix_rows: int
    mode: str  # the driver contract: lab, ClusterPolicy or NVIDIADriver, and the operator rule
    version: str  # gpudrv's
    commit: str | None = None
    commit_note: str | None = None  # uncommitted changes, or why there is no commit
    history_note: str | None = None  # why there is no history (not a git repository, a shallow clone)
    notes: tuple[str, ...] = ()  # the fleet's problems (the audit's fleet notes)
    clusters: tuple[str, ...] = ()  # several clusters side by side: node names are CLUSTER/NODE


# --- the upgrade-state bar ---------------------------------------------------------------------------

PHASE_COLORS = {
    Phase.NOT_STARTED: "#9e9e9e",
    Phase.DONE: "#2e7d32",
    Phase.FAILED: "#c62828",
    Phase.UNKNOWN: "#ef6c00",
}
# The steps of an upgrade in progress, light to dark as they near the end.
# One blue per in-progress state of the operator's list (ten), light to dark.
PROGRESS_COLORS = (
    "#bbdefb", "#90caf9", "#64b5f6", "#42a5f5", "#2196f3",
    "#1e88e5", "#1976d2", "#1565c0", "#0d47a1", "#082f6b",
)  # fmt: skip


@dataclass(frozen=True)
class Segment:
    label: str
    count: int
    color: str
    x: float
    width: float
    share: float  # of all GPU nodes, 0..1


def state_colors(progress: Progress) -> list[str]:
    """A color per row of progress.counts: by phase, the in-progress steps in a blue ramp."""
    colors, step = [], 0
    for row in progress.counts:
        if row.phase is Phase.IN_PROGRESS:
            colors.append(PROGRESS_COLORS[min(step, len(PROGRESS_COLORS) - 1)])
            step += 1
        else:
            colors.append(PHASE_COLORS[row.phase])
    return colors


def state_bar(progress: Progress, width: float) -> list[Segment]:
    """One segment per state that has nodes, as wide as its share of the GPU nodes."""
    if not progress.total:
        return []
    segments, x = [], 0.0
    for row, color in zip(progress.counts, state_colors(progress), strict=True):
        if not row.count:
            continue
        share = row.count / progress.total
        segments.append(Segment(row.label, row.count, color, round(x, 2), round(share * width, 2), share))
        x += share * width
    return segments


# --- the history chart -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    radius: float
    kind: str  # add, remove or both
    title: str  # the tooltip: date, author, PR, rows
    label: str | None  # drawn beside the point when there are few


@dataclass(frozen=True)
class Tick:
    at: float
    text: str
    anchor: str = "middle"  # SVG text-anchor: the first and last dates stay inside the chart


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int  # x of the plot's right edge
    top: int
    bottom: int  # y of the plot's baseline
    path: str  # the matrix's size over time, as steps
    points: tuple[Point, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    by_time: bool  # False: the commits are evenly spaced (some date could not be read)
    dense: bool = False  # many points: drawn small and without an outline


def nice_ceiling(value: int) -> int:
    """The axis top: 1, 2 or 5 times a power of ten, at least `value` (and at least 1)."""
    if value <= 1:
        return 1
    power = int(10 ** math.floor(math.log10(value)))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def commit_title(change: Change) -> str:
    info = change.commit
    parts = [info.date[:10], info.commit[:12], info.author]
    parts.append(f"PR #{info.pr}" if info.pr is not None else "no PR")
    rows = [f"+{key.tag}" for key in change.added[:5]] + [f"-{key.tag}" for key in change.removed[:5]]
    more = len(change.added) + len(change.removed) - len(rows)
    counts = f"+{len(change.added)} / -{len(change.removed)} rows, {change.rows_after} after"
    return " | ".join(parts) + f"\n{counts}\n" + "\n".join(rows) + (f"\n... and {more} more" if more else "")


def timeline_chart(changes: Sequence[Change], width: int = 960, height: int = 280) -> Chart:
    """The number of rows in the matrix over time, a point per commit that changed it."""
    left, right, top, bottom = 56, width - 24, 20, height - 40
    moments = [change.when for change in changes]
    by_time = bool(changes) and all(moment is not None for moment in moments)
    if by_time:
        times = [_utc(moment).timestamp() for moment in moments if moment is not None]
        start, end = min(times), max(times)
        if end - start < 86400:  # one day at least, centred
            start, end = start - 43200, end + 43200
        xs = [left + (t - start) / (end - start) * (right - left) for t in times]
    else:
        start = end = 0.0
        span = max(len(changes) - 1, 1)
        xs = [
            left + (index / span if len(changes) > 1 else 0.5) * (right - left)
            for index in range(len(changes))
        ]
    top_value = nice_ceiling(max((change.rows_after for change in changes), default=1))

    def y(value: int) -> float:
        return round(bottom - value / top_value * (bottom - top), 2)

    path = [f"M{left},{y(0)}"]
    for x, change in zip(xs, changes, strict=True):
        path.append(f"H{x:.2f}V{y(change.rows_after)}")
    if changes:
        path.append(f"H{right}")
    labelled = len(changes) <= MAX_LABELLED_POINTS
    dense = len(changes) > DENSE_POINTS
    points = tuple(
        Point(
            round(x, 2),
            y(change.rows_after),
            2.0
            if dense
            else round(3 + min(3.0, math.log2(1 + len(change.added) + len(change.removed)) / 2), 2),
            _kind(change),
            commit_title(change),
            _short_label(change) if labelled else None,
        )
        for x, change in zip(xs, changes, strict=True)
    )
    return Chart(
        width,
        height,
        left,
        right,
        top,
        bottom,
        "".join(path),
        points,
        _x_ticks(start, end, left, right) if by_time else (),
        tuple(Tick(y(value), str(value)) for value in _y_values(top_value)),
        by_time,
        dense,
    )


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _kind(change: Change) -> str:
    if change.added and change.removed:
        return "both"
    return "add" if change.added else "remove"


def _short_label(change: Change) -> str:
    return f"#{change.commit.pr}" if change.commit.pr is not None else change.commit.commit[:7]


def _y_values(top_value: int) -> list[int]:
    """Whole rows at an even, round step (1, 2 or 5 times a power of ten), at most five intervals:
    every tick up to the top, none skipped (0 1 2 3 4 5, never 0 1 2 3 5)."""
    step = next(
        nice
        for power in (10**exponent for exponent in range(len(str(top_value)) + 1))
        for nice in (power, 2 * power, 5 * power)
        if top_value % nice == 0 and top_value // nice <= 5
    )
    return list(range(0, top_value + 1, step))


# Calendar steps for the time axis, finest first: the first that gives at most MAX_X_TICKS is used, so
# every label is a distinct day, month or year (never the same date twice).
X_STEPS: tuple[tuple[int, str], ...] = (
    (1, "day"), (2, "day"), (7, "day"), (14, "day"),
    (1, "month"), (2, "month"), (3, "month"), (6, "month"),
    (1, "year"), (2, "year"), (5, "year"), (10, "year"), (25, "year"), (50, "year"), (100, "year"),
)  # fmt: skip
MAX_X_TICKS = 7
_FORMATS = {"day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


def _x_ticks(start: float, end: float, left: int, right: int) -> tuple[Tick, ...]:
    """Ticks on whole days, months or years within [start, end] (UTC); the labels at the edges are
    anchored so they stay inside the chart."""
    first, last = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    moments: list[datetime] = []
    for size, unit in X_STEPS:
        moments = _calendar(first, last, size, unit)
        if len(moments) <= MAX_X_TICKS:
            ticks = []
            for moment in moments:
                at = left + (moment.timestamp() - start) / (end - start) * (right - left)
                anchor = "start" if at - left < 40 else "end" if right - at < 40 else "middle"
                ticks.append(Tick(round(at, 2), moment.strftime(_FORMATS[unit]), anchor))
            return tuple(ticks)
    return ()


def _calendar(first: datetime, last: datetime, size: int, unit: str) -> list[datetime]:
    """Every `size` days (from the first midnight), months or years (on multiples of `size`) from
    `first` to `last`."""
    if unit == "day":
        day = datetime(first.year, first.month, first.day, tzinfo=UTC)
        day += timedelta(days=1) if day < first else timedelta()
        count = int((last - day) / timedelta(days=size)) + 1 if day <= last else 0
        return [day + timedelta(days=size * index) for index in range(count)]
    months = 12 if unit == "year" else 1
    index = first.year * 12 + first.month - 1  # months since year 0
    index += -index % (size * months)
    found = []
    while (moment := datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)) <= last:
        if moment >= first:
            found.append(moment)
        index += size * months
    return found


# --- the page ----------------------------------------------------------------------------------------


def html(
    facts: Facts,
    grid: Coverage,
    states: Progress,
    history: Sequence[Change] | None,
    *,
    nodes: Sequence[NodeRow] = (),
    workloads: Sequence[Judged] | None = None,
) -> str:
    """The whole page. `history` None: there is none to show, and facts.history_note says why;
    `workloads` None: the GPU pods were not read (the page is made from manifests)."""
    newest_first = list(reversed(history or ()))
    colored = list(zip(states.counts, state_colors(states), strict=True))
    context: dict[str, Any] = {
        "shown_states": [(row, color) for row, color in colored if row.count],
        "folded_states": [(row, color) for row, color in colored if not row.count],
        "node_rows": nodes,
        "bad_nodes": sum(row.status is not Status.OK or row.held is not None for row in nodes),
        "open_nodes": OPEN_NODES,
        "fix_command": lambda tag: fix_command(facts.matrix, tag),
        "facts": facts,
        "grid": grid,
        "missing": grid.missing,
        "next_missing": grid.next_missing,
        "states": states,
        "state_colors": state_colors(states),
        "bar": state_bar(states, 960),
        "stuck": states.stuck[:MAX_STUCK],
        "history": history,
        "chart": timeline_chart(history) if history else None,
        "listed_changes": newest_first[:MAX_CHANGES_LISTED],
        "max_nodes": MAX_NODES_PER_IMAGE,
        "added_rows": sum(len(change.added) for change in history or ()),
        "removed_rows": sum(len(change.removed) for change in history or ()),
        "workloads": workloads,
        "listed_workloads": (workloads or ())[:MAX_WORKLOADS],
        "workload_counts": workload_counts(workloads or ()),
    }
    page = _environment().get_template(TEMPLATE).render(context)
    return page.encode("ascii", "xmlcharrefreplace").decode("ascii")


def workload_counts(rows: Sequence[Judged]) -> dict[str, int]:
    """GPU pods per verdict: those whose image breaks on its driver, cannot be confirmed, was not
    checked; a pod judged on two drivers (now, and at its node's move) counts under each."""
    counts = {"breaks": 0, "unknown": 0, "unchecked": 0, "ok": 0}
    for row in rows:
        counts[str(row.state) if row.state is not None else "unchecked"] += len(row.pods)
    return counts


def in_clusters(names: Sequence[str]) -> str:
    """`eu (3), us (1)`: the clusters of CLUSTER/NODE names, with how many of them each has."""
    return ", ".join(f"{cluster} ({count})" for cluster, count in cluster_names.clusters_of(names))


def fix_command(matrix: str, tag: str) -> str:
    """The command that adds a missing image's row, quoted for a shell (a tag or path from outside may
    hold anything)."""
    return f"gpudrv matrix add --matrix {shlex.quote(matrix)} --tag {shlex.quote(tag)}"


@cache
def _environment() -> Environment:
    # Imported here: the other commands do not pay for Jinja2.
    from jinja2 import Environment, PackageLoader, StrictUndefined

    environment = Environment(
        loader=PackageLoader("reconciler.render", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    environment.filters.update(
        plural=words.plural,
        count=words.count,
        verb=words.verb,
        clusters=in_clusters,
        cluster=lambda name: cluster_names.split(name)[0] or "",
        node=lambda name: cluster_names.split(name)[1],
    )
    return environment


def _finalize(value: object) -> object:
    """After autoescape's escaping: `[`, CR, LF and a leading `:` in a value as references (see the
    module's doc): a value may start a line of the page."""
    from markupsafe import Markup, escape

    if isinstance(value, Markup):
        return value
    text = str(escape(value)).replace("[", "&#91;").replace("\r", "&#13;").replace("\n", "&#10;")
    return Markup(LEADING_COLON.sub(r"\1&#58;", text, count=1))
