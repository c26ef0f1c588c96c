"""Many clusters on plain data: CLUSTER/NODE names, audits put together, the `cluster` of JSON output,
gpudrv.yaml's clusters:, the flags applied to each cluster, the fan-out and its sections, and each
cluster's own desired state in JSON."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from reconciler.adapters import kube
from reconciler.adapters.files import config
from reconciler.adapters.files.operator_contract import rules
from reconciler.arguments import clusters as flags
from reconciler.commands import ERROR, FINDINGS, OK, Output
from reconciler.commands.clusters import Target, fan_out, listed, read_each, sections
from reconciler.core.audit import cluster_names
from reconciler.core.audit.audit import AuditResult, Finding, Status, combined, in_cluster
from reconciler.core.base.label_selector import parse
from reconciler.core.contract.desired import Desired, OperatorVersion, Source, SourceKind, VersionFrom
from reconciler.core.contract.driver_images import FleetNote
from reconciler.core.contract.operator import Contract, Mode
from reconciler.errors import GpudrvError
from reconciler.render.clusters import Read, counted, with_clusters
from tests.schemas import output_schema


def result(*missing: str, nodes: tuple[str, ...] = ("a", "b"), mode: Mode = Mode.LAB) -> AuditResult:
    findings = tuple(Finding(node, Status.MISSING, f"tag-{node}") for node in missing)
    notes = (FleetNote("mixed OS", None, ("a",)),) if mode is not Mode.LAB else ()
    return AuditResult(nodes, findings, mode, notes, {node: f"tag-{node}" for node in nodes}, {"a": "k2"})


def test_names_split_back_apart() -> None:
    assert cluster_names.qualified("eu", "gpu-1") == "eu/gpu-1"
    assert cluster_names.split("eu/gpu-1") == ("eu", "gpu-1")
    assert cluster_names.split("gpu-1") == (None, "gpu-1")
    assert cluster_names.clusters_of(["us/a", "eu/b", "us/c", "plain"]) == [("eu", 1), ("us", 2)]


def test_audits_of_clusters_put_together() -> None:
    eu = in_cluster(result("b"), "eu")
    us = in_cluster(result("a", mode=Mode.CLUSTER_POLICY), "us")
    assert eu.audited == ("eu/a", "eu/b") and [f.node for f in eu.findings] == ["eu/b"]
    assert us.notes[0].message == "cluster us: mixed OS" and us.notes[0].nodes == ("us/a",)
    assert dict(us.next_kernels) == {"us/a": "k2"}
    both = combined([eu, us])
    assert both.audited == ("eu/a", "eu/b", "us/a", "us/b")
    assert [f.node for f in both.findings] == ["eu/b", "us/a"]
    assert (
        both.mode is Mode.CLUSTER_POLICY
    )  # a missing image is a driver resource's where one cluster has them
    assert combined([eu, in_cluster(result(), "ap")]).mode is Mode.LAB
    assert combined([]).audited == () and combined([]).ok


def test_json_gets_cluster_beside_node_and_the_clusters_read() -> None:
    document = {"kind": "audit", "ok": True, "nodes": [{"node": "eu/a"}, {"node": "plain"}], "findings": []}
    read = [Read("eu", True, 1), Read("gone", error="cannot reach")]
    out = with_clusters(document, read, ("nodes", "findings"))
    assert out["nodes"] == [{"node": "a", "cluster": "eu"}, {"node": "plain"}]
    assert out["ok"] is False  # exit 2: a cluster could not be read
    assert out["clusters"][1] == {
        "name": "gone",
        "ok": None,
        "node_count": None,
        "error": "cannot reach",
        "desired": None,
    }
    assert counted(read) == "in 1 of 2 clusters"
    assert counted(read[:1]) == "in 1 cluster"


def test_gpudrv_yaml_clusters(tmp_path: Path) -> None:
    (tmp_path / "gpudrv.yaml").write_text(
        "fleet: clusters/all\n"
        "clusters:\n"
        "  - name: eu\n"
        "    context: prod-eu\n"
        "  - {name: us, kubeconfig: k/us.yaml, fleet: clusters/us, operatorVersion: v25.10.1,\n"
        "     selector: 'pool in (a,b)'}\n"
    )
    found = config.load(str(tmp_path / "gpudrv.yaml"))
    eu, us = found.clusters
    assert (eu.name, eu.context, eu.kubeconfig, eu.fleet, eu.selector) == ("eu", "prod-eu", None, None, None)
    assert eu.origin == f"{tmp_path / 'gpudrv.yaml'}:3"
    assert (us.kubeconfig, us.fleet, us.operator_version) == (
        tmp_path / "k/us.yaml",
        tmp_path / "clusters/us",
        "v25.10.1",
    )
    assert us.selector is not None and us.selector.text() == "pool in (a,b)"


def args(**values: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "command": "audit",
        "clusters": None,
        "all_clusters": False,
        "kubeconfig": None,
        "context": None,
        "operator_version": None,
        "version_from_config": False,
        "selector": None,
        "allow_empty": False,
        "request_timeout": 7.0,
        "config_path": Path("gpudrv.yaml"),
        "fleet": Path("clusters/all"),
        "from_dir": None,
    }
    return argparse.Namespace(**(base | values))


ENTRIES = (
    config.ClusterEntry("eu", "gpudrv.yaml:3", context="prod-eu"),
    config.ClusterEntry(
        "us", "gpudrv.yaml:5", kubeconfig=Path("k/us.yaml"), fleet=Path("clusters/us"),
        operator_version="v25.10.1", selector=parse("pool=a"),
    ),
)  # fmt: skip


def test_each_cluster_gets_the_command_lines_flags() -> None:
    eu, us = flags.targets(args(all_clusters=True, selector=parse("zone=x")), ENTRIES)
    assert eu.options == kube.Options(None, "prod-eu", 7.0) and eu.fleet == Path("clusters/all")
    assert eu.selector is not None and eu.selector.text() == "zone=x"
    assert us.options == kube.Options("k/us.yaml", None, 7.0) and us.fleet == Path("clusters/us")
    assert us.selector is not None and us.selector.text() == "pool=a,zone=x"  # both must match
    assert (us.operator_version, eu.operator_version) == ("v25.10.1", None)
    [flagged] = flags.targets(args(clusters=["us"], operator_version="v26.7.0"), ENTRIES)
    assert flagged.operator_version == "v26.7.0" and not flagged.version_from_config  # the flag wins
    [filed] = flags.targets(
        args(clusters=["eu"], operator_version="v26.3.1", version_from_config=True), ENTRIES
    )
    assert filed.operator_version == "v26.3.1" and filed.version_from_config  # gpudrv.yaml's, for eu
    [own] = flags.targets(
        args(clusters=["us"], operator_version="v26.3.1", version_from_config=True), ENTRIES
    )
    assert own.operator_version == "v25.10.1"  # the entry's over the file's
    [moved] = flags.targets(args(command="plan", clusters=["us"], from_dir=Path("elsewhere")), ENTRIES)
    assert moved.fleet == Path("elsewhere")  # --from over the entry's fleet


def test_one_cluster_as_its_own_command_line() -> None:
    [us] = flags.targets(args(clusters=["us"]), ENTRIES)
    one = flags.in_cluster(args(command="plan", clusters=["us"]), us, Output.JSON, True)
    assert (one.clusters, one.all_clusters, one.kubeconfig, one.context) == (None, False, "k/us.yaml", None)
    assert (one.from_dir, one.output, one.operator_version) == (Path("clusters/us"), Output.JSON, "v25.10.1")
    offline = flags.in_cluster(args(clusters=["us"]), us, None, False)
    assert offline.from_dir is None  # explain/preflight: --from would read manifests instead


def test_apply_takes_one_cluster() -> None:
    assert flags.one_target(args(command="apply", clusters=["eu", "eu"]), ENTRIES).name == "eu"
    with pytest.raises(GpudrvError, match="one cluster at a time, by design"):
        flags.one_target(args(command="apply", clusters=["eu", "us"]), ENTRIES)


def target(name: str) -> Target:
    return Target(name, kube.Options())


def test_fan_out_reads_side_by_side_keeps_order_and_turns_errors_into_lines() -> None:
    started: list[str] = []
    both = threading.Barrier(2, timeout=5)  # a sequential fan-out would never pass it

    def work(item: Target) -> str:
        started.append(item.name)
        if item.name == "gone":
            raise GpudrvError("cannot reach the cluster")
        both.wait()
        return item.name.upper()

    outcomes = fan_out([target("eu"), target("gone"), target("us")], work)
    assert [(o.target.name, o.result, o.error) for o in outcomes] == [
        ("eu", "EU", None),
        ("gone", None, "cannot reach the cluster"),
        ("us", "US", None),
    ]
    with pytest.raises(ZeroDivisionError):  # a bug is no cluster's error
        fan_out([target("eu"), target("us")], lambda item: 1 // 0)


def test_sections_keep_each_clusters_output_apart(capsys: pytest.CaptureFixture[str]) -> None:
    def run(item: Target, output: Output) -> int:
        for part in range(3):  # interleaved with the other thread's writes
            print(f"{item.name} line {part}")
            time.sleep(0.01)
        if item.name == "gone":
            raise GpudrvError("cannot reach")
        return FINDINGS if item.name == "us" else OK

    code = sections([target("eu"), target("us"), target("gone")], "plan", run, Output.TEXT)
    out, err = capsys.readouterr()
    assert code == ERROR
    assert out.splitlines() == [
        "== cluster eu ==", "eu line 0", "eu line 1", "eu line 2",
        "== cluster us ==", "us line 0", "us line 1", "us line 2",
    ]  # fmt: skip
    assert err == "gpudrv: cluster gone: cannot reach\n"


def test_sections_as_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    def run(item: Target, output: Output) -> int:
        assert output is Output.JSON  # YAML is made from each cluster's JSON
        print(json.dumps({"kind": "plan", "ok": True, "nodes": [item.name]}))
        return OK

    assert sections([target("eu"), target("us")], "plan", run, Output.YAML) == OK
    out = capsys.readouterr().out
    assert out.startswith("kind: clusters\nok: true\ncommand: plan\n")
    assert "name: us" in out and "- us" in out


def test_clusters_connect_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cluster's connection (kubeconfig, exec credential plugin) is made on its own thread at the
    same time as the others': a connect that waits for the other one's never returns if they queue."""
    from reconciler.adapters import sources

    both = threading.Barrier(2, timeout=5)

    def connect(options: kube.Options) -> str:
        both.wait()
        return f"connection to {options.context}"

    monkeypatch.setattr(sources, "connect", connect)
    outcomes = fan_out(
        [Target("eu", kube.Options(context="eu")), Target("us", kube.Options(context="us"))],
        lambda item: item.source().live,
    )
    assert [outcome.result for outcome in outcomes] == ["connection to eu", "connection to us"]


def test_a_section_without_a_document_is_said_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    def run(item: Target, output: Output) -> int:
        print("nothing to upgrade")  # text where JSON was asked
        return OK

    assert sections([target("eu")], "plan", run, Output.JSON) == OK
    document = json.loads(capsys.readouterr().out)
    assert document["clusters"] == [
        {
            "name": "eu",
            "exit_code": 0,
            "result": None,
            "error": "the command printed no JSON document for this cluster",
            "desired": None,
        }
    ]


def test_preload_imports_every_kubernetes_module_the_gateway_imports() -> None:
    """Clusters read side by side would otherwise race into the client's first import (a deadlock
    error or a partly initialized module, about one run in eight with four clusters): fan_out preloads
    them, and the list must name every module the gateway imports lazily."""
    import ast
    import subprocess
    import sys

    from reconciler.adapters.kube import _config

    imported = set()
    for path in Path(_config.__file__).parent.glob("*.py"):
        for item in ast.walk(ast.parse(path.read_text())):
            if isinstance(item, ast.ImportFrom) and (item.module or "").startswith("kubernetes"):
                imported.add(item.module)
            if isinstance(item, ast.Import):
                imported |= {alias.name for alias in item.names if alias.name.startswith("kubernetes")}
    assert imported and imported <= set(_config.CLIENT_MODULES)
    check = (
        "import sys; from reconciler.adapters import kube; kube.preload(); "
        "print(sorted(m for m in {} if m not in sys.modules))"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", check.format(sorted(imported))], capture_output=True, text=True, check=True
    )
    assert fresh.stdout.strip() == "[]"


# --- each cluster's desired state (issue 37) ---------------------------------------------------------


def desired_state(host: str, version: str | None = None) -> Desired:
    """A lab-mode desired state read live at `host`, pinned by gpudrv.yaml to `version` (else the newest
    rule)."""
    pinned = OperatorVersion(version, VersionFrom.CONFIG, "gpudrv.yaml") if version else None
    return Desired(
        (Source(SourceKind.LIVE, f"the cluster at {host}"),),
        pinned or OperatorVersion(None, VersionFrom.NEWEST),
        Contract(Mode.LAB, rules().newest),
        live=True,
    )


def test_each_cluster_in_json_carries_its_own_desired_state() -> None:
    eu, us = desired_state("https://eu"), desired_state("https://us", "v25.10.1")
    read = [Read("eu", True, 3, desired=eu), Read("us", False, 4, desired=us), Read("gone", error="gone")]
    out = with_clusters({"kind": "audit", "ok": False, "nodes": [], "findings": []}, read)
    assert [one["desired"] for one in out["clusters"]] == [eu.as_json(), us.as_json(), None]
    assert out["clusters"][1]["desired"]["operator"] == {
        "version": "v25.10.1",
        "from": "gpudrv.yaml",
        "origin": "gpudrv.yaml",
    }
    assert out["clusters"][1]["desired"]["sources"] == [
        {"kind": "live cluster", "where": "the cluster at https://us"}
    ]
    items = output_schema("audit")["properties"]["clusters"]["items"]
    for one in out["clusters"]:
        jsonschema.validate(one, items)
    # the schema holds the rule: a cluster read has its desired state, one that was not has none
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**out["clusters"][0], "desired": None}, items)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**out["clusters"][2], "desired": eu.as_json()}, items)


def test_read_each_keeps_the_desired_state_each_result_was_computed_under(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The single-cluster reading (NodeSource.desired), once per cluster, kept beside its result: never
    a second reading, never another cluster's."""
    from reconciler.adapters import desired, sources

    read: list[str] = []
    states = {"eu": desired_state("https://eu"), "us": desired_state("https://us", "v25.10.1")}

    def connect(options: kube.Options) -> argparse.Namespace:
        if options.context == "gone":
            raise GpudrvError("cannot reach the cluster at https://gone")
        return argparse.Namespace(gateway=options.context)

    def from_cluster(gateway: str, pins: desired.Pins) -> Desired:
        read.append(gateway)
        return states[gateway]

    monkeypatch.setattr(sources, "connect", connect)
    monkeypatch.setattr(desired, "from_cluster", from_cluster)
    outcomes = read_each(
        [Target(name, kube.Options(context=name)) for name in ("eu", "gone", "us")],
        lambda item, source: source.desired.rule_from,
    )
    assert [(o.target.name, o.result, o.error) for o in outcomes] == [
        ("eu", "the newest rule", None),
        ("gone", None, "cannot reach the cluster at https://gone"),
        ("us", "operatorVersion v25.10.1", None),
    ]
    assert [o.desired for o in outcomes] == [states["eu"], None, states["us"]]
    assert outcomes[0].desired is states["eu"] and outcomes[2].desired is states["us"]
    assert sorted(read) == ["eu", "us"]  # once each: the result's own reading, not a second one
    assert [listed(o, lambda rule: (True, 1)).desired for o in outcomes] == [states["eu"], None, states["us"]]


def test_sections_carry_each_clusters_desired_state_beside_its_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """plan, diff, explain, preflight: the desired state is the one the cluster's own document carries,
    lifted beside it (as audit's, status's and report's clusters have theirs)."""
    states = {
        "eu": desired_state("https://eu").as_json(),
        "us": desired_state("https://us", "v25.10.1").as_json(),
    }

    def run(item: Target, output: Output) -> int:
        if item.name == "gone":
            raise GpudrvError("cannot reach")
        print(json.dumps({"kind": "plan", "ok": True, "nodes": [], "desired": states[item.name]}))
        return OK

    code = sections([target("eu"), target("us"), target("gone")], "plan", run, Output.JSON)
    document = json.loads(capsys.readouterr().out)
    assert code == ERROR
    jsonschema.validate(document, output_schema("clusters"))
    assert [(c["name"], c["desired"]) for c in document["clusters"]] == [
        ("eu", states["eu"]),
        ("us", states["us"]),
        ("gone", None),
    ]
    assert all(c["desired"] == c["result"]["desired"] for c in document["clusters"][:2])
    assert sections([target("us")], "plan", run, Output.YAML) == OK
    assert yaml.safe_load(capsys.readouterr().out)["clusters"][0]["desired"] == states["us"]
    items = output_schema("clusters")["properties"]["clusters"]["items"]
    eu = document["clusters"][0]
    with pytest.raises(jsonschema.ValidationError):  # a cluster's document without its desired state
        jsonschema.validate({**eu, "desired": None}, items)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**eu, "result": {"kind": "plan"}}, items)
