"""The one reading of a fleet's desired state (core/contract/desired.py): built once per command from the
settings, from git (`--from DIR`, a folder at a git ref) or from the live cluster, and asked by every
command for the mode, the operator release and its provenance, and the driver resources.

No other module builds the contract or decides the mode: plan, apply, diff, the rollout, the audit,
matrix impact and the in-cluster loop all read it here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.files import manifests
from reconciler.adapters.files.config import HelmValues
from reconciler.adapters.files.operator_contract import load_resources, located, rules
from reconciler.core.contract import driver_images, operator
from reconciler.core.contract.desired import (
    Candidate,
    Desired,
    OperatorVersion,
    Source,
    SourceKind,
    VersionFrom,
    decide,
)
from reconciler.core.contract.driver_images import FleetNote, Want, Wants
from reconciler.core.contract.operator import Contract, DriverResource, Kind
from reconciler.core.images import os_tags
from reconciler.core.images.tags import Node
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from reconciler.adapters import kube
    from reconciler.adapters.helm.installs import Install, Installs

Connect = Callable[[], "kube.Gateway"]  # a gateway, reached when first asked


@dataclass(frozen=True)
class Pins:
    """What may pin the operator release, from the settings: the flag, gpudrv.yaml's operatorVersion
    (`config_origin`: that file), and gpudrv.yaml's helm: (values files and a chart version)."""

    flag: str | None = None
    config: str | None = None
    helm: HelmValues | None = None
    config_origin: str = "gpudrv.yaml"


def from_git(
    folder: Path,
    pins: Pins,
    *,
    root: Path | None = None,
    remote_urls: Callable[[], tuple[str, ...]] | None = None,
    quiet: bool = False,
) -> Desired:
    """The desired state in git under `folder`: declared resources, and those the fleet's Helm
    installations render. Read before any cluster is reached: a command that applies it to a cluster
    (plan, apply, diff) then calls on_cluster."""
    from reconciler.adapters.helm import (
        installs,  # a fleet without Helm pays little for it
        values_files,
    )

    top = root or values_files.repository_root(folder)
    urls = remote_urls or (cache(lambda: values_files.remotes(top)) if top else tuple)
    found = installs.read(folder, pins.helm, top, urls)
    pinned = found.pinned
    chart = (
        Candidate(pinned.chart_version, pinned.version_origin) if pinned and pinned.chart_version else None
    )
    version = decide(_flag(pins), _config(pins), chart)
    rule = _rule(version, None)  # a release gpudrv does not know: its one line, before any note
    for note in () if quiet else found.notes:
        say(f"note: {note}")
    declared, rendered = tuple(load_resources(folder)), tuple(found.resources)
    if not quiet:
        _warn_config_over_chart(version, pinned)
    contract = checked([*declared, *rendered], *rule)
    return Desired(
        sources=(*_git_sources(folder, declared), *_helm_sources(found)),
        version=version,
        contract=contract,
        declared=declared,
        rendered=rendered,
        problems=tuple(_problems(found.installs)),
        chart=f"{pinned.chart_version} ({pinned.version_origin})" if pinned else None,
    )


def on_cluster(state: Desired, gateway: kube.Gateway) -> Desired:
    """The desired state in git once the cluster it is for is reached (plan, apply, diff): where nothing
    pinned the operator's release, the one running there picks the rule (step 4 of the precedence).
    Lab mode needs no rule: the cluster is not asked then."""
    if state.version.source is not VersionFrom.NEWEST or not state.operator:
        return state
    version = decide(None, None, None, _live_version(lambda: gateway))
    if version.source is VersionFrom.NEWEST:
        return state
    contract = checked([*state.declared, *state.rendered], *_rule(version, lambda: gateway))
    return replace(state, version=version, contract=contract)


def from_cluster(gateway: kube.Gateway, pins: Pins) -> Desired:
    """The desired state the live cluster holds: its ClusterPolicy and NVIDIADrivers, under the rule of
    the pinned release or of the operator that runs there."""
    from reconciler.adapters.cluster import gpu_operator

    resources = tuple(gpu_operator.live_resources(gateway))
    live = _live_version(lambda: gateway) if resources else None  # no resource: lab mode, no rule needed
    version = decide(_flag(pins), _config(pins), None, live)
    contract = checked(list(resources), *_rule(version, lambda: gateway))
    return Desired(
        sources=(Source(SourceKind.LIVE, f"the cluster at {gateway.host}"),),
        version=version,
        contract=contract,
        declared=resources,
        live=True,
    )


def checked(resources: list[DriverResource], rule: os_tags.Rule, release: os_tags.Release | None) -> Contract:
    """The resources the operator would act on, checked (core/contract/operator.py contract): the one
    place gpudrv builds a contract; a refusal is one error at the resource's file:line."""
    try:
        return operator.contract(resources, rule, release)
    except operator.ContractError as exc:
        raise located(exc) from None


def wants(desired: Desired, nodes: list[Node]) -> Wants:
    """Every GPU node's image under the desired state, the rendered resources' problems first; an
    overlap of NVIDIADrivers on a node is one error at the resource's file:line."""
    try:
        found = driver_images.wants(desired.contract, nodes)
    except operator.ContractError as exc:
        raise located(exc) from None
    if desired.problems:
        return Wants(found.contract, found.wants, (*desired.problems, *found.notes), found.next_wants)
    return found


def want(desired: Desired, node: Node) -> Want:
    """One node's image under the desired state (gpudrv tag), errors located as wants' are."""
    try:
        return driver_images.want_of(desired.contract, node)
    except operator.ContractError as exc:
        raise located(exc) from None


# --- the operator release ------------------------------------------------------------------------------


def _flag(pins: Pins) -> Candidate | None:
    return Candidate(pins.flag, "--operator-version") if pins.flag is not None else None


def _config(pins: Pins) -> Candidate | None:
    return Candidate(pins.config, pins.config_origin) if pins.config is not None else None


def _live_version(gateway: Connect) -> Callable[[], Candidate | None]:
    def read() -> Candidate | None:
        from reconciler.adapters.cluster import gpu_operator

        found = gateway()
        version = gpu_operator.live_operator_version(found)
        if version is None:
            return None
        return Candidate(version, f"the GPU Operator's Deployment in the cluster at {found.host}")

    return read


def _rule(version: OperatorVersion, gateway: Connect | None) -> tuple[os_tags.Rule, os_tags.Release | None]:
    """The os-tag rule of the release, or one error line that names where the bad release came from."""
    known = rules()
    if version.value is None:
        return known.newest, None
    try:
        return known.for_version(version.value), os_tags.parse_release(version.value)
    except os_tags.RuleError as exc:
        raise _bad_release(version, exc, gateway) from None


def _bad_release(version: OperatorVersion, exc: os_tags.RuleError, gateway: Connect | None) -> GpudrvError:
    value = version.value
    if version.source is VersionFrom.FLAG:
        return GpudrvError(f"--operator-version: {exc}; pass a released version like v26.3.3")
    if version.source is VersionFrom.CONFIG:
        return GpudrvError(
            f"operatorVersion {value!r}: {exc}; set a released version like v26.3.3", file=version.origin
        )
    if version.source is VersionFrom.CHART:
        file, _, line = (version.origin or "").rpartition(":")
        return GpudrvError(
            f"the chart version {value}: {exc}; set operatorVersion in gpudrv.yaml to the rule's release "
            "line you run",
            file=file or None,
            line=int(line) if line.isdigit() else None,
        )
    host = gateway().host if gateway is not None else "?"
    return GpudrvError(
        f"the GPU Operator in the cluster at {host} runs image tag {value!r}: {exc}; pass --operator-version "
        "or set operatorVersion in gpudrv.yaml"
    )


def _warn_config_over_chart(version: OperatorVersion, pinned: Install | None) -> None:
    chart = pinned.chart_version if pinned else None
    if version.source is not VersionFrom.CONFIG or chart is None or pinned is None or version.value is None:
        return
    if _release(chart) != _release(version.value):
        say(
            f"warning: gpudrv.yaml pins operatorVersion {version.value}, but {pinned.what} installs chart "
            f"{chart} ({pinned.version_origin}); the os-tag rule of {version.value} applies"
        )


def _release(version: str) -> object:
    try:
        return os_tags.parse_release(version)
    except os_tags.RuleError:
        return version


# --- what was read -------------------------------------------------------------------------------------


def _git_sources(folder: Path, declared: tuple[DriverResource, ...]) -> list[Source]:
    found = [
        Source(SourceKind.NODE_MANIFESTS, f"{path}:{line}")
        for path in manifests.manifest_files(folder)
        for line, _ in manifests.documents_of_kinds(path, ("Node",))
    ][:1]  # the first is enough to say Node manifests were read
    kinds = {Kind.CLUSTER_POLICY: SourceKind.CLUSTER_POLICY, Kind.NVIDIA_DRIVER: SourceKind.NVIDIA_DRIVER}
    found.extend(Source(kinds[item.kind], item.origin or item.ref) for item in declared)
    return found


def _helm_sources(found: Installs) -> list[Source]:
    kinds = {
        "HelmRelease": SourceKind.FLUX_HELM_RELEASE,
        "Application": SourceKind.ARGO_APPLICATION,
        "gpudrv.yaml": SourceKind.GPUDRV_HELM,
    }
    return [
        Source(
            next(kind for prefix, kind in kinds.items() if install.what.startswith(prefix)), install.origin
        )
        for install in found.installs
    ]


def _problems(installs: tuple[Install, ...]) -> list[FleetNote]:
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
