"""What the GPU Operator's Helm chart renders for the driver: the ClusterPolicy's `spec.driver` and the
default NVIDIADriver, from the user's values and the chart version, without Helm.

The chart is data (reconciler/data/gpu-operator-chart.json, parsed by `parse_charts`; the adapter
`reconciler.adapters.helm.chart_data` loads it): per chart version its values.yaml defaults and its
templates' driver fields, each with its template file:line. `render` plays those templates the way
Helm v3.22.0 does (reconciler/core/contract/helm_values.py has the value semantics): the `if` guards, `quote`,
`default` (which takes 0 and false for empty), the unquoted text of a value read again as YAML (so
`version: {{ .Values.driver.version }}` with "550" gives the integer 550), a nil parent failing the
render, and the chart's `fail`s. It then checks each rendered field against the type the chart's own
CRD gives it, as the API server would. tests/helm/test_chart_differential.py holds it to `helm template`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.contract.helm_values import (
    coalesce,
    go_text,
    json_type,
    merge,
    plain_scalar_problem,
    resolve_plain,
    truthy,
)

__all__ = ["Chart", "ChartDataError", "Charts", "Rendered", "merge", "parse_charts", "pick", "render"]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")


class ChartDataError(ValueError):
    """The chart data file is not what `parse_charts` expects."""


@dataclass(frozen=True)
class Chart:
    """One chart version: its defaults (a values tree), the templates as field trees, its fails."""

    version: str
    source: str
    defaults: Mapping[str, Any]
    default_lines: Mapping[str, int]
    cluster_policy: Mapping[str, Any]
    nvidia_driver: Mapping[str, Any]
    fails: tuple[Mapping[str, Any], ...]
    # Other versions whose chart differs only in lines gpudrv does not read (checked with git diff).
    same_content: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, int, int]:
        return version_key(self.version) or (0, 0, 0)

    def covers(self, wanted: tuple[int, int, int]) -> bool:
        return wanted == self.key or any(version_key(v) == wanted for v in self.same_content)


Charts = tuple[Chart, ...]


@dataclass(frozen=True)
class Rendered:
    """What the chart renders. `chart_version` is the known chart whose templates were used;
    `problems` are what Helm or the API server would refuse; `notes` what a person should know."""

    chart_version: str
    cluster_policy: dict[str, Any] | None
    nvidia_driver: dict[str, Any] | None
    problems: tuple[str, ...]
    notes: tuple[str, ...]


def version_key(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


# --------------------------------------------------------------------------
# The data
# --------------------------------------------------------------------------


def parse_charts(data: Any) -> Charts:
    """The parsed chart data file, oldest chart first; ChartDataError names what is wrong."""
    if not isinstance(data, Mapping) or not isinstance(data.get("charts"), list) or not data["charts"]:
        raise ChartDataError("expected an object with a non-empty list `charts`")
    charts = [_parse_chart(i, c) for i, c in enumerate(data["charts"])]
    return tuple(sorted(charts, key=lambda c: c.key))


def _parse_chart(index: int, raw: Any) -> Chart:
    where = f"charts[{index}]"
    if not isinstance(raw, Mapping):
        raise ChartDataError(f"{where}: expected an object")
    for key in ("version", "source"):
        if not isinstance(raw.get(key), str):
            raise ChartDataError(f"{where}.{key}: expected a string")
    if version_key(raw["version"]) is None:
        raise ChartDataError(f"{where}.version: not X.Y.Z: {raw['version']!r}")
    for key in ("defaults", "default_lines", "cluster_policy", "nvidia_driver"):
        if not isinstance(raw.get(key), Mapping):
            raise ChartDataError(f"{where}.{key}: expected an object")
    for doc in ("cluster_policy", "nvidia_driver"):
        _check_document(f"{where}.{doc}", raw[doc])
    fails = raw.get("fails", [])
    if not isinstance(fails, list) or not all(isinstance(f, Mapping) and "message" in f for f in fails):
        raise ChartDataError(f"{where}.fails: expected a list of objects with a message")
    same = raw.get("same_content", [])
    if not isinstance(same, list) or not all(isinstance(v, str) and version_key(v) for v in same):
        raise ChartDataError(f"{where}.same_content: expected a list of X.Y.Z versions")
    return Chart(
        version=raw["version"],
        source=raw["source"],
        defaults=raw["defaults"],
        default_lines=raw["default_lines"],
        cluster_policy=raw["cluster_policy"],
        nvidia_driver=raw["nvidia_driver"],
        fails=tuple(fails),
        same_content=tuple(same),
    )


def _check_document(where: str, doc: Mapping[str, Any]) -> None:
    for key in ("template", "apiVersion", "kind", "name", "crd"):
        if not isinstance(doc.get(key), str):
            raise ChartDataError(f"{where}.{key}: expected a string")
    guards = doc.get("guards")
    if not isinstance(guards, list) or not all(isinstance(g, Mapping) and "if" in g for g in guards):
        raise ChartDataError(f"{where}.guards: expected a list of objects with an `if`")
    _check_nodes(f"{where}.spec", doc.get("spec"))


def _check_nodes(where: str, nodes: Any) -> None:
    if not isinstance(nodes, list):
        raise ChartDataError(f"{where}: expected a list of fields")
    for i, node in enumerate(nodes):
        here = f"{where}[{i}]"
        if not isinstance(node, Mapping) or not isinstance(node.get("line", node.get("if_line")), int):
            raise ChartDataError(f"{here}: expected an object with a line")
        if "fields" in node:
            _check_nodes(f"{here}.fields", node["fields"])
        elif not isinstance(node.get("key"), str) or not ("value" in node or "literal" in node):
            raise ChartDataError(f"{here}: a field needs a key and a value or a literal")


def pick(charts: Charts, chart_version: str) -> tuple[Chart, str | None]:
    """The chart data for a version: the entry for that X.Y.Z (its own or one of its `same_content`), else
    the nearest older entry, else the oldest, with a note saying plainly the version is not modelled."""
    wanted = version_key(chart_version)
    if wanted is None:
        newest = charts[-1]
        return (
            newest,
            f"chart version {chart_version!r} is not X.Y.Z: read as v{newest.version}, the newest known",
        )
    for chart in charts:
        if chart.covers(wanted):
            return chart, None
    older = [c for c in charts if c.key < wanted]
    chart = older[-1] if older else charts[0]
    how = "the nearest older known chart" if older else "the oldest known chart (none is older)"
    return (
        chart,
        f"chart v{'.'.join(map(str, wanted))} is not modelled: read with v{chart.version}'s templates, {how};"
        " its driver fields, defaults and guards may differ from what this shows",
    )


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------


class _TemplateError(Exception):
    """Helm stops rendering: a nil parent, a field of a non-map, or the chart's `fail`."""


def render(values: Mapping[str, Any], chart_version: str, charts: Charts) -> Rendered:
    """The driver documents the chart renders from the user's values (already merged, see `merge`).

    The chart's defaults are added here (`coalesce`, so a None deletes a default). A failed render
    gives no documents and the reason in `problems`.
    """
    chart, note = pick(charts, chart_version)
    notes = [note] if note else []
    full = coalesce(values, chart.defaults)
    problems: list[str] = []
    try:
        docs = _run_templates(full, chart, problems)
    except _TemplateError as exc:
        return Rendered(chart.version, None, None, (f"helm template fails: {exc}",), tuple(notes))
    cluster_policy, nvidia_driver = docs["cluster_policy"], docs["nvidia_driver"]
    notes += _quirk_notes(values, full, nvidia_driver is not None)
    return Rendered(chart.version, cluster_policy, nvidia_driver, tuple(problems), tuple(notes))


def _run_templates(
    values: Mapping[str, Any], chart: Chart, problems: list[str]
) -> dict[str, dict[str, Any] | None]:
    """The templates in Helm's order, so the first error is Helm's: deeper paths first, then reverse
    alphabetical (pkg/engine/engine.go:347-369): validations, nvidiadriver, clusterpolicy."""
    steps: list[tuple[str, str, Mapping[str, Any]]] = [(f["template"], "fail", f) for f in chart.fails]
    steps += [(d["template"], name, d) for name, d in _documents(chart)]
    docs: dict[str, dict[str, Any] | None] = {}
    for _, name, item in sorted(steps, key=lambda s: (s[0].count("/"), s[0]), reverse=True):
        where = f"{item['template']}:{item.get('line', item.get('if_line'))}"
        if name != "fail":
            docs[name] = _document(values, item, problems)
        elif _condition(values, item["if"], where):
            raise _TemplateError(f"{where}: {item['message']}")
    return docs


def _documents(chart: Chart) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    return (("cluster_policy", chart.cluster_policy), ("nvidia_driver", chart.nvidia_driver))


def _document(
    values: Mapping[str, Any], doc: Mapping[str, Any], problems: list[str]
) -> dict[str, Any] | None:
    for guard in doc["guards"]:  # nested {{- if }}s around the document, outermost first
        if not _condition(values, guard["if"], f"{doc['template']}:{guard['line']}"):
            return None
    spec: dict[str, Any] = {}
    context = _Context(values, doc, problems)
    context.fields(doc["spec"], spec, "spec")
    return {
        "apiVersion": doc["apiVersion"],
        "kind": doc["kind"],
        "metadata": {"name": doc["name"]},
        "spec": spec,
    }


@dataclass
class _Context:
    values: Mapping[str, Any]
    doc: Mapping[str, Any]
    problems: list[str]

    def fields(self, nodes: Sequence[Mapping[str, Any]], out: dict[str, Any], path: str) -> None:
        for node in nodes:
            if node.get("if") is not None:
                where = f"{self.doc['template']}:{node['if_line']}"
                if not _condition(self.values, node["if"], where):
                    continue
            if "key" not in node:  # a bare {{- if }} block: its fields belong to the parent
                self.fields(node["fields"], out, path)
                continue
            here = f"{path}.{node['key']}"
            if "fields" in node:
                child: dict[str, Any] = {}
                self.fields(node["fields"], child, here)
                out[node["key"]] = child
            else:
                out[node["key"]] = self.scalar(node, here)

    def scalar(self, node: Mapping[str, Any], path: str) -> Any:
        where = f"{self.doc['template']}:{node['line']}"
        if "literal" in node:
            return resolve_plain(node["literal"])
        value = lookup(self.values, node["value"], where)
        pipe = node.get("pipe")
        if pipe == "quote":  # sprig quote: %q of the value's text; nothing at all for nil
            result: Any = None if value is None else go_text(value)
        elif pipe == "toYaml":
            result = _json_like(value)
        else:
            if isinstance(pipe, Mapping) and not truthy(value):
                value = pipe["default"]
            text = go_text(value)
            if plain_scalar_problem(text):
                self.problems.append(
                    f"{self.doc['kind']} {self.doc['name']}: {path}: .Values.{node['value']} = {text!r} "
                    f"is written unquoted ({where}) and does not read back as one YAML value"
                )
            result = resolve_plain(text)
        self.check(node, path, result, where)
        return result

    def check(self, node: Mapping[str, Any], path: str, value: Any, where: str) -> None:
        """The API server's validation against the chart's CRD (a null is pruned, not refused)."""
        expected, got = node.get("type"), json_type(value)
        if value is None or expected is None:
            return
        allowed = {"int-or-string": ("integer", "string")}.get(expected, (expected,))
        if got == "number" and float(value).is_integer():
            got = "integer"  # JSON has no float/int split: 300.0 arrives as 300
        who = f"{self.doc['kind']} {self.doc['name']}: {path}"
        source = f" (.Values.{node['value']}, {where})" if "value" in node else f" ({where})"
        if got not in allowed:
            kind = ",".join(allowed)
            self.problems.append(
                f'{who}: Invalid value: "{got}": {path} in body must be of type {kind}: "{got}"{source}'
            )
        elif node.get("enum") and value not in node["enum"]:
            supported = ", ".join(f'"{e}"' for e in node["enum"])
            self.problems.append(
                f'{who}: Unsupported value: "{value}": supported values: {supported}{source}'
            )


def lookup(values: Mapping[str, Any], path: str, where: str) -> Any:
    """`.Values.<path>` as text/template evaluates it with Helm's missingkey=zero: a missing key is nil,
    and a field of nil or of a non-map stops the render."""
    current: Any = values
    for segment in path.split("."):
        if current is None:
            raise _TemplateError(
                f"{where}: <.Values.{path}>: nil pointer evaluating interface {{}}.{segment}"
            )
        if not isinstance(current, Mapping):
            raise _TemplateError(f"{where}: <.Values.{path}>: can't evaluate field {segment} (not a map)")
        current = current.get(segment)
    return current


def _condition(values: Mapping[str, Any], cond: Any, where: str) -> bool:
    """A path (its truth), {"and": [...]} (short-circuits, as text/template's `and` does since Go 1.18),
    or {"not": c}."""
    if isinstance(cond, str):
        return truthy(lookup(values, cond, where))
    if isinstance(cond, Mapping) and "and" in cond:
        return all(_condition(values, c, where) for c in cond["and"])
    if isinstance(cond, Mapping) and "not" in cond:
        return not _condition(values, cond["not"], where)
    raise ChartDataError(f"{where}: unknown condition {cond!r}")


def _json_like(value: Any) -> Any:
    """What toYaml writes and the API server reads: Helm's float64s come back integers when whole."""
    if isinstance(value, Mapping):
        return {str(k): _json_like(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_like(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# --------------------------------------------------------------------------
# Notes: template quirks the user's values ran into
# --------------------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _quirk_notes(user: Mapping[str, Any], full: Mapping[str, Any], driver_cr: bool) -> list[str]:
    notes: list[str] = []
    driver, user_driver = _map(full.get("driver")), _map(user.get("driver"))
    version = driver.get("version")
    if isinstance(version, float | int) and not isinstance(version, bool):
        notes.append(
            f"driver.version is the number {go_text(version)}, not a string: the chart writes "
            f'"{go_text(version)}"; quote it in the values (an unquoted 550.90 loses its zero)'
        )
    policy = _map(user_driver.get("upgradePolicy"))
    unavailable = policy.get("maxUnavailable", "")
    if unavailable is not None and unavailable != "" and not truthy(unavailable):
        notes.append(
            "driver.upgradePolicy.maxUnavailable 0 renders as 25%: "
            'the chart\'s `default "25%"` takes 0 for empty'
        )
    if "podDeletion" in policy:
        notes.append(
            "driver.upgradePolicy.podDeletion is ignored: the chart reads "
            "driver.upgradePolicy.gpuPodDeletion (and writes it to the resource's podDeletion)"
        )
    if truthy(_map(driver.get("nvidiaDriverCRD")).get("enabled")) and not driver_cr:
        notes.append(
            "the NVIDIADriver CRD is on but the chart renders no default NVIDIADriver "
            "(driver.nvidiaDriverCRD.deployDefaultCR is off): the driver comes from NVIDIADriver resources"
        )
    return notes
