"""The GPU Operator's side of the desired state: its os-tag rules (a data file) and its driver
resources (ClusterPolicy, NVIDIADriver) in manifests."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.adapters.files import manifests, positions
from reconciler.adapters.files.config import HelmValues
from reconciler.core import driver_images, operator, os_tags
from reconciler.core.driver_images import FleetNote, Wants
from reconciler.core.operator import Contract, DriverResource, Kind
from reconciler.core.tags import Node
from reconciler.errors import GpudrvError

RULES_FILE = files.DATA / "os-tag-rules.json"
KINDS = tuple(str(kind) for kind in Kind)


@cache
def rules(path: Path = RULES_FILE) -> os_tags.Rules:
    return files.read_json(path, os_tags.parse_rules)


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
    located = operator.with_origins(item, f"{path}:{line}", f"{path}:{version_line}")
    return replace(located, spec=manifests.plain(dict(item.spec)))


def _check_api_version(path: Path, line: int, document: dict[str, Any]) -> None:
    kind = Kind(str(document.get("kind")))
    wanted = operator.API_VERSIONS[kind]
    if document.get("apiVersion") != wanted:
        at = positions.line_of(document, ["apiVersion"], line)
        found = document.get("apiVersion")
        raise GpudrvError(f"{path}:{at}: {kind} must have apiVersion: {wanted} (found {found!r})")


def offline_contract(folder: Path, operator_version: str | None) -> Contract:
    """The contract the manifests under `folder` declare (lab mode when they declare no resource),
    the operator's Helm installations there included; `operator_version` wins over their chart's."""
    return offline(folder, Pins(flag=operator_version)).contract


@dataclass(frozen=True)
class Pins:
    """What may pin the operator release, strongest first: the flag, gpudrv.yaml's operatorVersion,
    the chart version the folder's Helm installation pins (gpudrv.yaml's helm: is one)."""

    flag: str | None = None
    config: str | None = None
    helm: HelmValues | None = None


@dataclass(frozen=True)
class Offline:
    contract: Contract
    version: str | None  # the release whose os-tag rule applies (None: the newest rule)
    chart: str | None = None  # the chart version the folder pins, `v25.3.4 (file:line)`, if any
    problems: tuple[FleetNote, ...] = ()  # what the API server would refuse of the rendered resources
    rule_from: str = "the newest rule"  # what picked the rule: `chart v25.3.4`, `operatorVersion v26.3.3`


def offline(
    folder: Path,
    pins: Pins,
    root: Path | None = None,
    remote_urls: Callable[[], tuple[str, ...]] | None = None,
    *,
    quiet: bool = False,
) -> Offline:
    """The contract in git: the declared resources and the rendered ones, under the rule of the release
    the pins give. Notes (charts ignored, versions not pinned) and a version mismatch go to stderr."""
    from reconciler.adapters.helm import (
        installs,  # a fleet without Helm pays little for it
        values_files,
    )

    top = root or values_files.repository_root(folder)
    urls = remote_urls or (cache(lambda: values_files.remotes(top)) if top else tuple)
    found = installs.read(folder, pins.helm, top, urls)
    for note in () if quiet else found.notes:
        say(f"note: {note}")
    pinned = found.pinned
    version = _version(pins, pinned, quiet)
    rule, release = _rule(version, pins, pinned)
    contract = checked([*load_resources(folder), *found.resources], rule, release)
    chart = f"{pinned.chart_version} ({pinned.version_origin})" if pinned else None
    return Offline(contract, version, chart, tuple(_problems(found.installs)), _rule_from(pins, pinned))


def _rule_from(pins: Pins, pinned: Any) -> str:
    if pins.flag is not None:
        return f"--operator-version {pins.flag}"
    if pins.config is not None:
        return f"operatorVersion {pins.config}"
    return f"chart {pinned.chart_version}" if pinned else "the newest rule"


def _version(pins: Pins, pinned: Any, quiet: bool = False) -> str | None:
    chart = pinned.chart_version if pinned else None
    if pins.flag is not None:
        return pins.flag
    if pins.config is not None:
        if chart is not None and _release(chart) != _release(pins.config) and not quiet:
            say(
                f"warning: gpudrv.yaml pins operatorVersion {pins.config}, but {pinned.what} installs chart "
                f"{chart} ({pinned.version_origin}); the os-tag rule of {pins.config} applies"
            )
        return pins.config
    return chart


def _release(version: str) -> object:
    try:
        return os_tags.parse_release(version)
    except os_tags.RuleError:
        return version


def _rule(version: str | None, pins: Pins, pinned: Any) -> tuple[os_tags.Rule, os_tags.Release | None]:
    if version is None or pins.flag is not None or pins.config is not None or pinned is None:
        return rule_for(version)
    try:
        return rules().for_version(version), os_tags.parse_release(version)
    except os_tags.RuleError as exc:
        file, _, line = pinned.version_origin.rpartition(":")
        raise GpudrvError(
            f"{pinned.what} installs chart {version}: {exc}; set operatorVersion in gpudrv.yaml to the "
            "rule's release line you run",
            file=file,
            line=int(line),
        ) from None


def _problems(installs: Any) -> list[FleetNote]:
    found = []
    for install in installs:
        for message, origin in install.problems:
            resource = replace(install.resources[0], origin=origin) if install.resources else None
            found.append(FleetNote(f"{origin}: {message}", resource))
    return found


def say(line: str) -> None:
    """One line on stderr, flat: a file name or value with a newline does not start a line of its own."""
    flat = line.replace("\r", "\\r").replace("\n", "\\n")
    print(f"gpudrv: {flat}", file=sys.stderr, flush=True)


def checked(resources: list[DriverResource], rule: os_tags.Rule, release: os_tags.Release | None) -> Contract:
    try:
        return operator.contract(resources, rule, release)
    except operator.ContractError as exc:
        raise located(exc) from None


def wants(contract: Contract, nodes: list[Node]) -> Wants:
    """Every GPU node's image under the contract; NVIDIADrivers that overlap on a node are one error."""
    try:
        return driver_images.wants(contract, nodes)
    except operator.ContractError as exc:
        raise located(exc) from None


def located(exc: operator.ContractError) -> GpudrvError:
    """The core's refusal as the one error type, at the resource's file and line when it has one."""
    if exc.origin is None:
        return GpudrvError(exc.reason)
    file, _, line = exc.origin.rpartition(":")
    if not line.isdigit():
        return GpudrvError(exc.reason, file=exc.origin)
    return GpudrvError(exc.reason, file=file, line=int(line))
