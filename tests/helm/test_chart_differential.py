"""The differential: gpudrv's reading of Helm values against the real chart rendered by the real Helm.

Helm is helm.sh/helm/v3 v3.22.0 built from the Go module proxy (scripts/helm build, cached; the first
run builds it). The chart is the GPU Operator's own, deployments/gpu-operator of the module the project
already builds (tests/operator/go.mod: v25.3.4), copied out of the read-only module cache; its
dependency (node-feature-discovery) ships in its charts/ folder, so `helm template` runs offline as is.
The proxy serves no other gpu-operator version (v26.7.0 and its pseudo-version answer 403), so only
v25.3.4 is rendered here; tests/unit/test_helm_chart.py covers v26.7.0's data on plain data.

For every values file of the corpus, both sides read the same YAML text: Helm with `-f`, gpudrv with
its YAML reader (YAML 1.1, as Helm's go-yaml v2) then helm_chart.merge and render. The rendered
ClusterPolicy and NVIDIADriver are parsed with PyYAML (plus go-yaml v2's exponent-without-a-dot float,
which PyYAML reads as a string), and every field gpudrv models must be present on both sides or on
neither, with the same value and the same JSON type. A render Helm refuses must be refused by gpudrv
at the same template line, for the same reason.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.adapters.files import yaml_load
from reconciler.adapters.helm import chart_data
from reconciler.core.contract import helm_chart
from tests.helm.chart import chart_copy, helm_binary, helm_env

pytestmark = pytest.mark.helm

CHARTS = chart_data.charts()
# The counts the report gives; printed by the summary test.
COMPARED: dict[str, int] = {}


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    return helm_binary()


@pytest.fixture(scope="session")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of the pinned module's chart (downloaded from the proxy if not cached)."""
    return chart_copy(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="session")
def modeled_chart() -> helm_chart.Chart:
    chart, note = helm_chart.pick(CHARTS, "v25.3.4")
    assert note is None and chart.version == "25.3.4"
    return chart


# --------------------------------------------------------------------------
# Reading helm's output as the API server's client does
# --------------------------------------------------------------------------


class _GoYamlLoader(yaml.SafeLoader):
    """PyYAML's YAML 1.1 plus go-yaml v2's float without a dot (resolve.go:85: `1e+06`)."""


_GoYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def helm_template(helm: Path, chart: Path, files: list[Path], home: Path) -> tuple[list[dict[str, Any]], str]:
    env = helm_env(home)
    args = [str(helm), "template", "gpu-operator", str(chart), "--namespace", "gpu-operator"]
    for f in files:
        args += ["-f", str(f)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=120)
    if proc.returncode != 0:
        return [], proc.stderr
    docs = [d for d in yaml.load_all(proc.stdout, Loader=_GoYamlLoader) if isinstance(d, dict)]
    return docs, ""


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) <= 1, f"{len(found)} {kind} documents"
    return found[0] if found else None


def gpudrv_side(texts: list[str]) -> helm_chart.Rendered:
    layers = [next(yaml_load.documents(t, (1, 1)), None) or {} for t in texts]
    return chart_data.render(helm_chart.merge(*layers), "v25.3.4")


# --------------------------------------------------------------------------
# Comparison: every modeled field, present on both sides or neither, same value and JSON type
# --------------------------------------------------------------------------


def modeled_keys(nodes: list[Mapping[str, Any]]) -> dict[str, Any]:
    """key -> None (a scalar) or the nested keys, bare if-blocks flattened."""
    out: dict[str, Any] = {}
    for node in nodes:
        if "key" not in node:
            out.update(modeled_keys(node["fields"]))
        else:
            out[node["key"]] = modeled_keys(node["fields"]) if "fields" in node else None
    return out


def compare(path: str, keys: Mapping[str, Any], helm: Any, ours: Any, out: list[str]) -> int:
    """Differences appended to out; returns the number of fields compared."""
    count = 0
    helm_map = helm if isinstance(helm, Mapping) else {}
    ours_map = ours if isinstance(ours, Mapping) else {}
    for key, sub in keys.items():
        here = f"{path}.{key}"
        count += 1
        if (key in helm_map) != (key in ours_map):
            out.append(f"{here}: helm {'has' if key in helm_map else 'lacks'} it, gpudrv does not agree")
            continue
        if key not in helm_map:
            continue
        h, o = helm_map[key], ours_map[key]
        if sub is not None and isinstance(h, Mapping) and isinstance(o, Mapping):
            count += compare(here, sub, h, o, out)
        elif json.dumps(h, sort_keys=True) != json.dumps(o, sort_keys=True) or type(h) is not type(o):
            out.append(f"{here}: helm {h!r} ({type(h).__name__}), gpudrv {o!r} ({type(o).__name__})")
    return count


def compare_document(
    name: str, kind: str, helm_doc: dict[str, Any] | None, ours: dict[str, Any] | None, keys: dict[str, Any]
) -> tuple[int, list[str]]:
    if (helm_doc is None) != (ours is None):
        return 1, [f"{name}: {kind}: helm renders {'one' if helm_doc else 'none'}, gpudrv does not agree"]
    if helm_doc is None or ours is None:
        return 1, []
    diffs: list[str] = []
    for field in ("apiVersion", "kind"):
        if helm_doc[field] != ours[field]:
            diffs.append(f"{name}: {field}: helm {helm_doc[field]!r}, gpudrv {ours[field]!r}")
    if helm_doc["metadata"]["name"] != ours["metadata"]["name"]:
        diffs.append(f"{name}: metadata.name differs")
    return 3 + compare(f"{name}: {kind}.spec", keys, helm_doc["spec"], ours["spec"], diffs), diffs


# --------------------------------------------------------------------------
# The corpus: each case is one or more values files, given to helm as -f in order
# --------------------------------------------------------------------------

CRD = "  nvidiaDriverCRD:\n    enabled: true\n"
CORPUS: dict[str, list[str]] = {
    "chart-defaults": [""],
    "precompiled-on": ['driver:\n  usePrecompiled: true\n  version: "550"\n'],
    "precompiled-off-explicit": ["driver:\n  usePrecompiled: false\n"],
    "precompiled-yes-string": ['driver:\n  usePrecompiled: "yes"\n'],
    "crd-on-version-quoted-550": ['driver:\n  version: "550"\n' + CRD],
    "crd-on-version-unquoted-550": ["driver:\n  version: 550\n  usePrecompiled: true\n" + CRD],
    "crd-on-version-550.90": ["driver:\n  version: 550.90\n" + CRD],
    "crd-on-version-full-quoted": ['driver:\n  version: "580.82.07"\n' + CRD],
    "crd-on-version-full-unquoted": ["driver:\n  version: 580.82.07\n" + CRD],
    "crd-off-version-550.90": ["driver:\n  version: 550.90\n"],
    "crd-on-no-default-cr": ["driver:\n  nvidiaDriverCRD:\n    enabled: true\n    deployDefaultCR: false\n"],
    "crd-on-node-selector": [
        "driver:\n  nvidiaDriverCRD:\n    enabled: true\n    nodeSelector:\n"
        '      pool: a100\n      nvidia.com/gpu.present: "true"\n'
    ],
    "crd-on-driver-disabled": ["driver:\n  enabled: false\n" + CRD],
    "repository-image-overrides": [
        "driver:\n  repository: registry.example.com/nvidia\n  image: driver-precompiled\n" + CRD
    ],
    "kernel-module-and-driver-type": [
        "driver:\n  kernelModuleType: open\n  nvidiaDriverCRD:\n    enabled: true\n    driverType: vgpu\n"
    ],
    "nulls-delete-version-and-image": ["driver:\n  version: null\n  image: ~\n" + CRD],
    "null-in-a-later-file": [
        'driver:\n  version: "550"\n  repository: r.example/x\n',
        "driver:\n  version:\n",
    ],
    "later-file-wins": ['driver:\n  version: "535"\n', 'driver:\n  version: "550"\n  usePrecompiled: true\n'],
    "upgrade-policy-null": ["driver:\n  upgradePolicy: null\n"],
    "max-unavailable-zero": [
        "driver:\n  upgradePolicy:\n    maxUnavailable: 0\n    maxParallelUpgrades: 0\n"
        "    autoUpgrade: false\n"
    ],
    "max-unavailable-string-zero": ['driver:\n  upgradePolicy:\n    maxUnavailable: "0"\n'],
    "max-unavailable-number-and-percent": ["driver:\n  upgradePolicy:\n    maxUnavailable: 3\n", ""],
    "max-unavailable-50-percent": ['driver:\n  upgradePolicy:\n    maxUnavailable: "50%"\n'],
    "gpu-pod-deletion": [
        "driver:\n  upgradePolicy:\n    gpuPodDeletion:\n      force: true\n      timeoutSeconds: 60\n"
        "      deleteEmptyDir: true\n    podDeletion:\n      force: false\n"
    ],
    "drain-everything": [
        "driver:\n  upgradePolicy:\n    drain:\n      enable: true\n      force: true\n"
        "      podSelector: app=train\n      timeoutSeconds: 1000000\n      deleteEmptyDir: true\n"
    ],
    "wait-for-completion": [
        "driver:\n  upgradePolicy:\n    waitForCompletion:\n      timeoutSeconds: 600\n"
        '      podSelector: "job=x"\n'
    ],
    "drain-null-fails": ["driver:\n  upgradePolicy:\n    drain: null\n"],
    "nvidia-driver-crd-null-fails": ["driver:\n  nvidiaDriverCRD: null\n"],
}


@pytest.fixture(scope="module")
def rendered(
    helm_bin: Path, chart_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[list[dict[str, Any]], str]]]:
    home = tmp_path_factory.mktemp("helm-home")
    out = {}
    for name, texts in CORPUS.items():
        files = []
        for i, text in enumerate(texts):
            f = home / f"{name}-{i}.yaml"
            f.write_text(text)
            files.append(f)
        out[name] = helm_template(helm_bin, chart_dir, files, home)
    yield out


@pytest.mark.parametrize("name", list(CORPUS))
def test_gpudrv_renders_what_helm_renders(
    name: str, rendered: dict[str, tuple[list[dict[str, Any]], str]], modeled_chart: helm_chart.Chart
) -> None:
    docs, error = rendered[name]
    ours = gpudrv_side(CORPUS[name])
    if error:
        # Helm: `template: gpu-operator/templates/X.yaml:LINE:COL: executing ... at <EXPR>: REASON`
        m = re.search(r"template: gpu-operator/(templates/\S+?):(\d+):\d+: .* at (<[^>]+>): (.*)", error)
        assert m, error
        assert ours.cluster_policy is None and ours.nvidia_driver is None
        assert ours.problems == (f"helm template fails: {m[1]}:{m[2]}: {m[3]}: {m[4].strip()}",), error
        COMPARED[name] = 1
        return
    assert not any(p.startswith("helm template fails") for p in ours.problems), ours.problems
    count, diffs = 0, []
    for kind, doc, keys in (
        ("ClusterPolicy", ours.cluster_policy, modeled_keys(modeled_chart.cluster_policy["spec"])),
        ("NVIDIADriver", ours.nvidia_driver, modeled_keys(modeled_chart.nvidia_driver["spec"])),
    ):
        n, d = compare_document(name, kind, one(docs, kind), doc, keys)
        count, diffs = count + n, diffs + d
    assert diffs == []
    COMPARED[name] = count


def test_the_corpus_is_what_the_report_says() -> None:
    """Run after the cases (file order): every case compared something; the counts for the notes."""
    assert set(COMPARED) == set(CORPUS), sorted(set(CORPUS) - set(COMPARED))
    print(f"\nchart differential: {len(COMPARED)} values files, {sum(COMPARED.values())} fields compared")


# --------------------------------------------------------------------------
# The data file's citations, against the same chart
# --------------------------------------------------------------------------


def test_values_defaults_and_their_lines(chart_dir: Path, modeled_chart: helm_chart.Chart) -> None:
    lines = (chart_dir / "values.yaml").read_text().splitlines()
    values = yaml.safe_load("\n".join(lines))
    for path, line in modeled_chart.default_lines.items():
        key = path.rsplit(".", 1)[-1]
        assert re.match(rf"^\s*{re.escape(key)}:", lines[line - 1]), (path, line, lines[line - 1])
        theirs: Any = values
        ours: Any = modeled_chart.defaults
        for segment in path.split("."):
            theirs, ours = theirs[segment], ours[segment]
        if not isinstance(ours, Mapping):
            assert (ours, type(ours)) == (theirs, type(theirs)), path


def _nodes(nodes: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for node in nodes:
        yield node
        yield from _nodes(node.get("fields", []))


def _condition_paths(cond: Any) -> list[str]:
    if isinstance(cond, str):
        return [cond]
    return [p for c in cond.get("and", [cond.get("not")]) for p in _condition_paths(c)]


@pytest.mark.parametrize("document", ["cluster_policy", "nvidia_driver"])
def test_template_and_crd_lines(chart_dir: Path, modeled_chart: helm_chart.Chart, document: str) -> None:
    doc = modeled_chart.cluster_policy if document == "cluster_policy" else modeled_chart.nvidia_driver
    template = (chart_dir / doc["template"]).read_text().splitlines()
    crd = (chart_dir / doc["crd"]).read_text().splitlines()
    assert f"name: {doc['name']}" in template[doc["name_line"] - 1]
    for guard in doc["guards"]:
        assert all(f".Values.{p}" in template[guard["line"] - 1] for p in _condition_paths(guard["if"]))
    checked = 0
    for node in _nodes(doc["spec"]):
        if node.get("if"):
            line = template[node["if_line"] - 1]
            assert "if" in line and all(f".Values.{p}" in line for p in _condition_paths(node["if"])), node
        if "key" not in node:
            continue
        line = template[node["line"] - 1]
        assert re.match(rf"^\s*{node['key']}\s*:", line), (node["key"], line)
        if "value" in node:
            assert f".Values.{node['value']} " in line or f".Values.{node['value']}}}" in line, (node, line)
        if node.get("crd_line"):
            assert re.match(rf"^\s*{node['key']}:$", crd[node["crd_line"] - 1]), (
                node["key"],
                node["crd_line"],
            )
            checked += 1
    assert checked >= 7
