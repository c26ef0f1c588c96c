"""The GPU Operator's side of the desired state: its os-tag rules (a data file) and its driver
resources (ClusterPolicy, NVIDIADriver) in manifests."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.adapters import files, manifests, positions
from reconciler.core import operator, os_tags
from reconciler.core.operator import Contract, DriverResource, Kind
from reconciler.errors import GpudrvError

# Inside the package, so it ships in the wheel with no packaging rule of its own.
RULES_FILE = Path(__file__).resolve().parent.parent / "data" / "os-tag-rules.json"
KINDS = tuple(str(kind) for kind in Kind)


@cache
def rules(path: Path = RULES_FILE) -> os_tags.Rules:
    try:
        return os_tags.parse_rules(json.loads(files.read_text(path)))
    except (ValueError, os_tags.RuleError) as exc:
        raise GpudrvError(f"{path}: {exc}") from None


def rule_for(version: str | None) -> tuple[os_tags.Rule, os_tags.Release | None]:
    """The os-tag rule of an operator release (None: the newest rule), with the release itself."""
    known = rules()
    if version is None:
        return known.newest, None
    try:
        return known.for_version(version), os_tags.parse_release(version)
    except os_tags.RuleError as exc:
        raise GpudrvError(f"--operator-version: {exc}; pass a released version like v26.3.3") from None


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
    return operator.with_origins(item, f"{path}:{line}", f"{path}:{version_line}")


def _check_api_version(path: Path, line: int, document: dict[str, Any]) -> None:
    kind = Kind(str(document.get("kind")))
    wanted = operator.API_VERSIONS[kind]
    if document.get("apiVersion") != wanted:
        at = positions.line_of(document, ["apiVersion"], line)
        found = document.get("apiVersion")
        raise GpudrvError(f"{path}:{at}: {kind} must have apiVersion: {wanted} (found {found!r})")


def offline_contract(folder: Path, operator_version: str | None) -> Contract:
    """The contract the manifests under `folder` declare (lab mode when they declare no resource)."""
    rule, release = rule_for(operator_version)
    return checked(load_resources(folder), rule, release)


def checked(resources: list[DriverResource], rule: os_tags.Rule, release: os_tags.Release | None) -> Contract:
    try:
        return operator.contract(resources, rule, release)
    except operator.ContractError as exc:
        raise GpudrvError(str(exc)) from None
