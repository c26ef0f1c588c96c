"""Every example in README.md and docs/ is real: run against a fresh copy of the repository, or marked
as needing a live cluster (tests/docs/examples.py says how a block is read)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs import examples


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def all_blocks() -> list[examples.Block]:
    return [block for page in pages() for block in examples.blocks(page)]


def block_id(block: examples.Block) -> str:
    return f"{block.path.relative_to(REPO)}:{block.line}"


EXAMPLES = [block for block in all_blocks() if block.is_example]
LIVE = [block for block in all_blocks() if block.live]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return examples.make_template(REPO, tmp_path_factory.mktemp("clone"))


@pytest.mark.parametrize("block", EXAMPLES, ids=block_id)
def test_example_prints_what_the_page_shows(block: examples.Block, template: Path, tmp_path: Path) -> None:
    actual = examples.run(block, template, tmp_path)
    difference = examples.mismatch(block, actual)
    if difference is not None and examples.updating():
        examples.rewrite(block, actual)
        warnings.warn(f"{block_id(block)}: expected output rewritten from the real run", stacklevel=1)
        return
    assert difference is None, (
        f"{block_id(block)}: the example's output differs "
        f"({examples.UPDATE_VARIABLE}=1 rewrites it from the real run)\n\n{difference}"
    )


def test_there_are_examples_in_the_readme_and_the_docs() -> None:
    places = {block.path.relative_to(REPO).parts[0] for block in EXAMPLES}
    assert places == {"README.md", "docs"}


def test_every_block_that_shows_a_gpudrv_command_is_run_or_marked_live() -> None:
    unmarked = [
        block_id(block)
        for block in all_blocks()
        if examples.shows_gpudrv_command(block) and not (block.is_example or block.live)
    ]
    assert unmarked == [], 'make these ```console blocks (run by this test) or title them "live cluster"'


def test_every_live_block_shows_commands() -> None:
    """A console block with `$ ` lines, or a shell recipe (commands only, no output shown)."""
    wrong = [
        block_id(b)
        for b in all_blocks()
        if b.live and not ((b.language == "console" and b.steps()) or b.language in {"sh", "bash"})
    ]
    assert wrong == []


@pytest.mark.parametrize("block", LIVE, ids=block_id)
def test_a_live_block_is_listed_and_its_gpudrv_commands_parse(block: examples.Block) -> None:
    """A live block needs a cluster, registry or node, so it is not run here; it is listed instead (this
    test's ids: `pytest --collect-only -q tests/docs/test_examples.py -k listed`), and what can be
    checked offline is: every gpudrv command it shows is one gpudrv's own parser takes (its verb and
    flags exist). Nothing runs."""
    refused = [
        f"gpudrv {' '.join(argv)}: {why}"
        for line in examples.shown_commands(block)
        for argv in examples.gpudrv_calls(line)
        if (why := examples.refused(argv)) is not None
    ]
    assert refused == [], f"{block_id(block)}: gpudrv would refuse these"


def test_every_gpudrv_command_shown_in_a_live_block_is_found() -> None:
    """Every line of a live block that shows a gpudrv command (GPUDRV_CALL) gives the parse check above
    at least one call (examples.gpudrv_calls): none is passed over."""
    for block in LIVE:
        for line in examples.shown_commands(block):
            if examples.GPUDRV_CALL.search(line):
                assert examples.gpudrv_calls(line), f"{block_id(block)}: {line}"
