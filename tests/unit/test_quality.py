"""The house rules run with the tests: lint, strict types, and the layering contracts."""

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

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


# Past this a module holds more than one concern (the house rule; docs/architecture.md).
MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in sorted((REPO / "reconciler").rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _contract(name_start: str) -> dict[str, Any]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [contract] = [item for item in contracts if item["name"].startswith(name_start)]
    return cast(dict[str, Any], contract)


def _matches(expression: str, module: str) -> bool:
    """An import-linter module expression: `*` is one component, `**` any number of them."""
    parts = (re.escape(part) for part in expression.split("."))
    pattern = r"\.".join(part.replace(r"\*\*", r"[^.]+(\.[^.]+)*").replace(r"\*", r"[^.]+") for part in parts)
    return re.fullmatch(pattern, module) is not None


def test_every_command_module_is_in_the_independence_contract() -> None:
    """A new command module is in the contract without anyone listing it, and the imports it allows
    between command modules are only of shared steps that exist."""
    contract = _contract("Each verb stands alone")
    assert contract["type"] == "independence"
    folder = REPO / "reconciler/commands"
    packages = [path.parent for path in folder.glob("*/__init__.py")]
    modules = [f"reconciler.commands.{path.stem}" for path in [*folder.glob("*.py"), *packages]]
    modules = [module for module in modules if not module.endswith(".__init__")]
    assert "reconciler.commands.reconcile" in modules  # a command that is a package is covered too
    assert len(modules) > 10  # the glob found the package
    left_out = [module for module in modules if not any(_matches(e, module) for e in contract["modules"])]
    assert left_out == []
    shared = {rule.split(" -> ")[1] for rule in contract["ignore_imports"]}
    assert shared <= set(modules)  # a renamed shared step does not leave a stale, wider rule
    assert shared == {
        "reconciler.commands.upgrades",
        "reconciler.commands.settings",
        "reconciler.commands.fleet_page",
        "reconciler.commands.cuda_gates",
        "reconciler.commands.clusters",
    }


def test_module_expressions_match_as_import_linter_reads_them() -> None:
    assert _matches("reconciler.commands.*", "reconciler.commands.apply")
    assert not _matches("reconciler.commands.*", "reconciler.commands")
    assert not _matches("reconciler.commands.*", "reconciler.commands.steps.apply")
    assert _matches("reconciler.commands.**", "reconciler.commands.steps.apply")
    assert _matches("reconciler.commands.apply", "reconciler.commands.apply")
    assert not _matches("reconciler.commands.apply", "reconciler.commands.apply_x")


def test_no_import_renames_a_module_or_a_name() -> None:
    """One name per thing: `import a.b as c` or `from a import b as c` would give a thing a second
    name (to dodge a clash); `from a import b as b`, an explicit re-export, keeps its name."""
    renamed = [
        f"{path.relative_to(REPO)}:{node.lineno}: {alias.name} as {alias.asname}"
        for path in sorted((REPO / "reconciler").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if alias.asname is not None and alias.asname != alias.name.split(".")[-1]
    ]
    assert renamed == []


# --- one way to the Kubernetes API -----------------------------------------------------------------------

RESOURCE_TABLE = REPO / "reconciler" / "adapters" / "kube" / "_resources.py"
# A hand-written API path: "/api..., '/api..., f"/api..., rb'/apis... (any string that starts with one).
API_PATH = re.compile(r"""(?<!\w)[rbfuRBFU]{0,2}["']/apis?(?!\w)""")
GENERATED = re.compile(r"_with_http_info|^\w+V\d\w*Api$|^CustomObjectsApi$")


def _api_paths(text: str) -> list[str]:
    return [match.group() for match in API_PATH.finditer(text)] + re.findall(r"\w*_with_http_info", text)


def _generated_names(tree: ast.AST) -> set[str]:
    """Names of the client's generated API classes and methods the code uses (docstrings aside)."""
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    return {name for name in names if GENERATED.search(name)}


def test_the_detectors_find_what_they_look_for() -> None:
    found = _api_paths("a = \"/api/v1/nodes\"; b = f'/apis/{g}'; c = x.list_node_with_http_info()")
    assert found == ['"/api', "f'/apis", "list_node_with_http_info"]
    assert _api_paths('"/apiary" "/healthz" "apiVersion"') == []
    tree = ast.parse("from kubernetes.client import CoreV1Api\nCoreV1Api(c).read_node_with_http_info()")
    assert _generated_names(tree) == {"CoreV1Api", "read_node_with_http_info"}


def test_api_paths_are_built_in_the_resource_table_only() -> None:
    """Every request names a resource of kube/_resources.py; nothing else spells a path of the API, or
    calls a generated API method."""
    found = {
        str(path.relative_to(REPO)): spelled
        for path in sorted((REPO / "reconciler").rglob("*.py"))
        if path != RESOURCE_TABLE and (spelled := _api_paths(path.read_text()))
    }
    assert found == {}
    assert _api_paths(RESOURCE_TABLE.read_text())  # the table is where they are


def test_no_generated_api_class_anywhere() -> None:
    """The kubernetes package serves the ApiClient and the config loaders, never its generated APIs."""
    used = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "reconciler").rglob("*.py"))
        if (names := _generated_names(ast.parse(path.read_text())))
    }
    assert used == {}


def test_every_folder_of_tests_is_in_the_test_paths() -> None:
    """pytest collects only pyproject's testpaths (listed in the order the tiers should run): a new
    folder of tests left out of it would never run."""
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "testpaths"
    ]
    with_tests = {
        path.parent.relative_to(REPO).parts[:2]
        for path in (REPO / "tests").rglob("test_*.py")
        if ".venv" not in path.parts
    }
    assert sorted("/".join(parts) for parts in with_tests) == sorted(listed)
