"""Every Node manifest under a folder against schemas/node-manifest.schema.json, all problems at once.

Each problem has the file and line of the label (or field) at fault. Broken YAML in one file is one
problem, and the other files are still read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.adapters.files import manifests, positions, schemas
from reconciler.core.images import node_schema
from reconciler.core.images.node_schema import Problem, Report
from reconciler.errors import GpudrvError


def check(folder: Path) -> Report:
    checker = node_schema.validator(schemas.load("node-manifest"))
    nodes, problems = 0, list[Problem]()
    names: dict[str, str] = {}  # node name -> where it was first declared
    for path in manifests.manifest_files(folder):
        for line, document in _nodes(path, problems):
            nodes += 1
            problems += _schema_problems(path, line, document, checker)
            problems += _duplicate(path, line, document, names)
        manifests.forget(path)  # read once: nothing here reads it again
    return Report(str(folder), nodes, tuple(problems))


def _nodes(path: Path, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's Node documents; broken YAML is one problem, and the next file is still read."""
    try:
        yield from manifests.documents_of_kinds(path, ("Node",))
    except GpudrvError as exc:
        located = exc.line is not None
        problems.append(Problem(str(path), exc.line or 1, exc.message if located else str(exc)))


def _schema_problems(
    path: Path, line: int, document: dict[str, Any], checker: node_schema.Checker
) -> list[Problem]:
    found = [
        Problem(str(path), positions.line_of(document, violation.path, line), violation.message)
        for violation in node_schema.violations(
            document, checker, lambda at: manifests.written(path, document, at)
        )
    ]
    return sorted(found, key=lambda problem: problem.line)


def _duplicate(path: Path, line: int, document: dict[str, Any], names: dict[str, str]) -> list[Problem]:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str):
        return []
    if name in names:
        return [Problem(str(path), line, f"node {name} is declared twice (first at {names[name]})")]
    names[name] = f"{path}:{line}"
    return []
