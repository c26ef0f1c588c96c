"""Argo CD Applications that install the operator's chart: their sources, valueFiles resolved inside
this repository, values, valuesObject and parameters (the precedence: core/contract/helm_sources.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.adapters.files import manifests
from reconciler.adapters.files.operator_contract import rules
from reconciler.adapters.helm.installs import Doc, Folder, Install, fail, render
from reconciler.adapters.helm.values_files import Layer, inside, normal_url, values_file, values_text
from reconciler.core.contract import helm_sources
from reconciler.core.contract.helm_sources import ArgoSource, SpecError, Unsupported, is_operator_chart

GLOB = frozenset("*?[")


def installs(here: Folder, doc: Doc) -> list[Install]:
    try:
        sources = helm_sources.argo_sources(doc.document)
    except SpecError as exc:
        raise doc.error(exc.path, f"Application: {exc}") from None
    doc = replace(doc, what=f"Application {(doc.document.get('metadata') or {}).get('name') or ''}")
    found = []
    for source in sources:
        if not source.chart and not source.source_path:
            continue  # a `ref:` source: values files for another source, no chart of its own
        at = doc.at(source.path)
        version_at = doc.at((*source.path, "targetRevision"))
        ours, version = _chart_version(here, source, (at, version_at), doc.what)
        if not ours:
            continue
        layers = _layers(here, doc, source, sources)
        values = _values(here, doc, source, layers)
        found.append(render(here, doc.what, at, layers, version, version_at, values=values))
    return found


def _chart_version(
    here: Folder, source: ArgoSource, where: tuple[str, str], what: str
) -> tuple[bool, str | None]:
    """Is it the operator's chart, and the version it pins (None: not pinned, with a note; no version at
    all, like `latest`: one error at targetRevision's line, as Argo CD fails on it)? `where`: the source's
    file:line and its targetRevision's."""
    at, version_at = where
    if source.chart:
        if not is_operator_chart(source.chart):
            here.notes.append(f"{at}: {what} installs chart {source.chart!r}, not gpu-operator: ignored")
            return False, None
        written: str | None = source.target_revision
    else:
        written = _chart_yaml(here, source, at)
        if written is None:
            here.notes.append(f"{at}: {what}: {source.source_path} is not the gpu-operator chart: ignored")
            return False, None
    version, problem = helm_sources.chart_pin(written, rules().lines)
    if problem is not None:
        shown = version_at if source.chart else at
        raise fail(
            shown, f"{what}: chart version {written!r} {problem}; pin the release you run, like v25.3.4"
        )
    if version is None:
        here.notes.append(
            f"{at}: {what}: the gpu-operator chart version is not pinned here ({written!r} is not one "
            "release); pin it, or set operatorVersion in gpudrv.yaml"
        )
    return True, version


def _chart_yaml(here: Folder, source: ArgoSource, at: str) -> str | None:
    """A git source's chart: its Chart.yaml's version when it is the operator's chart, else None."""
    if here.root is None:
        return None
    chart = inside(here.root, f"{source.source_path}/Chart.yaml", "the source path", at)
    if not chart.is_file():
        return None
    document = next(iter(manifests.load_documents(chart)), (1, None))[1]
    if not isinstance(document, dict) or document.get("name") != helm_sources.OPERATOR_CHART:
        return None
    return str(document.get("version") or "")


def _layers(here: Folder, doc: Doc, source: ArgoSource, sources: tuple[ArgoSource, ...]) -> list[Layer]:
    """valueFiles in order, then valuesObject or values (one of them: valuesObject replaces values)."""
    layers = []
    for index, name in enumerate(source.value_files):
        at = doc.at((*source.path, "helm", "valueFiles", index))
        for target in _value_files(here, source, sources, name, (doc.what, at)):
            layers.append(values_file(target))
    helm = (*source.path, "helm")
    if source.values_object is not None:
        if source.values is not None:
            here.notes.append(f"{doc.at(helm)}: {doc.what}: helm.values is ignored: valuesObject replaces it")
        layers.append(
            Layer(source.values_object, str(doc.path), doc.document, (*helm, "valuesObject"), doc.line)
        )
    elif source.values:
        key_line = doc.line_at((*helm, "values"))
        values, parsed = values_text(source.values, str(doc.path), key_line + 1)
        extra = helm_sources.argo_extra(source, values)
        layers.append(Layer(extra or {}, str(doc.path), parsed, offset=key_line))
    return layers


def _value_files(
    here: Folder, source: ArgoSource, sources: tuple[ArgoSource, ...], name: str, where: tuple[str, str]
) -> list[Path]:
    """The files a valueFiles entry names in this repository (a glob: each match, in lexical order);
    a file outside it, a missing one (unless ignoreMissingValueFiles) or one inside the chart
    package is one error. `where`: the Application, and the entry's file:line."""
    what, at = where
    subject = f"{what}: helm.valueFiles {name!r}"
    if here.root is None:
        raise fail(at, f"{subject}: {here.path} is not in a git repository to find it in")
    if name.startswith("$"):
        ref, _, rest = name[1:].partition("/")
        _check_ref(here, sources, ref, (subject, at))
        relative = rest
    elif source.chart:
        raise fail(
            at,
            f"{subject} is a file inside the chart package, which gpudrv does not have; keep it in this "
            "repository and name it through a ref source ($values/...)",
        )
    else:
        relative = f"{source.source_path}/{name}"
    if GLOB & set(relative):
        root = files.absolute(here.root).resolve()
        matches = sorted(p for p in root.glob(relative.lstrip("/")) if p.is_file())
        found = [inside(here.root, str(p.relative_to(root)), "helm.valueFiles", at) for p in matches]
    else:
        target = inside(here.root, relative, "helm.valueFiles", at)
        found = [target] if target.is_file() else []
    if not found and not source.ignore_missing:
        raise fail(
            at, f"{subject}: no such file in the repository (ignoreMissingValueFiles: true leaves it out)"
        )
    return found


def _check_ref(here: Folder, sources: tuple[ArgoSource, ...], ref: str, where: tuple[str, str]) -> None:
    """`$ref/...` must name a source of this Application that is this repository (`where`: what is
    checked, and its file:line)."""
    subject, at = where
    named = next((item for item in sources if item.ref == ref), None)
    if named is None:
        raise fail(at, f"{subject}: no source in spec.sources has ref: {ref}")
    remotes = here.remote_urls()
    if remotes and normal_url(named.repo_url) not in remotes:
        raise fail(
            at,
            f"{subject}: ref {ref} is {named.repo_url}, not this repository ({', '.join(remotes)}): "
            "gpudrv reads values files of the fleet repository only",
        )


def _values(here: Folder, doc: Doc, source: ArgoSource, layers: list[Layer]) -> dict[str, Any]:
    """The layers merged, then the parameters; each parameter becomes a layer too, for the line of
    the one that set the driver's version."""
    try:
        values, skipped = helm_sources.argo_values([layer.values for layer in layers], source.parameters)
    except Unsupported as exc:
        raise doc.error((*source.path, "helm", "parameters"), f"{doc.what}: helm.parameters {exc}") from None
    for parameter in source.parameters:
        at = doc.line_at((*source.path, "helm", "parameters", parameter.index))
        if parameter in skipped:
            here.notes.append(
                f"{doc.path}:{at}: {doc.what}: parameter {parameter.name!r} not read (no driver value)"
            )
            continue
        scratch: dict[str, Any] = {}
        helm_sources.set_value(scratch, parameter.name, parameter.value, string=parameter.force_string)
        layers.append(Layer(scratch, str(doc.path), line=at))
    return values
