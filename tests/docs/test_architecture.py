"""docs/architecture.md lists the package as it is: every module of reconciler/core/ and
reconciler/adapters/ is named in its room's or group's entry of the page's tree, and every group of
adapters has a row in "Where to change what"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs import examples

PAGE = REPO / "docs" / "architecture.md"
ENTRY = re.compile(r"^  (?P<name>[\w.]+/?)\s")  # `  helm/   the GPU Operator's chart: ...`
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tree(root: str) -> dict[str, set[str]]:
    """The entries of the page's ```text tree that starts with `root` (`reconciler/adapters/`): each
    folder (`helm/`) or module (`sources.py`) with the words its description uses."""
    block = next(b for b in examples.blocks(PAGE) if b.lines and b.lines[0].strip() == root)
    entries: dict[str, set[str]] = {}
    current = ""
    for line in block.lines[1:]:
        if found := ENTRY.match(line):
            current = found["name"]
            entries[current] = set()
        entries[current] |= set(WORD.findall(line))
    return entries


def modules(package: Path) -> dict[str, list[str]]:
    """Each folder (`helm/`) with its modules' names, and each module of the package itself (`sources.py`)."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            found[path.name + "/"] = sorted(
                module.stem for module in path.glob("*.py") if module.stem != "__init__"
            )
        elif path.suffix == ".py" and path.stem != "__init__":
            found[path.name] = []
    return found


@pytest.mark.parametrize("root", ["reconciler/core/", "reconciler/adapters/"])
def test_every_module_is_named_in_the_tree(root: str) -> None:
    entries = tree(root)
    missing = [
        f"{root}{entry}{module}.py" if module else f"{root}{entry}"
        for entry, names in modules(REPO / root).items()
        for module in (names or [""])
        if entry not in entries or (module and module not in entries[entry])
    ]
    assert missing == [], f"docs/architecture.md's tree of {root} does not name these"


def test_every_group_of_adapters_is_in_where_to_change_what() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Where to change what") :].split("\n## ", 1)[0]
    groups = [entry for entry in modules(REPO / "reconciler" / "adapters") if entry.endswith("/")]
    assert groups
    assert [group for group in groups if f"`adapters/{group}" not in table] == []
