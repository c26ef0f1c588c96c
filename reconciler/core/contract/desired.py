"""The desired state of one fleet, decided once: what was read, the operator release whose os-tag
rule applies (and why that one), the mode, and the driver resources (declared, or rendered from Helm
values). adapters/desired.py builds it; every command that needs any of it asks it.

The one precedence rule for the operator release (docs/architecture.md, "The desired state"), first
found wins:

1. `--operator-version` (the flag);
2. `operatorVersion` in gpudrv.yaml (or the cluster's entry in gpudrv.yaml's `clusters:`);
3. the chart version the fleet's Helm installation pins (HelmRelease, Application, gpudrv.yaml helm:);
4. the release the GPU Operator's Deployment runs in the cluster (only when a cluster is read);
5. none: the newest rule gpudrv knows.

Git over the cluster: what is merged is what will run, so a pinned chart beats the running operator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.core.contract.driver_images import FleetNote
from reconciler.core.contract.operator import Contract, DriverResource, Mode


class VersionFrom(StrEnum):
    """Where the operator release came from, strongest first (the precedence rule above)."""

    FLAG = "flag"
    CONFIG = "gpudrv.yaml"
    CHART = "chart"
    LIVE = "live"
    NEWEST = "newest"


class SourceKind(StrEnum):
    """Every kind of place a fleet's desired state is read from. A new kind is added here, and the
    command matrix (tests/cli/test_fleet_matrix.py) refuses to pass until it covers it."""

    NODE_MANIFESTS = "Node manifests"
    CLUSTER_POLICY = "ClusterPolicy"
    NVIDIA_DRIVER = "NVIDIADriver"
    FLUX_HELM_RELEASE = "Flux HelmRelease"
    ARGO_APPLICATION = "Argo CD Application"
    GPUDRV_HELM = "gpudrv.yaml helm"
    LIVE = "live cluster"


HELM_KINDS = frozenset({SourceKind.FLUX_HELM_RELEASE, SourceKind.ARGO_APPLICATION, SourceKind.GPUDRV_HELM})


@dataclass(frozen=True)
class Candidate:
    """A release one source names, and where (`--operator-version`, `gpudrv.yaml`, `file:line`)."""

    value: str
    origin: str


@dataclass(frozen=True)
class OperatorVersion:
    """The release whose os-tag rule applies (None: the newest rule), where it came from and why."""

    value: str | None
    source: VersionFrom
    origin: str | None = None

    def text(self) -> str:
        """For messages: `v25.3.4 (chart, clusters/x/helmrelease.yaml:14)`, `the newest rule`."""
        if self.value is None:
            return "the newest rule"
        return (
            f"{self.value} ({self.source}, {self.origin})" if self.origin else f"{self.value} ({self.source})"
        )

    def as_json(self) -> dict[str, Any]:
        return {"version": self.value, "from": str(self.source), "origin": self.origin}


def decide(
    flag: Candidate | None,
    config: Candidate | None,
    chart: Candidate | None,
    live: Callable[[], Candidate | None] | None = None,
) -> OperatorVersion:
    """The precedence rule: the first source that names a release; `live` is asked only when nothing
    stronger did (reading it costs a request)."""
    for source, candidate in (
        (VersionFrom.FLAG, flag),
        (VersionFrom.CONFIG, config),
        (VersionFrom.CHART, chart),
    ):
        if candidate is not None:
            return OperatorVersion(candidate.value, source, candidate.origin)
    found = live() if live is not None else None
    if found is not None:
        return OperatorVersion(found.value, VersionFrom.LIVE, found.origin)
    return OperatorVersion(None, VersionFrom.NEWEST)


@dataclass(frozen=True)
class Source:
    """One thing read: its kind and where (`clusters/x/helmrelease.yaml:5`, `the cluster at HOST`)."""

    kind: SourceKind
    where: str

    def as_json(self) -> dict[str, str]:
        return {"kind": str(self.kind), "where": self.where}


@dataclass(frozen=True)
class Desired:
    """One fleet's desired state. `declared`: driver resources written as manifests (gpudrv may apply
    them); `rendered`: the ones a Helm installation renders (Helm, Flux or Argo CD applies them, never
    gpudrv). Live, the cluster's resources are `declared` of the live source."""

    sources: tuple[Source, ...]
    version: OperatorVersion
    contract: Contract
    declared: tuple[DriverResource, ...] = ()
    rendered: tuple[DriverResource, ...] = ()
    problems: tuple[FleetNote, ...] = ()  # what the API server would refuse of the rendered resources
    chart: str | None = None  # `v25.3.4 (file:line)`: the chart version the fleet pins, if any
    live: bool = False  # read from a cluster, not from git

    @property
    def mode(self) -> Mode:
        return self.contract.mode

    @property
    def operator(self) -> bool:
        """Does the GPU Operator decide the drivers (not the lab's labels)?"""
        return self.contract.mode is not Mode.LAB

    @property
    def helm_owned(self) -> bool:
        """Are the driver resources in force rendered by a Helm installation (so never gpudrv's to write)?"""
        return bool(self.rendered)

    @property
    def rule_from(self) -> str:
        """What picked the os-tag rule, in a few words: `chart v25.3.4`, `--operator-version v26.3.3`."""
        version = self.version
        if version.value is None:
            return "the newest rule"
        return {
            VersionFrom.FLAG: f"--operator-version {version.value}",
            VersionFrom.CONFIG: f"operatorVersion {version.value}",
            VersionFrom.CHART: f"chart {version.value}",
            VersionFrom.LIVE: f"the running operator {version.value}",
        }.get(version.source, version.value)

    def kinds(self) -> tuple[SourceKind, ...]:
        return tuple(dict.fromkeys(source.kind for source in self.sources))

    def as_json(self) -> dict[str, Any]:
        """What every command's -o json says of the desired state (schemas/desired-state.schema.json)."""
        return {
            "mode": str(self.mode),
            "operator": self.version.as_json(),
            "sources": [source.as_json() for source in self.sources],
            "resources": [
                {"ref": item.ref, "origin": item.origin, "rendered": item in self.rendered}
                for item in self.contract.resources
            ],
        }
