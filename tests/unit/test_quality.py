"""The house rules run with the tests: lint, strict types, and the layering contracts."""

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
        ["lint-imports"],
    ],
    ids=["ruff", "ruff-format", "mypy-strict", "import-linter"],
)
def test_tool_passes(command: list[str]) -> None:
    tool = BIN / command[0]
    assert tool.exists(), f"{command[0]} is not installed: pip install -e '.[dev]'"
    result = subprocess.run([str(tool), *command[1:]], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# Offline commands must not pay for these (tests/cli also times a few with -X importtime).
HEAVY = {"kubernetes", "urllib3", "git"}


def test_kubernetes_and_git_are_imported_lazily() -> None:
    """No module imports them when it is imported (a TYPE_CHECKING block is fine): only inside the
    functions that talk to the cluster or git, which an import contract limits to kube.py and git.py."""
    eager = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((REPO / "reconciler").rglob("*.py"))
        for node in _run_on_import(ast.parse(path.read_text()))
        if _imported(node) & HEAVY
    ]
    assert eager == []


def _run_on_import(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes that run when the module is imported: not function bodies, not TYPE_CHECKING blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        yield from _run_on_import(node)


def _imported(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return {node.module.split(".")[0]}
    return set()
