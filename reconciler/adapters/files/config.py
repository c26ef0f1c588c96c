"""`gpudrv.yaml`: the fleet repository's defaults for gpudrv's flags (schemas/gpudrv-config.schema.json).

Found as `--config PATH`, else `$GPUDRV_CONFIG`, else the nearest `gpudrv.yaml` from the current
directory up to the repository root (the directory with `.git`; never above it; outside a repository
only the current directory). A flag given on the command line always wins over the file. Relative
paths in the file are read from the file's own directory, so a step may run from anywhere in the
repository; so are gpudrv's own defaults (matrix/support-matrix.csv) when the file was found by that
walk, since its directory is then the fleet repository's root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters.files import manifests, positions, schemas
from reconciler.core.base import label_selector
from reconciler.core.base.label_selector import LabelSelector
from reconciler.errors import GpudrvError

DEFAULT_NAME = "gpudrv.yaml"
ENVIRONMENT = "GPUDRV_CONFIG"


@dataclass(frozen=True)
class Config:
    """What the file sets; None where it is silent. `path` is None when no file was read."""

    path: Path | None = None
    fleet: Path | None = None
    root: Path = Path()  # where gpudrv's default paths are read: the found gpudrv.yaml's directory
    matrix: Path | None = None
    operator_version: str | None = None
    registry: str | None = None
    upstream: str | None = None  # matrix fill's upstream registry
    helm: HelmValues | None = None  # helm: a values file beside a pinned chart version
    clusters: tuple[ClusterEntry, ...] = ()  # clusters: the ones --cluster and --all-clusters pick


@dataclass(frozen=True)
class ClusterEntry:
    """One of gpudrv.yaml's `clusters:`: a name, how to reach it, and what it has of its own."""

    name: str
    origin: str  # gpudrv.yaml:line of its entry
    context: str | None = None
    kubeconfig: Path | None = None
    fleet: Path | None = None
    operator_version: str | None = None
    selector: LabelSelector | None = None


@dataclass(frozen=True)
class HelmValues:
    """gpudrv.yaml's `helm:`: the operator installed from its chart with these values files (in
    order, later over earlier, as `helm -f a -f b`) at this chart version."""

    values_files: tuple[Path, ...]
    chart_version: str | None
    origin: str  # gpudrv.yaml:line of `helm:`
    version_origin: str  # gpudrv.yaml:line of chartVersion (or of `helm:`)


def find(explicit: str | None) -> Path | None:
    """The config file to read: the flag, the environment variable, or the nearest gpudrv.yaml."""
    for given, what in ((explicit, "--config"), (os.environ.get(ENVIRONMENT), ENVIRONMENT)):
        if given is None:
            continue
        if not given.strip():
            raise GpudrvError(f"{what}: empty path (is a variable unset?)")
        return Path(given)
    return discover()


def discover(start: Path | None = None) -> Path | None:
    """gpudrv.yaml in `start` (default: the current directory) or a parent, up to the repository root
    and never above it; outside a repository only in `start`. Relative to `start`, like ../gpudrv.yaml."""
    here = (start or Path()).absolute()
    folders = [here, *here.parents]
    root = next((index for index, folder in enumerate(folders) if (folder / ".git").exists()), 0)
    for depth, folder in enumerate(folders[: root + 1]):
        if (folder / DEFAULT_NAME).is_file():
            return (start or Path()) / Path(*[".."] * depth) / DEFAULT_NAME
    return None


def searched(start: Path | None = None) -> str:
    """Where discover looks, for messages: `in /x/y or above it up to /x` or `in /x/y`."""
    here = (start or Path()).absolute()
    root = next((folder for folder in [here, *here.parents] if (folder / ".git").exists()), None)
    if root is None or root == here:
        return f"in {here}"
    return f"in {here} or above it up to the repository root {root}"


def load(explicit: str | None = None) -> Config:
    path = find(explicit)
    if path is None:
        return Config()
    documents = list(manifests.load_documents(path))
    if len(documents) != 1 or not isinstance(documents[0][1], dict):
        raise GpudrvError(
            "a gpudrv config is one YAML mapping, like: matrix: matrix/x.csv", file=str(path), line=1
        )
    line, document = documents[0]
    _validate(path, document, line)
    base = path.parent
    return Config(
        path=path,
        root=base if explicit is None and os.environ.get(ENVIRONMENT) is None else Path(),
        fleet=_path(base, document.get("fleet")),
        matrix=_path(base, document.get("matrix")),
        operator_version=_text(document.get("operatorVersion")),
        registry=_text(document.get("registry")),
        upstream=_text(document.get("upstream")),
        helm=_helm(path, base, document, line),
        clusters=_clusters(path, base, document, line),
    )


def _clusters(path: Path, base: Path, document: dict[str, Any], line: int) -> tuple[ClusterEntry, ...]:
    """`clusters:`, each name once (the schema checked each entry's keys and values)."""
    found: dict[str, ClusterEntry] = {}
    for index, entry in enumerate(document.get("clusters") or []):
        at = positions.line_of(document, ["clusters", index], line)
        name = str(entry["name"])
        if name in found:
            raise GpudrvError(
                f"clusters: {name!r} is named twice (first at {found[name].origin})", file=str(path), line=at
            )
        found[name] = ClusterEntry(
            name,
            f"{path}:{at}",
            _text(entry.get("context")),
            _path(base, entry.get("kubeconfig")),
            _path(base, entry.get("fleet")),
            _text(entry.get("operatorVersion")),
            _selector(entry.get("selector"), f"clusters: {name}: selector", path, at),
        )
    return tuple(found.values())


def _helm(path: Path, base: Path, document: dict[str, Any], line: int) -> HelmValues | None:
    helm = document.get("helm")
    if helm is None:
        return None
    at = positions.line_of(document, ["helm"], line)
    version_at = positions.line_of(document, ["helm", "chartVersion"], at)
    listed = [_path(base, name) for name in helm.get("valuesFiles") or []]
    return HelmValues(
        tuple(name for name in listed if name is not None),
        _text(helm.get("chartVersion")),
        f"{path}:{at}",
        f"{path}:{version_at}",
    )


def _validate(path: Path, document: dict[str, Any], line: int) -> None:
    import jsonschema  # only when there is a file to check: a run without one never pays for it

    schema_document = schemas.load("gpudrv-config")
    validator = jsonschema.Draft202012Validator(schema_document)
    errors = sorted(validator.iter_errors(document), key=lambda error: list(map(str, error.path)))
    if not errors:
        return
    error = errors[0]
    at = positions.line_of(document, list(error.path), line)
    where = ".".join(str(part) for part in error.path)
    if error.validator == "additionalProperties":
        known = sorted(schema_document["properties"])
        extra = next(str(key) for key in document if key not in known)
        at = positions.line_of(document, [extra], line)
        raise GpudrvError(f"unknown key {extra!r} (known keys: {', '.join(known)})", file=str(path), line=at)
    schema: Any = error.schema
    description = schema.get("description") if isinstance(schema, dict) else None
    why = f"must be {description}" if description and error.validator != "type" else error.message
    raise GpudrvError(f"{where or 'the file'}: {why}", file=str(path), line=at)


def _selector(value: Any, what: str, path: Path, line: int) -> LabelSelector | None:
    if value is None:
        return None
    try:
        return label_selector.parse(str(value))
    except label_selector.SelectorError as exc:
        raise GpudrvError(f"{what} {exc}", file=str(path), line=line) from None


def _path(base: Path, value: Any) -> Path | None:
    if value is None:
        return None
    return Path(value) if base == Path() else base / str(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
