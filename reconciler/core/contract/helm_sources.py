"""Where a GitOps repository keeps the GPU Operator's Helm values, and in which order they win.

Pure: documents and values come in as plain data, the adapter (adapters/helm/installs.py) reads files.
Sources (docs/helm.md quotes them with file:line):
- Flux helm-controller: valuesFrom in the order given, later over earlier, then spec.values over
  those; a reference with targetPath is set last, over everything, inline values included
  (docs/spec/v2/helmreleases.md:469-473, 537-539; fluxcd/pkg chartutil/values.go:148-255).
- Argo CD: parameters > valuesObject > values > valueFiles > the chart's values.yaml; valuesObject,
  when set, replaces values (docs/user-guide/helm.md:399-410; pkg/apis/application/v1alpha1/
  values.go:91-101); parameters are `helm --set` (`--set-string` with forceString), applied after
  every values file, the --set ones before the --set-string ones (util/helm/cmd.go:444-458; helm
  pkg/cli/values/options.go:44-82).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.contract import helm_chart

OPERATOR_CHART = "gpu-operator"
FLUX_API_VERSIONS = frozenset(f"helm.toolkit.fluxcd.io/{v}" for v in ("v2", "v2beta2", "v2beta1"))
ARGO_API_VERSION = "argoproj.io/v1alpha1"
DEFAULT_VALUES_KEY = "values.yaml"  # Flux: valuesKey defaults to values.yaml (helmreleases.md:481-482)
# The values the chart's driver templates read: a --set path under them that gpudrv cannot follow
# is an error, elsewhere a note (it cannot change the driver).
RENDERED_KEYS = frozenset({"driver", "clusterPolicy", "gpuCluster"})
_RELEASE = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+")
Path = tuple[str | int, ...]


class SpecError(ValueError):
    """A document gpudrv cannot read as its tool reads it; `path` leads to the culprit."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


def is_operator_chart(name: str) -> bool:
    """The operator's chart by name; a chart path in a GitRepository counts by its last segment."""
    return name.rstrip("/").rsplit("/", 1)[-1] == OPERATOR_CHART


def exact_release(version: str | None) -> str | None:
    """The version when it names one release (v25.3.4, 25.3.4); None for a range like 25.x or >=25."""
    if version is None:
        return None
    text = version.strip()
    return text if _RELEASE.fullmatch(text) else None


# What Flux's source-controller (internal/helm/repository/chart_repository.go GetChartVersion: an exact
# match, else semver.NewConstraint) and Argo CD (reposerver/repository/repository.go
# newHelmClientResolveRevision: helm.IsVersion, else semver.NewConstraint, else "invalid revision")
# resolve a chart version with: Masterminds/semver v3 (v3.4.0 constraints.go:180-224). A version, or
# comparisons joined by spaces or commas, `||` between alternatives, `A - B` ranges; x, X, * wildcards.
_CV = (
    r"v?[0-9xX*]+(?:\.[0-9xX*]+)?(?:\.[0-9xX*]+)?"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_OP = r"(?:!=|>=|=>|<=|=<|~>|[=><~^])?"
_AND = re.compile(rf"\s*{_OP}\s*{_CV}\s*(?:(?:\s+|,\s*){_OP}\s*{_CV}\s*)*")
_HYPHEN_RANGE = re.compile(rf"\s*({_CV})\s+-\s+({_CV})\s*")
_PARTIAL = re.compile(r"v?([0-9]+)(?:\.([0-9]+))?")  # v99, 26.9: a release line, or a major's lines


def is_version_or_range(text: str) -> bool:
    """Would Flux and Argo CD resolve `text` as a chart version (Masterminds/semver's NewConstraint)?"""
    rewritten = _HYPHEN_RANGE.sub(r" >= \1, <= \2 ", text)  # rewriteRange (constraints.go:589-601)
    return all(_AND.fullmatch(part) for part in rewritten.split("||"))


def chart_pin(written: str | None, lines: Sequence[tuple[int, int]]) -> tuple[str | None, str | None]:
    """What a chart version a HelmRelease or an Application writes pins: (the version whose os-tag rule
    applies, None when it pins none: not set, or a range; why it is no chart version at all, or None).

    One release (v25.3.4) pins it. `latest` or `banana` is no version and no range: Flux and Argo CD
    refuse it, and so does gpudrv. A partial version names release lines (`v25.3` is 25.3.x): of lines
    gpudrv knows (`lines`), it is a range like `>=25.3.0 <26`; of none (`v99`), it is pinned as written,
    so the os-tag rule refuses it as any release gpudrv does not know (core/images/os_tags.py)."""
    text = (written or "").strip()
    if not text:
        return None, None
    if exact_release(text) is not None:
        return text, None
    if not is_version_or_range(text):
        return None, "is neither a version nor a version range (as Flux and Argo CD read one)"
    partial = _PARTIAL.fullmatch(text)
    if partial is None:
        return None, None
    major, minor = int(partial[1]), None if partial[2] is None else int(partial[2])
    known = any(line[0] == major and minor in (None, line[1]) for line in lines)
    return (None if known else text), None


# --- helm --set, the part of pkg/strvals gpudrv follows ----------------------------------------------


class Unsupported(ValueError):
    """A --set expression outside what gpudrv follows (list indexes, several assignments)."""


def set_value(values: dict[str, Any], name: str, raw: str, *, string: bool) -> None:
    """`helm --set name=raw` (`--set-string` with `string`) into `values`: a dotted path (`\\.` is a
    dot in a key), each missing or non-map step made a map; the value typed as strvals' typedVal does
    (pkg/strvals/parser.go:528-558): true, false, null (None: a deletion), 0, and integers that do not
    start with 0; anything else stays a string. A list `{a,b}` is a list of such values."""
    keys = _keys(name)
    value: Any = _list(raw, string) if raw.startswith("{") and raw.endswith("}") else _scalar(raw, string)
    node = values
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def top_key(name: str) -> str:
    return _split(name)[0]


def _keys(name: str) -> list[str]:
    if not name or re.search(r"(?<!\\)[\[\]=,]", name):
        raise Unsupported(f"{name!r}: list indexes and several assignments are not read")
    keys = _split(name)
    if any(not key for key in keys):
        raise Unsupported(f"{name!r}: an empty key")
    return keys


def _split(name: str) -> list[str]:
    return [part.replace("\0", ".") for part in name.replace("\\.", "\0").split(".")]


def _scalar(raw: str, string: bool) -> Any:
    if re.search(r"(?<!\\),", raw):
        raise Unsupported(f"{raw!r}: a comma starts another assignment")
    text = raw.replace("\\,", ",")
    if string:
        return text
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if text == "0":
        return 0
    if text and text[0] != "0" and re.fullmatch(r"[+-]?[0-9]+", text) and abs(int(text)) < 2**63:
        return int(text)
    return text


def _list(raw: str, string: bool) -> list[Any]:
    inner = raw[1:-1]
    return [_scalar(item, string) for item in inner.split(",")] if inner else []


# --- Flux HelmRelease ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FluxReference:
    """One spec.valuesFrom item; `index` is its place in the list (for its line)."""

    index: int
    kind: str
    name: str
    key: str = DEFAULT_VALUES_KEY
    target_path: str = ""
    optional: bool = False
    literal: bool = False


@dataclass(frozen=True)
class FluxRelease:
    name: str
    chart: str  # spec.chart.spec.chart, or "" with a chartRef
    version: str | None  # spec.chart.spec.version
    version_path: Path
    chart_ref: tuple[str, str] | None  # (kind, name) of spec.chartRef
    source_kind: str  # spec.chart.spec.sourceRef.kind (HelmRepository, GitRepository, ...)
    values: Mapping[str, Any] = field(default_factory=dict)
    values_from: tuple[FluxReference, ...] = ()


def flux_release(document: Mapping[str, Any]) -> FluxRelease:
    name = str(_mapping(document.get("metadata"), ("metadata",)).get("name") or "")
    spec = _mapping(document.get("spec"), ("spec",))
    chart_spec = _mapping(
        _mapping(spec.get("chart"), ("spec", "chart")).get("spec"), ("spec", "chart", "spec")
    )
    reference = _mapping(spec.get("chartRef"), ("spec", "chartRef"))
    chart_ref = (str(reference.get("kind") or ""), str(reference.get("name") or "")) if reference else None
    version = chart_spec.get("version")
    source = _mapping(chart_spec.get("sourceRef"), ("spec", "chart", "spec", "sourceRef"))
    items = spec.get("valuesFrom") or []
    if not isinstance(items, list):
        raise SpecError(("spec", "valuesFrom"), "spec.valuesFrom must be a list")
    return FluxRelease(
        name,
        str(chart_spec.get("chart") or ""),
        None if version is None else str(version),
        ("spec", "chart", "spec", "version"),
        chart_ref,
        str(source.get("kind") or ""),
        dict(_mapping(spec.get("values"), ("spec", "values"))),
        tuple(_flux_reference(index, item) for index, item in enumerate(items)),
    )


def _flux_reference(index: int, item: Any) -> FluxReference:
    path: Path = ("spec", "valuesFrom", index)
    entry = _mapping(item, path)
    kind, name = entry.get("kind"), entry.get("name")
    if kind not in ("ConfigMap", "Secret") or not isinstance(name, str) or not name:
        raise SpecError(path, "spec.valuesFrom items need kind: ConfigMap or Secret and a name")
    return FluxReference(
        index,
        kind,
        name,
        str(entry.get("valuesKey") or DEFAULT_VALUES_KEY),
        str(entry.get("targetPath") or ""),
        entry.get("optional") is True,
        entry.get("literal") is True,
    )


@dataclass(frozen=True)
class Resolved:
    """A valuesFrom reference read: the values file (a mapping) or, with a targetPath, its text."""

    reference: FluxReference
    values: Mapping[str, Any] | None = None
    text: str = ""


def flux_values(resolved: Sequence[Resolved], inline: Mapping[str, Any]) -> dict[str, Any]:
    """The user values Flux gives Helm: the references without a targetPath merged in order, then the
    inline values, then each targetPath value set over all of them (the ones it affects are refused
    by set_value when gpudrv cannot follow them)."""
    layers = [item.values for item in resolved if not item.reference.target_path and item.values is not None]
    merged = helm_chart.merge(*layers, inline)
    for item in resolved:
        reference = item.reference
        if reference.target_path:
            text, string = _unquoted(item.text) if not reference.literal else (item.text, True)
            set_value(merged, reference.target_path, text, string=string)
    return merged


def _unquoted(text: str) -> tuple[str, bool]:
    """Flux's ReplacePathValue: a value in single or double quotes is set as a string, unquoted."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text.strip("'\""), True
    return text, False


# --- Argo CD Application -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    name: str
    value: str
    force_string: bool
    index: int


@dataclass(frozen=True)
class ArgoSource:
    path: Path  # where the source is in the Application
    chart: str
    repo_url: str
    target_revision: str | None
    source_path: str  # spec.source.path (a git source)
    ref: str  # spec.sources[].ref: the `$ref` other sources use
    value_files: tuple[str, ...] = ()
    values: str | None = None
    values_object: Mapping[str, Any] | None = None
    parameters: tuple[Parameter, ...] = ()
    ignore_missing: bool = False
    file_parameters: bool = False


def argo_sources(document: Mapping[str, Any]) -> tuple[ArgoSource, ...]:
    spec = _mapping(document.get("spec"), ("spec",))
    if spec.get("sources") is not None:
        items = spec["sources"]
        if not isinstance(items, list):
            raise SpecError(("spec", "sources"), "spec.sources must be a list")
        return tuple(_argo_source(("spec", "sources", index), item) for index, item in enumerate(items))
    if spec.get("source") is None:
        return ()
    return (_argo_source(("spec", "source"), spec["source"]),)


def _argo_source(path: Path, item: Any) -> ArgoSource:
    source = _mapping(item, path)
    helm = _mapping(source.get("helm"), (*path, "helm"))
    files = helm.get("valueFiles") or []
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise SpecError((*path, "helm", "valueFiles"), "helm.valueFiles must be a list of paths")
    values = helm.get("values")
    if values is not None and not isinstance(values, str):
        raise SpecError((*path, "helm", "values"), "helm.values must be a YAML string (or use valuesObject)")
    values_object = helm.get("valuesObject")
    revision = source.get("targetRevision")
    return ArgoSource(
        path,
        str(source.get("chart") or ""),
        str(source.get("repoURL") or ""),
        None if revision is None else str(revision),
        str(source.get("path") or ""),
        str(source.get("ref") or ""),
        tuple(str(name) for name in files),
        None if values is None else str(values),
        None if values_object is None else dict(_mapping(values_object, (*path, "helm", "valuesObject"))),
        _parameters(helm.get("parameters"), (*path, "helm", "parameters")),
        helm.get("ignoreMissingValueFiles") is True,
        bool(helm.get("fileParameters")),
    )


def _parameters(value: Any, path: Path) -> tuple[Parameter, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError(path, "helm.parameters must be a list of name/value pairs")
    found = []
    for index, item in enumerate(value):
        entry = _mapping(item, (*path, index))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError((*path, index), "a helm parameter needs a name")
        raw = entry.get("value")
        text = "" if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)
        found.append(Parameter(name, text, entry.get("forceString") is True, index))
    return tuple(found)


def argo_extra(source: ArgoSource, values: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The values Argo CD writes to its extra values file: valuesObject when it is set, else the
    parsed `values` string (values.go:91-101: valuesObject replaces values, they do not merge)."""
    return source.values_object if source.values_object is not None else values


def argo_values(
    layers: Sequence[Mapping[str, Any]], parameters: Sequence[Parameter]
) -> tuple[dict[str, Any], tuple[Parameter, ...]]:
    """The user values Argo CD gives Helm: the layers (valueFiles in order, then the extra values)
    merged, then the --set parameters, then the --set-string ones (a name given twice: the last).
    Returns the values and the parameters gpudrv could not follow outside the driver's keys (under
    them Unsupported is raised)."""
    merged = helm_chart.merge(*layers)
    skipped = []
    last = {parameter.name: parameter for parameter in parameters}
    ordered = sorted(last.values(), key=lambda parameter: (parameter.force_string, parameter.index))
    for parameter in ordered:
        try:
            set_value(merged, parameter.name, parameter.value, string=parameter.force_string)
        except Unsupported:
            if top_key(parameter.name) in RENDERED_KEYS:
                raise
            skipped.append(parameter)
    return merged, tuple(skipped)


def _mapping(value: Any, path: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"{'.'.join(str(part) for part in path)} must be a mapping")
    return value
