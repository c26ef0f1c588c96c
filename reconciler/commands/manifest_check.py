"""`gpudrv manifests validate [--from DIR]`: every Node manifest against schemas/node-manifest.schema.json.

Every problem is reported as `file:line: message` at the label (or field) at fault, all at once, like
`matrix validate`: exit 0 valid, 2 invalid. Broken YAML in one file does not hide the other files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import github, manifests, positions, schemas
from reconciler.commands import ERROR, OK
from reconciler.core import node_schema
from reconciler.errors import GpudrvError

_AT = re.compile(r"(?P<file>[^:]+):(?P<line>[0-9]+): (?P<message>.*)", re.DOTALL)


@dataclass(frozen=True)
class Problem:
    file: Path
    line: int
    message: str

    def text(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Report:
    folder: Path
    nodes: int
    problems: tuple[Problem, ...]

    def verdict(self) -> str:
        manifests = github.count(self.nodes, "Node manifest")
        if self.problems:
            return f"{self.folder}: {github.count(len(self.problems), 'problem')} in {manifests}"
        return f"{self.folder}: {manifests}, valid"


def validate(folder: Path, output: str) -> int:
    report = check(folder)
    if output == "github":
        github.publish(annotate(report), summary(report), report.verdict())
    else:
        for problem in report.problems:
            print(problem.text())
        if not report.problems:
            print(report.verdict())
    return ERROR if report.problems else OK


def check(folder: Path) -> Report:
    checker = node_schema.validator(schemas.load("node-manifest"))
    nodes, problems = 0, list[Problem]()
    names: dict[str, str] = {}  # node name -> where it was first declared
    for path in manifests.manifest_files(folder):
        for line, document in _nodes(path, problems):
            nodes += 1
            problems += _schema_problems(path, line, document, checker)
            problems += _duplicate(path, line, document, names)
    return Report(folder, nodes, tuple(problems))


def _nodes(path: Path, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's Node documents; broken YAML is one problem, and the next file is still read."""
    try:
        yield from manifests.documents_of_kinds(path, ("Node",))
    except GpudrvError as exc:
        match = _AT.fullmatch(str(exc))
        line, message = (int(match["line"]), match["message"]) if match else (1, str(exc))
        problems.append(Problem(path, line, message))


def _schema_problems(
    path: Path, line: int, document: dict[str, Any], checker: node_schema.Checker
) -> list[Problem]:
    found = [
        Problem(path, positions.line_of(document, violation.path, line), violation.message)
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
        return [Problem(path, line, f"node {name} is declared twice (first at {names[name]})")]
    names[name] = f"{path}:{line}"
    return []


# --- GitHub ----------------------------------------------------------------------------------------


def annotate(report: Report) -> list[github.Annotation]:
    return [
        github.Annotation("error", p.message, github.workspace_path(str(p.file)), p.line, "Node manifest")
        for p in report.problems
    ]


def summary(report: Report) -> github.Summary:
    where = github.code(str(report.folder))
    if not report.problems:
        lead = f"{github.count(report.nodes, 'Node manifest')} under {where}, each matching the schema."
        return github.Summary("gpudrv manifests validate: valid", lead)
    rows = [(github.code(f"{p.file}:{p.line}"), github.text(p.message)) for p in report.problems]
    problems, manifests = (
        github.count(len(report.problems), "problem"),
        github.count(report.nodes, "Node manifest"),
    )
    lead = f"{problems} in {manifests} under {where}."
    table = github.Table(("Where", "Problem"), rows)
    return github.Summary("gpudrv manifests validate: invalid", lead, (table,))
