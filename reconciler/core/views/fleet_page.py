"""The data behind the fleet page's three pictures (`gpudrv report -o html`).

- Coverage: rows are kernel + OS, columns are driver branches; a cell says whether the image is in the
  matrix, which GPU nodes need it, and so whether it is missing (needed, not in the matrix).
- Progress: the GPU nodes by upgrade state (the GPU Operator's label), and the nodes that are stuck,
  each with the reason gpudrv gives (the BLOCKER of `gpudrv status`).
- Changes: the matrix's additions (and removals) commit by commit, with the size of the matrix after
  each, from the row lifetimes of `gpudrv matrix history`.

Plain data in, plain data out: the commands read, the renderer draws.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from reconciler.core.contract.driver_images import Want, kernel_next
from reconciler.core.images.history import CommitInfo, Lifetime
from reconciler.core.images.matrix import key_from_tag
from reconciler.core.images.tags import KERNEL, ImageKey
from reconciler.core.upgrades.upgrade import ALL_STATES, FAILURE, State

_DIGITS = re.compile(r"([0-9]+)")


def natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """A sort key that orders the numbers inside a text by value: 5.15.0-9 before 5.15.0-10. A number
    is compared by its digits without leading zeros, shorter first: int() would refuse 5,000 of them."""
    return tuple(
        (0, len(digits), digits) if part[0] in "0123456789" else (1, 0, part)
        for part in _DIGITS.split(text)
        if part
        for digits in [part.lstrip("0")]
    )


# --- coverage ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One image: in the matrix or not, and the GPU nodes that need it (with the references they pull)."""

    key: ImageKey
    in_matrix: bool
    nodes: tuple[str, ...] = ()
    images: tuple[str, ...] = ()  # full references the GPU Operator pulls (none in the lab)
    next_nodes: tuple[str, ...] = ()  # the nodes that need it once they boot their next kernel

    @property
    def missing(self) -> bool:
        return bool(self.nodes) and not self.in_matrix

    @property
    def next_missing(self) -> bool:
        """Needed only at the next reboot, and not in the matrix (NEXT-MISSING)."""
        return bool(self.next_nodes) and not self.in_matrix and not self.nodes


@dataclass(frozen=True)
class GridRow:
    os_tag: str
    kernel: str
    cells: tuple[Cell | None, ...]  # one per branch column; None: not in the matrix, no node needs it


@dataclass(frozen=True)
class Untagged:
    """A GPU node with no image at all (INVALID in the audit): it has no cell, so it is listed apart."""

    node: str
    reason: str


@dataclass(frozen=True)
class Coverage:
    branches: tuple[str, ...]
    rows: tuple[GridRow, ...]
    untagged: tuple[Untagged, ...] = ()

    @property
    def cells(self) -> tuple[Cell, ...]:
        return tuple(cell for row in self.rows for cell in row.cells if cell is not None)

    @property
    def missing(self) -> tuple[Cell, ...]:
        """The images nodes need and the matrix lacks, the one needed by most nodes first."""
        return tuple(sorted((c for c in self.cells if c.missing), key=lambda c: (-len(c.nodes), c.key)))

    @property
    def needed(self) -> int:
        return sum(bool(cell.nodes) for cell in self.cells)

    @property
    def nodes_missing(self) -> int:
        return sum(len(cell.nodes) for cell in self.missing)

    @property
    def next_missing(self) -> tuple[Cell, ...]:
        """The images nodes need at their next reboot that no node needs now and the matrix lacks."""
        cells = (c for c in self.cells if c.next_missing)
        return tuple(sorted(cells, key=lambda c: (-len(c.next_nodes), c.key)))

    @property
    def nodes_next_missing(self) -> int:
        return sum(len(cell.next_nodes) for cell in self.next_missing)


def want_key(want: Want) -> ImageKey | None:
    """The three parts of the tag a node wants. The node's own kernel label splits it (a kernel has
    hyphens, and the branch may be a full version); without one, the tag's first and last hyphens."""
    if want.tag is None:
        return None
    kernel = want.node.labels.get(KERNEL, "")
    branch, found, os_tag = want.tag.partition(f"-{kernel}-") if kernel else ("", "", "")
    if found and branch and os_tag:
        return ImageKey(branch, kernel, os_tag)
    try:
        return key_from_tag(want.tag)
    except ValueError:
        return None


def coverage(
    matrix_keys: Iterable[ImageKey], wants: Iterable[Want], next_wants: Iterable[Want] = ()
) -> Coverage:
    """The grid over every image in the matrix or needed by a GPU node, now or on its next kernel
    (`next_wants`: Wants.next_wants; one whose label gives no kernel has no cell)."""
    in_matrix = set(matrix_keys)
    needs: dict[ImageKey, list[str]] = {}
    images: dict[ImageKey, set[str]] = {}
    later: dict[ImageKey, list[str]] = {}
    for want in next_wants:
        if (key := want_key(want)) is not None:
            later.setdefault(key, []).append(want.node.name)
            if want.image:
                images.setdefault(key, set()).add(want.image)
    untagged: list[Untagged] = []
    for want in wants:
        key = want_key(want)
        if key is None:
            reason = want.reason or f"tag {want.tag!r} is not <driver-branch>-<kernel>-<os-tag>"
            untagged.append(Untagged(want.node.name, reason))
            continue
        needs.setdefault(key, []).append(want.node.name)
        if want.image:
            images.setdefault(key, set()).add(want.image)
    keys = in_matrix | set(needs) | set(later)
    branches = tuple(sorted({key.driver_branch for key in keys}, key=natural))
    column = {branch: index for index, branch in enumerate(branches)}
    grid: dict[tuple[str, str], list[Cell | None]] = {}
    for key in keys:
        cells = grid.setdefault((key.os_tag, key.kernel), [None] * len(branches))
        names = tuple(sorted(needs.get(key, ())))
        cells[column[key.driver_branch]] = Cell(
            key,
            key in in_matrix,
            names,
            tuple(sorted(images.get(key, ()))),
            tuple(sorted(later.get(key, ()))),
        )
    order = sorted(grid, key=lambda row: (natural(row[0]), natural(row[1])))
    rows = tuple(GridRow(os_tag, kernel, tuple(grid[(os_tag, kernel)])) for os_tag, kernel in order)
    return Coverage(branches, rows, tuple(sorted(untagged, key=lambda item: item.node)))


# --- progress ----------------------------------------------------------------------------------------


class Phase(StrEnum):
    NOT_STARTED = "not-started"
    IN_PROGRESS = "in-progress"
    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"  # a label value that is no GPU Operator state


NO_STATE = "(no upgrade state)"


@dataclass(frozen=True)
class NodeState:
    """A GPU node's upgrade-state label (None: no label) and what gpudrv says holds it, if anything."""

    name: str
    state: str | None
    reason: str | None = None


@dataclass(frozen=True)
class StateCount:
    label: str  # the label value, or NO_STATE
    phase: Phase
    count: int


@dataclass(frozen=True)
class Stuck:
    node: str
    state: str  # the label value, or NO_STATE
    reason: str


@dataclass(frozen=True)
class Progress:
    total: int
    counts: tuple[StateCount, ...]  # every GPU Operator state in its order (zeros too), then unknown values
    stuck: tuple[Stuck, ...]
    nodes: tuple[NodeState, ...] = ()

    @property
    def present(self) -> tuple[StateCount, ...]:
        """The states some node is at."""
        return tuple(row for row in self.counts if row.count)

    @property
    def absent(self) -> tuple[StateCount, ...]:
        """The states no node is at (the page folds them away)."""
        return tuple(row for row in self.counts if not row.count)


def phase_of(state: str | None) -> Phase:
    if state is None:
        return Phase.NOT_STARTED
    if state == State.DONE:
        return Phase.DONE
    if state == State.FAILED:
        return Phase.FAILED
    return Phase.IN_PROGRESS if state in set(State) else Phase.UNKNOWN


def progress(nodes: Iterable[NodeState]) -> Progress:
    """Counts per state, and the stuck nodes: a failed upgrade, an unknown state, or a node that gpudrv
    says something holds (a recorded failure, a budget refusing its drain)."""
    counts: dict[str | None, int] = {}
    stuck: list[Stuck] = []
    seen: list[NodeState] = []
    total = 0
    for node in nodes:
        total += 1
        seen.append(node)
        counts[node.state] = counts.get(node.state, 0) + 1
        if reason := _stuck_reason(node):
            stuck.append(Stuck(node.name, node.state or NO_STATE, reason))
    known: list[str | None] = [None, *ALL_STATES]
    unknown = sorted((state for state in counts if state not in known and state is not None), key=natural)
    rows = [
        StateCount(NO_STATE if state is None else str(state), phase_of(state), counts.get(state, 0))
        for state in (*known, *unknown)
    ]
    return Progress(
        total, tuple(rows), tuple(sorted(stuck, key=lambda item: natural(item.node))), tuple(seen)
    )


def _stuck_reason(node: NodeState) -> str | None:
    phase = phase_of(node.state)
    if node.reason:
        return node.reason
    if phase is Phase.FAILED:
        return f"upgrade-failed, and no reason recorded (annotation {FAILURE})"
    if phase is Phase.UNKNOWN:
        return f"upgrade state {node.state!r} is not one of the GPU Operator's states"
    return None


def reasons_by_node(annotations: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The recorded upgrade failures (offline, that is all gpudrv can say holds a node)."""
    return {name: reason for name, notes in annotations.items() if (reason := notes.get(FAILURE))}


# --- every node ----------------------------------------------------------------------------------------


class Status(StrEnum):
    OK = "OK"
    MISSING = "MISSING"
    INVALID = "INVALID"  # no tag: the labels or the driver contract give none
    NEXT_MISSING = "NEXT-MISSING"  # its image is there, not the one of the kernel it boots next


@dataclass(frozen=True)
class NodeRow:
    """One GPU node on the page: the image it needs, whether the matrix has it, where its upgrade is."""

    node: str
    tag: str | None
    image: str | None  # the GPU Operator's full reference (None in the lab)
    status: Status
    reason: str | None  # INVALID: why there is no tag
    state: str | None  # the upgrade-state label
    held: str | None  # what gpudrv says holds it (a stuck node's reason)
    next_kernel: str | None = None  # the kernel it boots next, when that is not the running one
    next_tag: str | None = None  # the image it needs there
    next_in_matrix: bool = True


def node_rows(
    wants: Iterable[Want], matrix_tags: frozenset[str], states: Progress, next_wants: Iterable[Want] = ()
) -> tuple[NodeRow, ...]:
    """Every GPU node, in natural name order (node-9 before node-10); a node whose image is in the
    matrix but not its next kernel's is NEXT-MISSING."""
    held = {item.node: item.reason for item in states.stuck}
    label = {item.name: item.state for item in states.nodes}
    later = {want.node.name: want for want in next_wants if kernel_next(want) and want.tag}
    rows = []
    for want in wants:
        status = (
            Status.INVALID if want.tag is None else Status.OK if want.tag in matrix_tags else Status.MISSING
        )
        upcoming = later.get(want.node.name)
        next_in = upcoming is None or upcoming.tag in matrix_tags
        row = NodeRow(
            want.node.name,
            want.tag,
            want.image,
            Status.NEXT_MISSING if status is Status.OK and not next_in else status,
            want.reason if want.tag is None else None,
            label.get(want.node.name),
            held.get(want.node.name),
            kernel_next(upcoming) if upcoming else None,
            upcoming.tag if upcoming else None,
            next_in,
        )
        rows.append(row)
    return tuple(sorted(rows, key=lambda row: natural(row.node)))


# --- changes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One commit that changed the matrix: the rows it added and removed, and the matrix's size after."""

    commit: CommitInfo
    added: tuple[ImageKey, ...]
    removed: tuple[ImageKey, ...]
    rows_after: int

    @property
    def when(self) -> datetime | None:
        return parse_date(self.commit.date)


def parse_date(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def changes(lifetimes: Sequence[Lifetime]) -> tuple[Change, ...]:
    """The commits that added or removed rows, oldest first (by the date they landed; the history's
    order breaks ties and orders commits whose date cannot be read)."""
    order: dict[str, int] = {}
    info: dict[str, CommitInfo] = {}
    added: dict[str, list[ImageKey]] = {}
    removed: dict[str, list[ImageKey]] = {}
    events: list[tuple[CommitInfo | None, dict[str, list[ImageKey]], ImageKey]] = []
    for life in lifetimes:
        events += [(life.added, added, life.key), (life.removed, removed, life.key)]
    for commit, bucket, key in events:
        if commit is not None:
            order.setdefault(commit.commit, len(order))
            info[commit.commit] = commit
            bucket.setdefault(commit.commit, []).append(key)

    def when(commit: str) -> tuple[float, int]:
        moment = parse_date(info[commit].date)
        if moment is None:
            return (float("-inf"), order[commit])
        return ((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp(), order[commit])

    result: list[Change] = []
    size = 0
    for sha in sorted(order, key=when):
        plus, minus = tuple(added.get(sha, ())), tuple(removed.get(sha, ()))
        size += len(plus) - len(minus)
        result.append(Change(info[sha], plus, minus, size))
    return tuple(result)
