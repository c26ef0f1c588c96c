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
