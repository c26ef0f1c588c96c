"""The GPU Operator's side of the desired state: its os-tag rules (a data file) and its driver
resources (ClusterPolicy, NVIDIADriver) in manifests. adapters/desired.py puts them together."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.adapters.files import manifests, positions
from reconciler.core.contract import operator
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.core.images import os_tags
from reconciler.errors import GpudrvError

RULES_FILE = files.DATA / "os-tag-rules.json"
KINDS = tuple(str(kind) for kind in Kind)


@cache
def rules(path: Path = RULES_FILE) -> os_tags.Rules:
    return files.read_json(path, os_tags.parse_rules)


def load_resources(folder: Path) -> list[DriverResource]:
    """Every ClusterPolicy and NVIDIADriver declared under `folder`, with the file:line of each."""
    found: dict[tuple[Kind, str], DriverResource] = {}
    for path in manifests.manifest_files(folder):
        for line, document in manifests.documents_of_kinds(path, KINDS):
            item = _resource(path, line, document)
            key = (item.kind, item.name)
            if key in found:
                raise GpudrvError(f"{item.origin}: {item.ref} is declared twice (also {found[key].origin})")
            found[key] = item
    return list(found.values())


def _resource(path: Path, line: int, document: dict[str, Any]) -> DriverResource:
    _check_api_version(path, line, document)
    try:
        item = operator.resource(document)
    except operator.ResourceError as exc:
        at = positions.line_of(document, exc.path, line)
        raise GpudrvError(f"{path}:{at}: {document.get('kind')}: {exc}") from None
    version_line = positions.line_of(document, operator.version_path(item.kind), line)
    located = operator.with_origins(item, f"{path}:{line}", f"{path}:{version_line}")
    return replace(located, spec=manifests.plain(dict(item.spec)))


def _check_api_version(path: Path, line: int, document: dict[str, Any]) -> None:
    kind = Kind(str(document.get("kind")))
    wanted = operator.API_VERSIONS[kind]
    if document.get("apiVersion") != wanted:
        at = positions.line_of(document, ["apiVersion"], line)
        found = document.get("apiVersion")
        raise GpudrvError(f"{path}:{at}: {kind} must have apiVersion: {wanted} (found {found!r})")


def located(exc: operator.ContractError) -> GpudrvError:
    """The core's refusal as the one error type, at the resource's file and line when it has one."""
    if exc.origin is None:
        return GpudrvError(exc.reason)
    file, _, line = exc.origin.rpartition(":")
    if not line.isdigit():
        return GpudrvError(exc.reason, file=exc.origin)
    return GpudrvError(exc.reason, file=file, line=int(line))
