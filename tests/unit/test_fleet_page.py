"""The fleet page's data (core/views/fleet_page.py), the geometry of its pictures and the page itself
(render/fleet_page.py): what each picture shows, and that no value from outside escapes as markup."""

from __future__ import annotations

import io
import itertools
import re
from datetime import UTC, datetime

import pytest

from reconciler.adapters.ci.actions_guard import Guard
from reconciler.core.contract.driver_images import Want
from reconciler.core.cuda.cuda_gate import State
from reconciler.core.cuda.cuda_workloads import NOW, Judged
from reconciler.core.images.history import CommitInfo, Lifetime
from reconciler.core.images.tags import KERNEL, ImageKey, Node
from reconciler.core.upgrades import upgrade
from reconciler.core.views import fleet_page as data
from reconciler.core.views.fleet_page import NO_STATE, Change, NodeState, Phase
from reconciler.render import fleet_page as page

K1 = ImageKey("550", "5.15.0-119-generic", "ubuntu22.04")
K2 = ImageKey("535", "5.15.0-119-generic", "ubuntu22.04")
K3 = ImageKey("550", "6.8.0-45-generic", "ubuntu24.04")
K4 = ImageKey("570", "6.8.0-45-generic", "ubuntu24.04")


def want(name: str, key: ImageKey | None, reason: str | None = None, image: str | None = None) -> Want:
    labels = {KERNEL: key.kernel} if key else {}
    return Want(Node(name, labels), tag=key.tag if key else None, reason=reason, image=image)


def commit(sha: str, day: int, author: str = "Ann", pr: int | None = None) -> CommitInfo:
    return CommitInfo(sha * 40, author, f"2026-03-{day:02d}T10:00:00+00:00", pr)


# --- coverage ----------------------------------------------------------------------------------------


def test_natural_order_reads_numbers_by_value() -> None:
    kernels = ["5.15.0-119-generic", "5.15.0-9-generic", "5.15.0-107-generic", "6.8.0-45-generic"]
    assert sorted(kernels, key=data.natural) == [
        "5.15.0-9-generic",
        "5.15.0-107-generic",
        "5.15.0-119-generic",
        "6.8.0-45-generic",
    ]
    assert sorted(["570", "1000", "535"], key=data.natural) == ["535", "570", "1000"]


def test_want_key_splits_at_the_nodes_own_kernel() -> None:
    assert data.want_key(want("a", K1)) == K1
    # A full driver version as the branch (an operator resource's version) and a hyphenated os tag.
    node = Node("b", {KERNEL: "5.15.0-119-generic"})
    assert data.want_key(Want(node, tag="550.90.07-5.15.0-119-generic-my-os1")) == ImageKey(
        "550.90.07", "5.15.0-119-generic", "my-os1"
    )
    # No kernel label: the tag's first and last hyphens.
    assert data.want_key(Want(Node("c"), tag=K1.tag)) == K1
    assert data.want_key(Want(Node("d"), tag="nohyphens")) is None
    assert data.want_key(Want(Node("e"), reason="label missing")) is None


def test_coverage_grid_rows_columns_and_cells() -> None:
    wants = [
        want("n1", K1, image="nvcr.io/nvidia/driver:" + K1.tag),
        want("n2", K1),
        want("n3", K4),
        want("n4", None, reason="label feature.node.kubernetes.io/kernel-version.full is missing"),
    ]
    grid = data.coverage([K1, K2, K3], wants)
    assert grid.branches == ("535", "550", "570")
    assert [(row.os_tag, row.kernel) for row in grid.rows] == [
        ("ubuntu22.04", "5.15.0-119-generic"),
        ("ubuntu24.04", "6.8.0-45-generic"),
    ]
    ubuntu22, ubuntu24 = grid.rows
    spare, needed, empty = ubuntu22.cells
    assert spare is not None and (spare.in_matrix, spare.nodes, spare.missing) == (True, (), False)
    assert needed is not None and (needed.in_matrix, needed.nodes, needed.missing) == (
        True,
        ("n1", "n2"),
        False,
    )
    assert needed.images == ("nvcr.io/nvidia/driver:" + K1.tag,)
    assert empty is None
    assert ubuntu24.cells[0] is None
    missing = ubuntu24.cells[2]
    assert missing is not None and (missing.key, missing.in_matrix, missing.nodes) == (K4, False, ("n3",))
    assert missing.missing
    assert grid.missing == (missing,)
    assert (grid.needed, grid.nodes_missing) == (2, 1)
    assert grid.untagged == (
        data.Untagged("n4", "label feature.node.kubernetes.io/kernel-version.full is missing"),
    )


def test_missing_images_most_needed_first() -> None:
    grid = data.coverage([], [want("a", K1), want("b", K3), want("c", K3)])
    assert [cell.key for cell in grid.missing] == [K3, K1]
    assert grid.nodes_missing == 3


def test_empty_coverage() -> None:
    grid = data.coverage([], [])
    assert (grid.branches, grid.rows, grid.missing, grid.needed) == ((), (), (), 0)


# --- progress ----------------------------------------------------------------------------------------


def test_progress_counts_every_state_in_order_and_unknown_values_last() -> None:
    states = data.progress(
        [
            NodeState("a", None),
            NodeState("b", "upgrade-done"),
            NodeState("c", "upgrade-done"),
            NodeState("d", "drain-required"),
            NodeState("e", "zz-custom"),
        ]
    )
    assert states.total == 5
    labels = [row.label for row in states.counts]
    assert labels[0] == NO_STATE
    assert labels[1:13] == [str(state) for state in upgrade.ALL_STATES]  # pinned in test_upgrade.py
    assert labels[13:] == ["zz-custom"]
    counts = {row.label: (row.count, row.phase) for row in states.counts}
    assert counts[NO_STATE] == (1, Phase.NOT_STARTED)
    assert counts["upgrade-done"] == (2, Phase.DONE)
    assert counts["drain-required"] == (1, Phase.IN_PROGRESS)
    assert counts["upgrade-failed"] == (0, Phase.FAILED)
    assert counts["zz-custom"] == (1, Phase.UNKNOWN)


def test_stuck_nodes_and_their_reasons() -> None:
    states = data.progress(
        [
            NodeState("node-10", "upgrade-failed", "drain-required: timed out after 5m"),
            NodeState("node-9", "upgrade-failed"),
            NodeState("node-3", "drain-required", "PDB ns/pdb allows 0 disruptions"),
            NodeState("node-4", "drain-required"),  # in progress, nothing holds it: not stuck
            NodeState("node-5", "paused"),
            NodeState("node-6", None),
        ]
    )
    assert [(item.node, item.state) for item in states.stuck] == [
        ("node-3", "drain-required"),
        ("node-5", "paused"),
        ("node-9", "upgrade-failed"),
        ("node-10", "upgrade-failed"),
    ]
    reasons = {item.node: item.reason for item in states.stuck}
    assert reasons["node-10"] == "drain-required: timed out after 5m"
    assert (
        reasons["node-9"] == "upgrade-failed, and no reason recorded (annotation gpudrv.dev/upgrade-failure)"
    )
    assert reasons["node-3"] == "PDB ns/pdb allows 0 disruptions"
    assert reasons["node-5"] == "upgrade state 'paused' is not one of the GPU Operator's states"


def test_offline_reasons_are_the_recorded_failures() -> None:
    notes = {"a": {"gpudrv.dev/upgrade-failure": "cordon: forbidden"}, "b": {"other": "x"}, "c": {}}
    assert data.reasons_by_node(notes) == {"a": "cordon: forbidden"}


# --- changes -----------------------------------------------------------------------------------------


def test_changes_per_commit_with_the_size_after_each() -> None:
    c1, c2, c3 = commit("a", 1, "Ann", 3), commit("b", 2, "Bo", None), commit("c", 5, "Cy", 9)
    lifetimes = [
        Lifetime(K1, c1),
        Lifetime(K2, c1, removed=c3),
        Lifetime(K3, c2),
        Lifetime(K4, c3),
    ]
    found = data.changes(lifetimes)
    assert [change.commit for change in found] == [c1, c2, c3]
    assert [(change.added, change.removed, change.rows_after) for change in found] == [
        ((K1, K2), (), 2),
        ((K3,), (), 3),
        ((K4,), (K2,), 3),
    ]
    assert found[0].when == datetime(2026, 3, 1, 10, tzinfo=UTC)


def test_changes_in_date_order_and_unreadable_dates_first() -> None:
    late, early = commit("a", 9), commit("b", 2)
    odd = CommitInfo("c" * 40, "Ann", "yesterday", None)
    found = data.changes([Lifetime(K1, late), Lifetime(K2, early), Lifetime(K3, odd)])
    assert [change.commit for change in found] == [odd, early, late]
    assert [change.rows_after for change in found] == [1, 2, 3]
    assert data.changes([]) == ()


# --- the pictures' geometry --------------------------------------------------------------------------


def test_state_bar_segments_share_the_width() -> None:
    states = data.progress([NodeState(str(i), None) for i in range(3)] + [NodeState("d", "upgrade-done")])
    bar = page.state_bar(states, 800)
    assert [(seg.label, seg.count, seg.x, seg.width) for seg in bar] == [
        (NO_STATE, 3, 0.0, 600.0),
        ("upgrade-done", 1, 600.0, 200.0),
    ]
    assert [seg.color for seg in bar] == [page.PHASE_COLORS[Phase.NOT_STARTED], page.PHASE_COLORS[Phase.DONE]]
    assert page.state_bar(data.progress([]), 800) == []


def test_in_progress_states_get_a_color_each() -> None:
    colors = page.state_colors(data.progress([]))
    assert len(colors) == 13  # no state, the ten in progress, done, failed
    assert len(set(colors[1:11])) == 10


@pytest.mark.parametrize(
    ("value", "top"), [(0, 1), (1, 1), (3, 5), (14, 20), (20, 20), (999, 1000), (1001, 2000)]
)
def test_nice_ceiling(value: int, top: int) -> None:
    assert page.nice_ceiling(value) == top


def test_history_chart_by_time() -> None:
    found = data.changes([Lifetime(K1, commit("a", 1, pr=3)), Lifetime(K2, commit("b", 11, pr=None))])
    chart = page.timeline_chart(found, width=960, height=280)
    first, second = chart.points
    assert (first.x, second.x) == (chart.left, chart.right)
    assert chart.by_time
    assert second.y == chart.top + (chart.bottom - chart.top) * 0  # 2 rows of 2: the top
    assert first.y == pytest.approx(chart.bottom - (chart.bottom - chart.top) / 2)
    assert chart.path.startswith(f"M{chart.left},{chart.bottom}")
    assert (first.label, second.label) == ("#3", "b" * 7)
    # Whole days, every second one, inside the ten days from 03-01 10:00 to 03-11 10:00.
    assert [tick.text for tick in chart.x_ticks] == [f"2026-03-{day:02d}" for day in (2, 4, 6, 8, 10)]
    day = (chart.right - chart.left) / 10
    assert chart.x_ticks[0].at == pytest.approx(chart.left + day * 14 / 24, abs=0.01)
    assert [tick.text for tick in chart.y_ticks] == ["0", "1", "2"]
    assert "Ann" in first.title and "PR #3" in first.title and f"+{K1.tag}" in first.title


def test_history_chart_one_commit_is_centred_and_many_are_not_labelled() -> None:
    chart = page.timeline_chart(data.changes([Lifetime(K1, commit("a", 1))]))
    assert chart.points[0].x == pytest.approx((chart.left + chart.right) / 2)
    many = [
        Lifetime(
            ImageKey("550", f"5.15.0-{i}-generic", "ubuntu22.04"),
            CommitInfo(f"{i:040x}", "Ann", f"2026-03-{1 + i:02d}", None),
        )
        for i in range(page.MAX_LABELLED_POINTS + 1)
    ]
    crowded = page.timeline_chart(data.changes(many))
    assert all(point.label is None for point in crowded.points)
    assert not crowded.dense
    lots = [
        Lifetime(
            ImageKey("550", f"5.15.0-{i}-generic", "ubuntu22.04"),
            CommitInfo(f"{i:040x}", "A", "2026-03-01", 1),
        )
        for i in range(page.DENSE_POINTS + 1)
    ]
    dense = page.timeline_chart(data.changes(lots))
    assert dense.dense and {point.radius for point in dense.points} == {2.0}


def test_history_chart_without_readable_dates_spaces_commits_evenly() -> None:
    odd = [CommitInfo(c * 40, "Ann", "not a date", None) for c in "abc"]
    chart = page.timeline_chart(
        data.changes([Lifetime(k, c) for k, c in zip((K1, K2, K3), odd, strict=True)])
    )
    assert not chart.by_time
    assert [point.x for point in chart.points] == [chart.left, (chart.left + chart.right) / 2, chart.right]
    assert chart.x_ticks == ()


# --- the page ----------------------------------------------------------------------------------------

HOSTILE = "<script>alert(1)</script>\"'&"


def facts(**overrides: object) -> page.Facts:
    values: dict[str, object] = {
        "generated": datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        "source": "manifests under clusters/lab",
        "matrix": "matrix/support-matrix.csv",
        "matrix_rows": 3,
        "mode": "lab",
        "version": "0.1.0",
        "commit": "f" * 40,
    }
    return page.Facts(**(values | overrides))  # type: ignore[arg-type]


def hostile_page() -> str:
    node = f"node-{HOSTILE}"
    wants = [want(node, K1), want("ok", K2), want(f"bad-{HOSTILE}", None, reason=f"label {HOSTILE}")]
    grid = data.coverage([K2], wants)
    states = data.progress(
        [NodeState(node, "upgrade-failed", f"x\n::warning::gotcha {HOSTILE} ##[error]y\r")]
    )
    history = data.changes([Lifetime(K2, CommitInfo("a" * 40, f"Eve {HOSTILE} ##[group]", "2026-03-01", 7))])
    return page.html(
        facts(
            source=f"cluster {HOSTILE}",
            notes=(f"note {HOSTILE}", f" ::warning::{HOSTILE}"),
            commit_note=HOSTILE,
        ),
        grid,
        states,
        history,
        nodes=data.node_rows(wants, frozenset({K2.tag}), states),
        workloads=(
            Judged(
                f"reg/{HOSTILE}:1",
                f"5{HOSTILE}",
                f"driver {HOSTILE}",
                State.BREAKS,
                f"needs ::error::{HOSTILE} ##[group]",
                (node,),
                (f"ml/{HOSTILE}",),
            ),
        ),
    )


def test_values_from_outside_are_text_never_markup() -> None:
    html = hostile_page()
    assert "<script" not in html
    assert "alert(1)" in html  # there, as text
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;") >= 14


def test_the_page_is_self_contained() -> None:
    html = hostile_page()
    for reference in ("src=", "href=", "url(", "@import", "<script", "<link", "<iframe", "<object"):
        assert reference not in html.lower(), reference
    assert "http://" not in html and "https://" not in html
    assert "default-src 'none'" in html  # and the browser would refuse to fetch anything anyway


def test_the_page_is_ascii_and_passes_the_actions_guard_unchanged() -> None:
    html = hostile_page()
    assert html.isascii()
    assert "##[" not in html
    assert not any(line.lstrip().startswith("::") for line in html.splitlines())
    sink = io.StringIO()
    guard = Guard(sink)
    guard.write(html)
    guard.flush()
    assert sink.getvalue() == html


def test_a_value_that_starts_with_a_colon_cannot_start_a_command() -> None:
    # A value may start a line of the page: its first visible colon is a reference, its [ too.
    assert str(page._finalize(" \u200b::warning::x ##[y")) == " \u200b&#58;:warning::x ##&#91;y"
    assert str(page._finalize("a::b")) == "a::b"


def test_page_shows_the_grid_the_states_and_the_history() -> None:
    html = page.html(
        facts(commit_note="the work tree has uncommitted changes"),
        data.coverage([K1, K2], [want("n1", K1), want("n2", K3)]),
        data.progress([NodeState("n1", "upgrade-done"), NodeState("n2", "upgrade-failed", "why")]),
        data.changes([Lifetime(K1, commit("a", 1, "Ann", 3)), Lifetime(K2, commit("b", 4, "Bo", 8))]),
    )
    assert len(re.findall(r'<td class="c (?:ok|spare|miss)"', html)) == 3
    assert re.search(rf'<td class="c miss" data-tag="{K3.tag}"[^>]*>MISSING <small>1</small>', html)
    assert "f" * 40 in html and "the work tree has uncommitted changes" in html
    assert '<time datetime="2026-03-01T12:00:00+00:00">2026-03-01 12:00:00 UTC</time>' in html
    assert "<td>n2</td><td><code>upgrade-failed</code></td><td>why</td>" in html
    assert html.count("<circle ") == 2
    assert "<td>Bo</td>" in html and "#8" in html


def test_page_without_history_says_why() -> None:
    note = "matrix/support-matrix.csv: not inside a git repository"
    html = page.html(facts(history_note=note, commit=None), data.coverage([], []), data.progress([]), None)
    assert f'<p class="notice" id="history-unavailable">No matrix history on this page: {note}</p>' in html
    assert "<circle" not in html
    assert "No GPU nodes." in html
    empty = page.html(facts(), data.coverage([], []), data.progress([]), ())
    assert "No commit has changed" in empty


def test_long_lists_are_cut_and_say_so() -> None:
    stuck = [NodeState(f"n{i}", "upgrade-failed") for i in range(page.MAX_STUCK + 3)]
    lifetimes = [
        Lifetime(ImageKey("550", f"5.15.0-{i}-generic", "ubuntu22.04"), commit(f"{i % 16:x}", 1 + i % 28))
        for i in range(16)
    ]
    lifetimes = [
        Lifetime(life.key, CommitInfo(f"{i:040x}", "Ann", life.added.date, None))
        for i, life in enumerate(lifetimes * 4)
    ]
    html = page.html(facts(), data.coverage([], []), data.progress(stuck), data.changes(lifetimes))
    assert "and 3 more: <code>gpudrv status</code> lists every node." in html
    assert f"({page.MAX_CHANGES_LISTED} of 64; <code>gpudrv matrix history</code> has them all)" in html


def test_change_dataclass_when_is_none_for_unreadable_dates() -> None:
    assert Change(CommitInfo("a", "b", "soon", None), (), (), 0).when is None


# --- the axes, the plurals, the folded states, the node table ----------------------------------------


@pytest.mark.parametrize("top", [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 20000, 5 * 10**6])
def test_y_ticks_are_every_step_up_to_the_top_none_skipped(top: int) -> None:
    values = page._y_values(top)
    steps = {b - a for a, b in itertools.pairwise(values)}
    assert (values[0], values[-1], len(steps)) == (0, top, 1)  # one even step, from 0 to the top
    assert 2 <= len(values) <= 6
    assert str(steps.pop()).lstrip("125").strip("0") == ""  # 1, 2 or 5 times a power of ten


@pytest.mark.parametrize(
    "hours", [0, 5, 30, 24 * 3, 24 * 9, 24 * 40, 24 * 100, 24 * 400, 24 * 3000, 24 * 40000]
)
def test_x_ticks_are_distinct_calendar_dates_inside_the_chart(hours: int) -> None:
    start = datetime(2026, 3, 1, 10, tzinfo=UTC).timestamp()
    end = start + hours * 3600
    if end - start < 86400:  # as timeline_chart widens it
        start, end = start - 43200, end + 43200
    ticks = page._x_ticks(start, end, 56, 936)
    texts = [tick.text for tick in ticks]
    assert 1 <= len(ticks) <= page.MAX_X_TICKS, texts
    assert len(set(texts)) == len(texts), texts  # no date twice
    assert [tick.at for tick in ticks] == sorted(tick.at for tick in ticks)
    assert all(56 <= tick.at <= 936 for tick in ticks)


def test_one_of_a_thing_is_not_plural() -> None:
    one = page.html(
        facts(matrix_rows=1),
        data.coverage([K2], [want("n1", K1), want("n2", None, reason="no kernel")]),
        data.progress([NodeState("n1", "upgrade-failed")]),
        data.changes([Lifetime(K2, commit("a", 1))]),
    )
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", one))
    phrases = [
        "1 GPU node ",
        "1 image needed",
        "(1 node)",
        "1 node without",
        "1 stuck upgrade ",
        "1 matrix row ",
    ]
    for phrase in [*phrases, "(1 row added in 1 commit)"]:
        assert phrase in text, phrase
    assert "MISSING from the matrix; 1 node needs it" in one and "upgrade-failed: 1 node<" in one
    assert "node(s)" not in one and "1 nodes" not in one and "1 commits" not in one


def test_states_with_no_node_are_folded_away() -> None:
    states = data.progress(
        [NodeState("a", "upgrade-done"), NodeState("b", "upgrade-done"), NodeState("c", None)]
    )
    html = page.html(facts(), data.coverage([], []), states, ())
    shown = html[html.index('<ul class="states" id="states">') : html.index("</ul>")]
    assert re.findall(r"</span>([^<]+) <b>(\d+)</b>", shown) == [(NO_STATE, "1"), ("upgrade-done", "2")]
    folded = html[html.index('<details id="empty-states">') :]
    assert f"{len(states.counts) - 2} other states with no node" in folded
    assert "upgrade-required <b>0</b>" in folded


def test_the_node_table_has_every_node_and_says_what_is_wrong() -> None:
    wants = [want("n10", K1), want("n9", K2), want("n2", None, reason="no kernel label")]
    states = data.progress([NodeState("n10", "upgrade-failed", "budget says no"), NodeState("n9", None)])
    rows = data.node_rows(wants, frozenset({K2.tag}), states)
    assert [(row.node, row.status, row.state, row.held) for row in rows] == [
        ("n2", data.Status.INVALID, None, None),
        ("n9", data.Status.OK, None, None),
        ("n10", data.Status.MISSING, "upgrade-failed", "budget says no"),
    ]
    html = page.html(facts(), data.coverage([K2], wants), states, (), nodes=rows)
    table = html[
        html.index('<details id="node-table" open>') : html.index("</details>", html.index("node-table"))
    ]
    assert "3 GPU nodes, 2 problems" in table
    assert re.findall(r'<tr class="([a-z ]+)"><td class="nowrap">([^<]+)</td>', table) == [
        ("invalid", "n2"),
        ("ok", "n9"),
        ("missing held", "n10"),
    ]
    assert "none: no kernel label" in table and '<b class="bad">MISSING</b>' in table


def test_the_fix_command_is_beside_each_missing_image_and_quoted() -> None:
    odd = ImageKey("550", "5.15.0-1 generic;rm", "ubuntu22.04")
    html = page.html(
        facts(matrix="my matrix.csv"), data.coverage([], [want("n", odd)]), data.progress([]), ()
    )
    expected = page.fix_command("my matrix.csv", odd.tag)
    assert (
        expected == "gpudrv matrix add --matrix 'my matrix.csv' --tag '550-5.15.0-1 generic;rm-ubuntu22.04'"
    )
    assert f'<code class="fix">{expected.replace(chr(39), "&#39;")}</code>' in html


# --- the CUDA workloads ------------------------------------------------------------------------------


def judged(state: State | None, when: str = NOW, pods: tuple[str, ...] = ("ml/a",)) -> Judged:
    return Judged(
        "reg/cuda:12.8", when, "driver 535 (CUDA 12.2, data/driver-cuda.json)", state, "why", ("n1",), pods
    )


def test_the_workloads_section_counts_pods_per_verdict_and_lists_what_breaks_first() -> None:
    rows = (
        judged(State.BREAKS, "535", ("ml/a", "ml/b")),
        judged(None),
        judged(State.OK, pods=("ml/a", "ml/b", "ml/c")),
    )
    html = page.html(facts(), data.coverage([], []), data.progress([]), (), workloads=rows)
    section = html[html.index('<section id="workloads">') : html.index('<section id="nodes">')]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section))
    assert "2 GPU pods whose image breaks on the driver" in text
    assert "0 that gpudrv cannot confirm" in text and "1 not checked" in text and "3 accepted" in text
    assert 'class="tile bad" id="workloads-breaking"' in section
    first = section.index("BREAKS")
    assert first < section.index("not checked</td>") < section.index(">ok</td>")
    assert "after the move to 535 : driver 535" in text and "now: driver 535" in text


def test_the_workloads_section_without_pods_and_from_manifests() -> None:
    empty = page.html(facts(), data.coverage([], []), data.progress([]), (), workloads=())
    assert "No GPU pod runs on these nodes." in empty
    assert 'class="tile" id="workloads-breaking"' in empty
    offline = page.html(facts(), data.coverage([], []), data.progress([]), ())
    assert "The GPU pods are read from the live cluster only" in offline
    assert "workloads-breaking" not in offline


def test_the_workloads_table_is_cut_with_a_count() -> None:
    rows = tuple(judged(State.OK, pods=(f"ml/p{i}",)) for i in range(page.MAX_WORKLOADS + 5))
    html = page.html(facts(), data.coverage([], []), data.progress([]), (), workloads=rows)
    assert html.count('<td class="mono">reg/cuda:12.8</td>') == page.MAX_WORKLOADS
    assert "and 5 more rows:" in html
