"""The GPU Operator installed from its Helm chart, read from the fleet folder: a Flux HelmRelease, an
Argo CD Application, or gpudrv.yaml's `helm:` values files. Each becomes the driver resources the
chart renders (core/contract/helm_chart.py), read like a declared ClusterPolicy or NVIDIADriver, with the
HelmRelease's or Application's file:line as their origin (the precedence: core/contract/helm_sources.py).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler.adapters.files import config, manifests, positions
from reconciler.adapters.files.operator_contract import rules
from reconciler.adapters.helm import chart_data
from reconciler.adapters.helm.values_files import Layer, last_origin, values_file, values_text
from reconciler.core.contract import helm_chart, helm_sources, operator
from reconciler.core.contract.helm_sources import SpecError, Unsupported, is_operator_chart
from reconciler.core.contract.operator import DriverResource
from reconciler.errors import GpudrvError

KINDS = ("HelmRelease", "Application", "ConfigMap", "Secret", "OCIRepository", "HelmChart")
Located = tuple[Path, int, dict[str, Any]]


@dataclass(frozen=True)
class Install:
    """One Helm installation of the operator's chart and what it renders."""

    what: str  # "HelmRelease gpu-operator", "Application gpu-operator", "gpudrv.yaml helm"
    origin: str  # file:line of the document (or of gpudrv.yaml's helm:)
    chart_version: str | None  # the release the chart pins; None when it is not pinned here
    version_origin: str  # file:line of that version
    resources: tuple[DriverResource, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()  # (message, file:line): what the API server would refuse


@dataclass(frozen=True)
class Installs:
    installs: tuple[Install, ...] = ()
    notes: tuple[str, ...] = ()  # one line each, for stderr: charts ignored, versions not pinned

    @property
    def resources(self) -> list[DriverResource]:
        return [item for install in self.installs for item in install.resources]

    @property
    def pinned(self) -> Install | None:
        """The installation whose chart version picks the os-tag rule (the first that pins one)."""
        return next((install for install in self.installs if install.chart_version), None)


@dataclass
class Folder:
    """The fleet folder's documents of KINDS, and where the repository is (for Argo CD's files)."""

    path: Path
    documents: dict[str, list[Located]] = field(default_factory=dict)
    root: Path | None = None  # the repository's working tree (None: not in one)
    remote_urls: Callable[[], tuple[str, ...]] = tuple
    notes: list[str] = field(default_factory=list)

    def find(self, kind: str, name: str) -> Located | None:
        for located in self.documents.get(kind, []):
            if str((located[2].get("metadata") or {}).get("name") or "") == name:
                return located
        return None


@dataclass(frozen=True)
class Doc:
    """A HelmRelease or Application found in the folder: where it is, for lines and errors."""

    path: Path
    line: int
    document: dict[str, Any]
    what: str = ""

    def line_at(self, keys: Sequence[str | int]) -> int:
        return positions.line_of(self.document, keys, self.line)

    def at(self, keys: Sequence[str | int] = ()) -> str:
        return f"{self.path}:{self.line_at(keys)}"

    def error(self, keys: Sequence[str | int], message: str) -> GpudrvError:
        return GpudrvError(message, file=str(self.path), line=self.line_at(keys))


def fail(origin: str, message: str) -> GpudrvError:
    """One error at `file:line`."""
    file, _, line = origin.rpartition(":")
    return GpudrvError(message, file=file, line=int(line))


def scan(folder: Path) -> dict[str, list[Located]]:
    found: dict[str, list[Located]] = {}
    for path in manifests.manifest_files(folder):
        for line, document in manifests.documents_of_kinds(path, KINDS):
            found.setdefault(str(document["kind"]), []).append((path, line, document))
    return found


def read(
    folder: Path,
    settings: config.HelmValues | None = None,
    root: Path | None = None,
    remote_urls: Callable[[], tuple[str, ...]] = tuple,
) -> Installs:
    """Every installation of the operator's chart under `folder` (and gpudrv.yaml's `helm:`)."""
    here = Folder(folder, scan(folder), root, remote_urls)
    installs: list[Install] = []
    for path, line, document in here.documents.get("HelmRelease", []):
        if document.get("apiVersion") in helm_sources.FLUX_API_VERSIONS:
            installs.extend(_found(_flux(here, Doc(path, line, document))))
    for path, line, document in here.documents.get("Application", []):
        if document.get("apiVersion") == helm_sources.ARGO_API_VERSION:
            from reconciler.adapters.helm import argo  # only a fleet with Applications pays for it

            installs.extend(argo.installs(here, Doc(path, line, document)))
    if settings is not None:
        layers = [values_file(name) for name in settings.values_files]
        what, version = "gpudrv.yaml helm", settings.chart_version
        installs.append(render(here, what, settings.origin, layers, version, settings.version_origin))
    return Installs(tuple(installs), tuple(here.notes))


def _found(install: Install | None) -> list[Install]:
    return [] if install is None else [install]


# --- Flux ------------------------------------------------------------------------------------------------


def _flux(here: Folder, doc: Doc) -> Install | None:
    try:
        release = helm_sources.flux_release(doc.document)
    except SpecError as exc:
        raise doc.error(exc.path, f"HelmRelease: {exc}") from None
    doc = replace(doc, what=f"HelmRelease {release.name}")
    chart = _flux_chart(here, release, doc)
    if chart is None:
        return None
    version, version_origin = chart
    layers, resolved = _flux_layers(here, release, doc)
    try:
        values = helm_sources.flux_values(resolved, release.values)
    except Unsupported as exc:
        raise doc.error((), f"{doc.what}: valuesFrom targetPath {exc}") from None
    return render(here, doc.what, doc.at(), layers, version, version_origin, values=values)


def _flux_chart(here: Folder, release: helm_sources.FluxRelease, doc: Doc) -> tuple[str | None, str] | None:
    """(the chart version, its file:line), or None when the chart is not the operator's (a note)."""
    if release.chart_ref is None:
        if not is_operator_chart(release.chart):
            _ignored(here, doc.at(), doc.what, release.chart)
            return None
        at = doc.at(release.version_path)
        if release.source_kind in ("GitRepository", "Bucket"):
            _unknown(here, at, doc.what, f"a chart from a {release.source_kind} has its Chart.yaml's version")
            return None, at
        return _pinned(here, at, doc.what, release.version), at
    kind, name = release.chart_ref
    source = here.find(kind, name)
    if source is None:
        if not (is_operator_chart(name) or is_operator_chart(release.name)):
            _ignored(here, doc.at(), doc.what, f"{kind}/{name}")
            return None
        _unknown(here, doc.at(), doc.what, f"its chartRef {kind}/{name} is not in {here.path}")
        return None, doc.at()
    return _chart_source(here, doc.what, Doc(*source))


def _chart_source(here: Folder, what: str, source: Doc) -> tuple[str | None, str] | None:
    """The chart and version of a chartRef's OCIRepository (spec.url, spec.ref.tag) or HelmChart
    (spec.chart, spec.version)."""
    spec = _dict(source.document.get("spec"))
    keys: tuple[str, ...] = ("spec", "version")
    chart, version = str(spec.get("chart") or ""), spec.get("version")
    if source.document["kind"] == "OCIRepository":
        keys, chart, version = (
            ("spec", "ref", "tag"),
            str(spec.get("url") or ""),
            _dict(spec.get("ref")).get("tag"),
        )
    if not is_operator_chart(chart):
        _ignored(here, source.at(), what, chart)
        return None
    at = source.at(keys)
    tag = source.document["kind"] == "OCIRepository"
    return _pinned(here, at, what, None if version is None else str(version), tag=tag), at


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pinned(here: Folder, at: str, what: str, version: str | None, *, tag: bool = False) -> str | None:
    """The release the chart version at `at` pins (core/contract/helm_sources.py chart_pin), a note when
    it pins none; one error at `at` when it is no version at all (`latest`, `banana`: Flux fails on it).
    An OCIRepository's tag is an OCI tag, not a version expression: `latest` is one (a moving one)."""
    if tag:
        pinned, problem = helm_sources.exact_release(version), None
    else:
        pinned, problem = helm_sources.chart_pin(version, rules().lines)
    if problem is not None:
        raise fail(at, f"{what}: chart version {version!r} {problem}; pin the release you run, like v25.3.4")
    if pinned is None:
        detail = "no version is set" if version is None else f"{version!r} is not one release"
        _unknown(here, at, what, detail)
    return pinned


def _unknown(here: Folder, at: str, what: str, detail: str) -> None:
    here.notes.append(
        f"{at}: {what}: the gpu-operator chart version is not pinned here ({detail}); pin it, or set "
        "operatorVersion in gpudrv.yaml, for the os-tag rule of the release you run"
    )


def _ignored(here: Folder, origin: str, what: str, chart: str) -> None:
    """A chart that is not the operator's: a note, and nothing rendered."""
    chart_name = helm_sources.OPERATOR_CHART
    here.notes.append(f"{origin}: {what} installs chart {chart!r}, not {chart_name}: ignored")


def _flux_layers(
    here: Folder, release: helm_sources.FluxRelease, doc: Doc
) -> tuple[list[Layer], list[helm_sources.Resolved]]:
    """The valuesFrom references read from the folder (in order), and the layers for their lines:
    the references without a targetPath, the inline values, then the targetPath ones."""
    merged, targeted, resolved = [], [], []
    for reference in release.values_from:
        item = doc.at(("spec", "valuesFrom", reference.index))
        data = _reference_data(here, reference, doc.what, item)
        if data is None:
            continue
        text, file, key_line = data
        if not reference.target_path:
            values, parsed = values_text(text, file, key_line + 1)
            merged.append(Layer(values, file, parsed, offset=key_line))
            resolved.append(helm_sources.Resolved(reference, values=values))
            continue
        scratch: dict[str, Any] = {}
        try:
            helm_sources.set_value(scratch, reference.target_path, text, string=True)
        except Unsupported as exc:
            if helm_sources.top_key(reference.target_path) in helm_sources.RENDERED_KEYS:
                raise fail(item, f"{doc.what}: targetPath {exc}") from None
            here.notes.append(f"{item}: {doc.what}: targetPath {exc}: not read (no driver value)")
            continue
        targeted.append(Layer(scratch, str(doc.path), line=int(item.rpartition(":")[2])))
        resolved.append(helm_sources.Resolved(reference, text=text))
    inline = Layer(release.values, str(doc.path), doc.document, ("spec", "values"), doc.line)
    return [*merged, inline, *targeted], resolved


def _reference_data(
    here: Folder, reference: helm_sources.FluxReference, what: str, origin: str
) -> tuple[str, str, int] | None:
    """The text of the reference's key, its file and the line of the key; None when an optional
    reference is not there (Flux leaves it out)."""
    subject = f"{what}: valuesFrom {reference.kind} {reference.name}"
    found = here.find(reference.kind, reference.name)
    if found is None:
        if reference.optional:
            here.notes.append(f"{origin}: {subject} is not in {here.path}; it is optional: left out")
            return None
        raise fail(
            origin,
            f"{subject} is not in {here.path}: gpudrv reads the values from the fleet folder "
            "(mark it optional: true if the cluster may lack it)",
        )
    path, doc_line, document = found
    text = _key_text(path, doc_line, document, reference.key)
    if text is None:
        if reference.optional:
            here.notes.append(f"{origin}: {subject} has no key {reference.key!r}; it is optional: left out")
            return None
        raise fail(origin, f"{subject} has no key {reference.key!r}")
    section = "stringData" if reference.key in (document.get("stringData") or {}) else "data"
    return text, str(path), positions.line_of(document, (section, reference.key), doc_line)


def _key_text(path: Path, line: int, document: dict[str, Any], key: str) -> str | None:
    if document["kind"] == "Secret":
        if "sops" in document:
            raise GpudrvError("a SOPS-encrypted Secret: gpudrv cannot read it", file=str(path), line=line)
        plain = document.get("stringData") or {}
        if isinstance(plain, Mapping) and key in plain:
            return str(plain[key])
    data = document.get("data") or {}
    if not isinstance(data, Mapping) or key not in data:
        return None
    if document["kind"] == "ConfigMap":
        return str(data[key])
    try:
        return base64.b64decode(str(data[key]), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        at = positions.line_of(document, ("data", key), line)
        message = f"Secret data {key!r} is not base64 of UTF-8 text"
        raise GpudrvError(message, file=str(path), line=at) from None


# --- the chart's rendering, read like a declared resource ---------------------------------------------


def render(  # noqa: PLR0917 (each is one fact of the installation)
    here: Folder,
    what: str,
    origin: str,
    layers: Sequence[Layer],
    version: str | None,
    version_origin: str,
    *,
    values: dict[str, Any] | None = None,
) -> Install:
    """What the chart at `version` renders from the values (the layers merged, unless given)."""
    merged = helm_chart.merge(*(layer.values for layer in layers)) if values is None else values
    # A version not pinned here: the newest chart gpudrv knows (its render says so in a note).
    rendered = chart_data.render(merged, version or chart_data.charts()[-1].version)
    driver_origin = last_origin(layers) or version_origin
    problems = [(f"{what}: {problem}", driver_origin) for problem in rendered.problems]
    here.notes.extend(f"{origin}: {what}: {note}" for note in rendered.notes)
    resources = []
    for document in (rendered.cluster_policy, rendered.nvidia_driver):
        if document is not None:
            resources.append(_resource(what, document, origin, driver_origin, problems))
    return Install(what, origin, version, version_origin, tuple(resources), tuple(problems))


def _resource(
    what: str, document: dict[str, Any], origin: str, driver_origin: str, problems: list[tuple[str, str]]
) -> DriverResource:
    """The rendered document read as a declared one. A version the CRD refuses (an unquoted 550 in
    the v25.3.4 NVIDIADriver template) is a problem of the PR; the image is still computed from it."""
    try:
        item = operator.resource(document)
    except operator.ResourceError as exc:
        kind = operator.Kind(str(document.get("kind")))
        if tuple(exc.path) != operator.version_path(kind):
            raise fail(origin, f"{what} renders a {kind} gpudrv cannot read: {exc}") from None
        if not problems:
            problems.append((f"{what} renders {kind}: {exc}; the API server refuses it", driver_origin))
        spec = dict(document.get("spec") or {})
        spec = _stringified(spec, operator.version_path(kind)[1:])
        item = operator.resource({**document, "spec": spec})
    return replace(operator.with_origins(item, origin, driver_origin), spec=dict(item.spec))


def _stringified(spec: dict[str, Any], keys: Sequence[str | int]) -> dict[str, Any]:
    if len(keys) == 1:
        return {**spec, str(keys[0]): _text(spec[str(keys[0])])}
    inner = spec.get(str(keys[0]))
    return {**spec, str(keys[0]): _stringified(dict(inner or {}), keys[1:])}


def _text(value: Any) -> str:
    """The number as the template printed it (550, 550.9): what the user meant as the version."""
    return str(value).lower() if isinstance(value, bool) else str(value)
