"""Many clusters, one matrix, at the command line: gpudrv.yaml's clusters: read side by side by the
live commands (--cluster, --all-clusters), against fake API servers (tests/hostile/fake_api.py) that
serve the lab's nodes; one of them is gone. tests/e2e/test_clusters_live.py runs the same against two
real control planes."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.cli.test_output_contract import Lab, schema
from tests.conftest import git, run_main

NEW_NODE = "gpu-us-9"  # us's node on a kernel the matrix has no image for
NEW_TAG = "550-6.8.0-52-generic-ubuntu24.04"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fleet(lab: Path) -> Iterator[Path]:
    """The lab as a fleet repository whose gpudrv.yaml names three clusters: eu (the lab's three
    nodes), us (the same three and a fourth on a kernel without an image) and gone (nothing listens)."""
    eu, us = Lab(), Lab()
    extra = json.loads(json.dumps(us.nodes["lab-node-2"]))
    extra["metadata"]["name"] = NEW_NODE
    extra["metadata"]["labels"]["feature.node.kubernetes.io/kernel-version.full"] = "6.8.0-52-generic"
    us.nodes[NEW_NODE] = extra
    with eu.fake, us.fake:
        eu.fake.kubeconfig(lab / "eu.kubeconfig")
        us.fake.kubeconfig(lab / "us.kubeconfig")
        eu.fake.kubeconfig(lab / "gone.kubeconfig", f"http://127.0.0.1:{closed_port()}")
        (lab / "gpudrv.yaml").write_text(
            "matrix: matrix/support-matrix.csv\n"
            "fleet: clusters/lab\n"
            "clusters:\n"
            "  - {name: eu, kubeconfig: eu.kubeconfig}\n"
            "  - {name: us, kubeconfig: us.kubeconfig}\n"
            "  - {name: gone, kubeconfig: gone.kubeconfig}\n"
        )
        git(lab, "init", "-q")
        git(lab, "add", "-A")
        git(lab, "commit", "-qm", "fleet")
        yield lab


def json_of(*args: str, cwd: Path, code: int, kind: str) -> dict[str, Any]:
    found = run_main(*args, "-o", "json", cwd=cwd)
    assert found.returncode == code, found.stdout + found.stderr
    document: dict[str, Any] = json.loads(found.stdout)
    jsonschema.validate(document, schema(kind))
    return document


def test_audit_of_two_clusters_names_each_node_with_its_cluster(fleet: Path) -> None:
    found = run_main("audit", "--cluster", "eu", "--cluster", "us", cwd=fleet)
    assert found.returncode == 1, found.stdout + found.stderr
    assert found.stdout.splitlines() == [f"us/{NEW_NODE} MISSING {NEW_TAG}"]
    assert found.stderr == ""

    clean = run_main("audit", "--cluster", "eu", cwd=fleet)
    assert (clean.returncode, clean.stdout.strip()) == (
        0,
        "OK: 3 GPU nodes, 3 images in matrix/support-matrix.csv, in 1 cluster",
    )


def test_a_cluster_that_is_gone_is_one_line_and_exit_2_after_the_others(fleet: Path) -> None:
    found = run_main("audit", "--all-clusters", cwd=fleet)
    assert found.returncode == 2
    assert found.stdout.splitlines() == [f"us/{NEW_NODE} MISSING {NEW_TAG}"]  # the others' results, whole
    [line] = found.stderr.splitlines()
    assert re.fullmatch(
        r"gpudrv: cluster gone: cannot reach the cluster at http://127\.0\.0\.1:\d+: "
        r"\[Errno 111\] Connection refused",
        line,
    ), line  # as docs/clusters.md shows it

    document = json_of("audit", "--all-clusters", cwd=fleet, code=2, kind="audit")
    assert document["ok"] is False
    assert [(c["name"], c["ok"], c["node_count"]) for c in document["clusters"]] == [
        ("eu", True, 3),
        ("us", False, 4),
        ("gone", None, None),
    ]
    assert document["clusters"][2]["error"].startswith("cannot reach the cluster at")
    assert [(f["cluster"], f["node"], f["tag"]) for f in document["findings"]] == [("us", NEW_NODE, NEW_TAG)]
    assert {(n["cluster"], n["node"]) for n in document["nodes"]} >= {("eu", "lab-node-0"), ("us", NEW_NODE)}
    assert document["node_count"] == 7


def test_no_cluster_read_is_never_ok(fleet: Path) -> None:
    found = run_main("audit", "--cluster", "gone", cwd=fleet)
    assert found.returncode == 2
    assert (
        found.stdout
        == "NOTHING CHECKED: 0 GPU nodes, 3 images in matrix/support-matrix.csv, in 0 of 1 cluster\n"
    )
    assert "OK" not in found.stdout and found.stderr.startswith("gpudrv: cluster gone: cannot reach")


def test_audit_in_github_actions_annotates_and_summarises_per_cluster(fleet: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    found = run_main(
        "audit", "--cluster", "eu", "--cluster", "us", "-o", "github",
        cwd=fleet, env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert found.returncode == 1, found.stdout + found.stderr
    [error] = [line for line in found.stdout.splitlines() if line.startswith("::error")]
    assert f"us/{NEW_NODE}" in error and NEW_TAG in error
    assert found.stdout.splitlines()[-1].endswith("in 2 clusters")
    text = summary.read_text()
    assert "### gpudrv audit (cluster eu): OK" in text
    assert "### gpudrv audit (cluster us): 1 of 4 GPU nodes without a driver image" in text
    assert f"`us/{NEW_NODE}`" in text


def test_report_and_status_side_by_side(fleet: Path) -> None:
    report = run_main("report", "--cluster", "eu", "--cluster", "us", cwd=fleet)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert lines[:3] == ["CLUSTERS=eu,us", "NODES=7", "SKEW=1"]
    assert f"US_{NEW_NODE.upper().replace('-', '_')}_TAG={NEW_TAG}" in lines
    document = json_of("report", "--all-clusters", cwd=fleet, code=2, kind="report")
    assert document["ok"] is False
    assert document["node_count"] == 7 and [c["error"] is None for c in document["clusters"]] == [
        True,
        True,
        False,
    ]
    status = json_of("status", "--cluster", "us", cwd=fleet, code=0, kind="status")
    assert {(n["cluster"], n["node"]) for n in status["nodes"]} == {
        ("us", "lab-node-0"),
        ("us", "lab-node-1"),
        ("us", "lab-node-2"),
        ("us", NEW_NODE),
    }
    table = run_main("status", "--all-clusters", cwd=fleet)
    assert table.returncode == 2
    assert table.stdout.splitlines()[1].startswith("eu/lab-node-0 ")
    assert table.stderr.startswith("gpudrv: cluster gone: ")


def test_the_fleet_page_of_many_clusters(fleet: Path) -> None:
    page = run_main("report", "--all-clusters", "-o", "html", "--registry-images", "off", cwd=fleet)
    assert page.returncode == 2, page.stderr
    html = page.stdout
    assert "the clusters eu, us (live); not read: gone" in html
    assert "<th>Cluster</th><th>Node</th>" in html
    assert f'<td class="nowrap">us</td><td class="nowrap">{NEW_NODE}</td>' in html
    assert "<td>us (1)</td>" in html  # the missing image's clusters
    assert (
        'title="550-5.15.0-119-generic-ubuntu22.04: in the matrix; 2 nodes need it, in eu (1), us (1)"'
        in html
    )


def test_plan_and_preflight_run_once_per_cluster(fleet: Path) -> None:
    plan = run_main("plan", "--cluster", "eu", "--cluster", "us", cwd=fleet)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    sections = [line for line in plan.stdout.splitlines() if line.startswith("== cluster ")]
    assert sections == ["== cluster eu ==", "== cluster us =="]
    document = json_of(
        "preflight", "--all-clusters", "--kernel", "6.8.0-60-generic", cwd=fleet, code=2, kind="clusters"
    )
    assert document["command"] == "preflight"
    assert [(c["name"], c["exit_code"]) for c in document["clusters"]] == [("eu", 1), ("us", 1), ("gone", 2)]
    for cluster in document["clusters"][:2]:
        jsonschema.validate(cluster["result"], schema("preflight"))
    assert document["clusters"][2]["result"] is None and "cannot reach" in document["clusters"][2]["error"]


def test_diff_and_explain_run_once_per_cluster(fleet: Path) -> None:
    diff = json_of("diff", "--cluster", "eu", "--cluster", "us", cwd=fleet, code=1, kind="clusters")
    # both lack the lab's declared PDB (the fake serves no budgets); us also has a node the fleet lacks
    assert [(c["name"], c["exit_code"]) for c in diff["clusters"]] == [("eu", 1), ("us", 1)]
    assert NEW_NODE not in json.dumps(diff["clusters"][0]["result"])
    for cluster in diff["clusters"]:
        jsonschema.validate(cluster["result"], schema("diff"))
    assert NEW_NODE in json.dumps(diff["clusters"][1]["result"])
    explain = run_main("explain", "--all-clusters", cwd=fleet)
    assert explain.returncode == 2
    assert [line for line in explain.stdout.splitlines() if line.startswith("== ")] == [
        "== cluster eu ==",
        "== cluster us ==",
    ]


def test_apply_takes_its_one_cluster_from_gpudrv_yaml(fleet: Path) -> None:
    dry = run_main("apply", "--cluster", "us", "--dry-run", cwd=fleet)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[-1] == "dry run: nothing was changed"
    gone = run_main("apply", "--cluster", "gone", "--dry-run", cwd=fleet)
    assert (gone.returncode, gone.stdout) == (2, "")
    assert "cannot reach the cluster at http://127.0.0.1:" in gone.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["audit", "--cluster", "mars"],
            "--cluster mars: gpudrv.yaml names no such cluster (it has: eu, us, gone)",
        ),
        (["audit", "--cluster", "eu", "--kubeconfig", "eu.kubeconfig"], "drop --kubeconfig/--context"),
        (["audit", "--cluster", "eu", "--from", "clusters/lab"], "--from reads manifests, not clusters"),
        (["audit", "--cluster", "eu", "--all-clusters"], "give --cluster NAME or --all-clusters, not both"),
        (["apply", "--cluster", "eu", "--cluster", "us"], "one cluster at a time, by design (eu, us given)"),
    ],
)
def test_wrong_cluster_flags_are_one_line(fleet: Path, args: list[str], message: str) -> None:
    found = run_main(*args, cwd=fleet)
    assert (found.returncode, found.stdout) == (2, "")
    [line] = found.stderr.splitlines()
    assert message in line, line


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("clusters:\n  - {name: eu}\n  - {name: eu}\n", "clusters: 'eu' is named twice"),
        ("clusters:\n  - {name: EU}\n", "clusters.0.name: must be a lowercase DNS label"),
        ("clusters:\n  - {name: eu, selector: 'a in (b'}\n", "clusters: eu: selector"),
        ("matrix: matrix/support-matrix.csv\n", "gpudrv.yaml has no clusters:"),
    ],
)
def test_a_bad_clusters_list_is_one_line(lab: Path, config: str, message: str) -> None:
    (lab / "gpudrv.yaml").write_text(config)
    found = run_main("audit", "--all-clusters", cwd=lab)
    assert (found.returncode, found.stdout) == (2, "")
    [line] = found.stderr.splitlines()
    assert message in line, line


def test_each_cluster_says_the_desired_state_it_was_read_with(fleet: Path) -> None:
    """Issue 37: every cluster read carries `desired`, the very desired state its single-cluster -o json
    says (audit, status, report: beside the cluster's counts; plan, diff, explain, preflight: beside its
    own document, which carries the same); us is pinned by its entry, eu is not; gone has an error and
    no desired state."""
    config = fleet / "gpudrv.yaml"
    config.write_text(
        config.read_text().replace(
            "{name: us, kubeconfig: us.kubeconfig}",
            "{name: us, kubeconfig: us.kubeconfig, operatorVersion: v25.10.1}",
        )
    )
    # status reads each cluster with its fleet's desired state in git, as single-cluster status --from
    for kind, read in (("audit", ()), ("status", ("--from", "clusters/lab")), ("report", ())):
        alone = json_of(kind, "--kubeconfig", "eu.kubeconfig", *read, cwd=fleet, code=0, kind=kind)
        many = json_of(kind, "--all-clusters", cwd=fleet, code=2, kind=kind)
        eu, us, gone = many["clusters"]
        assert eu["desired"] == alone["desired"], kind
        assert eu["desired"]["operator"] == {"version": None, "from": "newest", "origin": None}
        assert us["desired"]["operator"] == {
            "version": "v25.10.1",
            "from": "gpudrv.yaml",
            "origin": "gpudrv.yaml:5",  # us's entry, where its operatorVersion is written
        }
        sources = ["Node manifests"] if kind == "status" else ["live cluster"]
        assert [source["kind"] for source in us["desired"]["sources"]] == sources, kind
        assert (gone["desired"], gone["error"] is not None) == (None, True)
        assert "desired" not in many  # one per cluster, none for the whole
        as_yaml = run_main(kind, "--all-clusters", "-o", "yaml", cwd=fleet)
        assert yaml.safe_load(as_yaml.stdout)["clusters"] == many["clusters"]
    flag = json_of(
        "audit", "--all-clusters", "--operator-version", "v26.7.0", cwd=fleet, code=2, kind="audit"
    )
    assert [c["desired"] and c["desired"]["operator"] for c in flag["clusters"]] == [
        {"version": "v26.7.0", "from": "flag", "origin": "--operator-version"},
        {"version": "v26.7.0", "from": "flag", "origin": "--operator-version"},
        None,
    ]  # the flag over us's entry

    alone = json_of("plan", "--kubeconfig", "eu.kubeconfig", cwd=fleet, code=0, kind="plan")
    plan = json_of("plan", "--all-clusters", cwd=fleet, code=2, kind="clusters")
    eu, us, gone = plan["clusters"]
    assert eu["desired"] == eu["result"]["desired"] == alone["desired"]
    assert [source["kind"] for source in eu["desired"]["sources"]] == ["Node manifests"]  # the fleet in git
    assert us["desired"] == us["result"]["desired"] and us["desired"]["operator"]["version"] == "v25.10.1"
    assert (gone["result"], gone["desired"]) == (None, None)
    for verb, args, code in (
        ("diff", ("--cluster", "eu", "--cluster", "us"), 1),
        ("preflight", ("--all-clusters", "--kernel", "6.8.0-60-generic"), 2),
        ("explain", ("--all-clusters",), 2),
    ):
        document = json_of(verb, *args, cwd=fleet, code=code, kind="clusters")
        read = [cluster for cluster in document["clusters"] if cluster["result"] is not None]
        assert [cluster["name"] for cluster in read] == ["eu", "us"], verb
        assert all(cluster["desired"] == cluster["result"]["desired"] for cluster in read), verb
        assert [cluster["desired"]["operator"]["version"] for cluster in read] == [None, "v25.10.1"], verb
