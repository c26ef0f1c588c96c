"""The fleet page in a real browser: headless Chromium opens `gpudrv report -o html`'s file at desktop
width, and the test looks at it as a person would: the grid's cells are there, the missing images are
marked (red in the screenshot's pixels, MISSING in the text, on top at their place), nothing is
fetched, the console stays empty, markup in a value shows as text, and it prints."""

from __future__ import annotations

import base64
import itertools
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, demo, png

WIDTH, HEIGHT = 1400, 1000
MISSING_RED = (198, 40, 40)  # #c62828, the missing cell's background

LOOK = """
(() => {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {x: r.x, y: r.y, w: r.width, h: r.height};
  };
  const seen = (el) => {
    const r = el.getBoundingClientRect();
    const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    return top !== null && (top === el || el.contains(top));
  };
  const cell = (td) => ({
    tag: td.dataset.tag, kind: td.className, text: td.innerText.trim(), box: box(td), onTop: seen(td),
    background: getComputedStyle(td).backgroundColor, color: getComputedStyle(td).color,
  });
  return {
    title: document.title,
    columns: [...document.querySelectorAll('#grid thead th')].map((th) => th.innerText.trim()),
    rows: document.querySelectorAll('#grid tbody tr').length,
    cells: [...document.querySelectorAll('#grid td.c')].map(cell),
    emptyCells: document.querySelectorAll('#grid td:not(.c)').length,
    tiles: [...document.querySelectorAll('.tile')].map((t) => t.innerText.replace(/\\s+/g, ' ').trim()),
    stuck: [...document.querySelectorAll('#stuck + table tbody tr')].map((tr) => tr.innerText.split('\\t')),
    points: document.querySelectorAll('#history-chart circle').length,
    bar: [...document.querySelectorAll('#state-bar rect')].map((r) => r.getBBox().width),
    images: document.querySelectorAll('img, script, iframe, object, embed, link').length,
    nodeRows: [...document.querySelectorAll('#node-table tbody tr')].map((tr) => ({
      cells: [...tr.querySelectorAll('td')].map((td) => td.innerText.trim()), kind: tr.className,
    })),
    nodeSummary: document.querySelector('#node-table summary').innerText.trim(),
    fixes: [...document.querySelectorAll('#missing-images tbody tr')].map((tr) => ({
      tag: tr.querySelector('td code').innerText.trim(), fix: tr.querySelector('code.fix').innerText.trim(),
    })),
    states: [...document.querySelectorAll('#states li')].map((li) => li.innerText.trim()),
    foldedStates: [...document.querySelectorAll('#empty-states li')].map((li) => ({
      text: li.textContent.trim(), shown: li.checkVisibility(),
    })),
    xTicks: [...document.querySelectorAll('#history-chart text')].filter((t) => t.getAttribute('y') > 250)
      .map((t) => ({text: t.textContent, box: box(t)})),
    yTicks: [...document.querySelectorAll('#history-chart text[text-anchor="end"]')]
      .filter((t) => t.getAttribute('y') <= 250).map((t) => t.textContent),
    text: document.body.innerText,
    scrollWidth: document.documentElement.scrollWidth,
  };
})()
"""


@pytest.fixture(scope="module")
def fleet_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet-page")
    page = out / "fleet.html"
    page.write_text(demo.render(demo.build(out / "repo")))
    return page


@pytest.fixture(scope="module")
def seen(fleet_page: Path, browser_binary: str) -> dict[str, Any]:
    """Everything the test looks at, from one browser session."""
    with chromium.launch(WIDTH, HEIGHT) as browser:
        browser.open(fleet_page.as_uri())
        found: dict[str, Any] = browser.evaluate(LOOK)
        found["screenshot"] = browser.screenshot(fleet_page.with_name("fleet.png"))
        found["clips"] = {
            cell["tag"]: browser.clip(cell["box"]["x"], cell["box"]["y"], cell["box"]["w"], cell["box"]["h"])
            for cell in found["cells"]
            if cell["kind"] in ("c miss", "c ok")
        }
        found["pdf"] = base64.b64decode(browser.send("Page.printToPDF", {"landscape": True})["data"])
        found["console"] = browser.console()
        found["requests"] = browser.requests()
    return found


def red_share(clip: bytes) -> float:
    """The share of a clip's pixels that are the missing cell's red (within a small tolerance)."""
    _width, _height, rgb = png.pixels(clip)
    close = sum(all(abs(a - b) <= 24 for a, b in zip(pixel, MISSING_RED, strict=True)) for pixel in rgb)
    return close / len(rgb)


def test_the_grid_is_all_there(seen: dict[str, Any]) -> None:
    assert seen["columns"] == ["OS", "Kernel", "535", "550", "570"]
    assert seen["rows"] == 7
    kinds = [cell["kind"] for cell in seen["cells"]]
    assert (kinds.count("c ok"), kinds.count("c spare"), kinds.count("c miss")) == (8, 6, 2)
    assert seen["emptyCells"] == 7 * 3 - 16
    ok = next(cell for cell in seen["cells"] if cell["tag"] == "550-5.15.0-119-generic-ubuntu22.04")
    assert ok["text"] == "\u2713 8"


def test_the_missing_images_are_visibly_marked(seen: dict[str, Any]) -> None:
    missing = {cell["tag"]: cell for cell in seen["cells"] if cell["kind"] == "c miss"}
    assert set(missing) == set(demo.MISSING)
    for tag, cell in missing.items():
        assert cell["text"].split() == ["MISSING", "3" if tag.startswith("570") else "1"]
        assert cell["background"] == "rgb(198, 40, 40)" and cell["color"] == "rgb(255, 255, 255)"
        assert cell["onTop"], f"{tag}: something covers the cell"
        assert cell["box"]["w"] >= 80 and cell["box"]["h"] >= 18
        assert cell["box"]["y"] >= 0 and cell["box"]["y"] + cell["box"]["h"] <= HEIGHT, (
            "below the first screen"
        )
        # In the screenshot itself: most of the cell is red (the rest: its hatching and white text).
        assert red_share(seen["clips"][tag]) > 0.5
    for tag, clip in seen["clips"].items():
        if tag not in missing:
            assert red_share(clip) == 0, f"{tag} is not missing but shows red"
    assert "2 missing from the matrix (4 nodes)" in seen["tiles"]


def test_upgrades_and_history_are_drawn(seen: dict[str, Any]) -> None:
    assert sum(seen["bar"]) == pytest.approx(960, abs=0.1)
    assert [row[0] for row in seen["stuck"]] == [
        "gpu-rhel9-550-427-0",
        "gpu-ubuntu22-535-124-0",
        "gpu-ubuntu24-570-52-0",
    ]
    assert seen["points"] == len(demo.PULLS)
    assert "Dee O'Brien & Co" in seen["text"]


def test_markup_in_a_value_is_shown_as_text(seen: dict[str, Any]) -> None:
    assert demo.HOSTILE_REASON in seen["text"]
    assert seen["images"] == 0  # no <img> (nor script, frame, link) came out of the reason


def test_nothing_fetched_and_a_quiet_console(seen: dict[str, Any], fleet_page: Path) -> None:
    assert seen["requests"] == [fleet_page.as_uri()]
    assert seen["console"] == []


def test_fits_a_desktop_screen_and_prints(seen: dict[str, Any]) -> None:
    assert seen["scrollWidth"] <= WIDTH  # no sideways scrolling at desktop width
    assert struct.unpack(">II", seen["screenshot"][16:24]) == (WIDTH, HEIGHT)  # the PNG header's size
    assert seen["pdf"].startswith(b"%PDF-") and b"/Type /Page" in seen["pdf"]
    assert seen["title"].startswith("GPU fleet: driver images and upgrades")


def test_every_gpu_node_has_a_row(seen: dict[str, Any]) -> None:
    """The node table: all of them, not only the failing ones, each with its image and state."""
    names = [document["metadata"]["name"] for document in demo.nodes()]  # type: ignore[index]
    rows = seen["nodeRows"]
    assert sorted(row["cells"][0] for row in rows) == sorted(names)
    assert seen["nodeSummary"] == f"{len(names)} GPU nodes, 6 problems"
    by_name = {row["cells"][0]: row for row in rows}
    assert by_name["gpu-ubuntu22-550-119-0"]["cells"][1:4] == [
        "550-5.15.0-119-generic-ubuntu22.04",
        "yes",
        "upgrade-done",
    ]
    missing = sorted(name for name, row in by_name.items() if row["cells"][2] == "MISSING")
    assert missing == [
        "gpu-ubuntu22-535-124-0",
        "gpu-ubuntu24-570-52-0",
        "gpu-ubuntu24-570-52-1",
        "gpu-ubuntu24-570-52-2",
    ]
    assert by_name["gpu-ubuntu24-570-52-0"]["cells"][4] == demo.HOSTILE_REASON  # as text
    assert by_name["gpu-new-node-0"]["cells"][1].startswith("none: ")
    assert all(
        row["kind"] == "ok"
        for name, row in by_name.items()
        if name not in (*missing, "gpu-new-node-0", "gpu-rhel9-550-427-0")
    )


def test_each_missing_image_has_its_fix_beside_it(seen: dict[str, Any]) -> None:
    assert sorted(item["tag"] for item in seen["fixes"]) == sorted(demo.MISSING)
    for item in seen["fixes"]:
        assert item["fix"] == f"gpudrv matrix add --matrix matrix/support-matrix.csv --tag {item['tag']}"


def test_states_with_no_node_are_folded_away(seen: dict[str, Any]) -> None:
    assert seen["states"] and all(not state.endswith(" 0") for state in seen["states"])
    assert seen["foldedStates"] and all(item["text"].endswith(" 0") for item in seen["foldedStates"])
    assert not any(item["shown"] for item in seen["foldedStates"])  # folded: not drawn until opened


def test_the_history_axes_read_cleanly(seen: dict[str, Any]) -> None:
    dates = [tick["text"] for tick in seen["xTicks"]]
    assert len(dates) >= 3 and len(set(dates)) == len(dates) and dates == sorted(dates)
    boxes = [tick["box"] for tick in seen["xTicks"]]
    for left, right in itertools.pairwise(boxes):
        assert left["x"] + left["w"] < right["x"], "two date labels overlap"
    rows = [int(text) for text in seen["yTicks"]]
    assert rows == list(range(0, rows[-1] + 1, rows[1])) and rows[-1] >= 14
