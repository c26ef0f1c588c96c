"""Many clusters, one matrix, against real control planes at once: the e2e tier's cluster and a second
one (etcd and kube-apiserver from the same cached binaries, tests/e2e/conftest.py's second_kube), and a
third that goes away (spare_kube). gpudrv.yaml names them; each entry's selector keeps a cluster to
this test's nodes."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.cli.test_output_contract import schema
from tests.conftest import REPO, run_gpudrv
from tests.docs import examples
from tests.e2e import clusters
from tests.e2e.conftest import FakeNodes, Kube, PlaneKube

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
RHEL = {
    "feature.node.kubernetes.io/system-os_release.ID": "rhel",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "9.4",
    KERNEL: "5.14.0-427.13.1.el9_4.x86_64",
}


def fleet(root: Path, entries: list[str]) -> Path:
    root.mkdir(exist_ok=True)
    (root / "matrix").mkdir(exist_ok=True)
    (root / "matrix/support-matrix.csv").write_bytes((REPO / "matrix/support-matrix.csv").read_bytes())
    (root / "gpudrv.yaml").write_text("matrix: matrix/support-matrix.csv\nclusters:\n" + "".join(entries))
    return root


def entry(name: str, kube: Kube, nodes: FakeNodes, **more: str) -> str:
    fields = {"name": name, "kubeconfig": str(kube.kubeconfig), "selector": nodes.selector, **more}
    return f"  - {json.dumps(fields)}\n"  # JSON is YAML


def gpudrv(root: Path, *args: str) -> Any:
    return run_gpudrv(*args, cwd=root, env={"KUBECONFIG": ""})


def as_json(root: Path, *args: str, code: int, kind: str = "audit") -> dict[str, Any]:
    found = gpudrv(root, *args, "-o", "json")
    assert found.returncode == code, found.stdout + found.stderr
    document: dict[str, Any] = json.loads(found.stdout)
    jsonschema.validate(document, schema(kind))
    return document


@pytest.fixture
def two(  # noqa: PLR0917 (fixtures)
    kube: Kube, nodes: FakeNodes, second_kube: PlaneKube, second_nodes: FakeNodes, unique: str, tmp_path: Path
) -> Iterator[tuple[Path, str, str]]:
    """main and second, each with a covered node and one on a kernel the matrix lacks (labelled
    pool=gap): the fleet folder and the two gap nodes."""
    nodes.add_gpu(f"{unique}-ok")
    gap = nodes.add_gpu(f"{unique}-gap", {KERNEL: "5.15.0-998-generic", "pool": "gap"})
    second_nodes.add_gpu(f"{unique}-ok")  # the same name in the other cluster
    gap2 = second_nodes.add_gpu(f"{unique}-gap2", {KERNEL: "5.15.0-997-generic", "pool": "gap"})
    root = fleet(tmp_path / "fleet", [entry("main", kube, nodes), entry("second", second_kube, second_nodes)])
    yield root, gap, gap2


def test_findings_from_both_clusters(two: tuple[Path, str, str]) -> None:
    root, gap, gap2 = two
    found = gpudrv(root, "audit", "--all-clusters")
    assert (found.returncode, found.stderr) == (1, ""), found.stdout + found.stderr
    assert found.stdout.splitlines() == [
        f"main/{gap} MISSING 550-5.15.0-998-generic-ubuntu22.04",
        f"second/{gap2} MISSING 550-5.15.0-997-generic-ubuntu22.04",
    ]
    document = as_json(root, "audit", "--all-clusters", code=1)
    assert [(c["name"], c["ok"], c["node_count"], c["error"]) for c in document["clusters"]] == [
        ("main", False, 2, None),
        ("second", False, 2, None),
    ]
    assert sorted((n["cluster"], n["node"], n["status"]) for n in document["nodes"]) == sorted(
        [
            ("main", gap.replace("-gap", "-ok"), "OK"),
            ("main", gap, "MISSING"),
            ("second", gap.replace("-gap", "-ok"), "OK"),
            ("second", gap2, "MISSING"),
        ]
    )
    report = as_json(root, "report", "--all-clusters", code=0, kind="report")
    assert (report["node_count"], report["missing_count"]) == (4, 2)


def test_selector_applies_to_each_cluster(two: tuple[Path, str, str]) -> None:
    root, gap, gap2 = two
    document = as_json(root, "audit", "--all-clusters", "-l", "pool=gap", code=1)
    assert sorted((n["cluster"], n["node"]) for n in document["nodes"]) == [("main", gap), ("second", gap2)]
    status = as_json(root, "status", "--cluster", "second", "-l", "pool=gap", code=0, kind="status")
    assert [(n["cluster"], n["node"]) for n in status["nodes"]] == [("second", gap2)]


def test_each_cluster_has_its_operator_version(  # noqa: PLR0917 (fixtures)
    kube: Kube, nodes: FakeNodes, second_kube: PlaneKube, second_nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    """A RHEL 9.4 node in each: the GPU Operator's os-tag rule changed in v26.7.0 (rhel9.4 before it,
    rhel9 from it on), so the same node needs another image in each cluster."""
    old = nodes.add_gpu(f"{unique}-rhel", RHEL)
    new = second_nodes.add_gpu(f"{unique}-rhel", RHEL)
    root = fleet(
        tmp_path / "fleet",
        [
            entry("old", kube, nodes, operatorVersion="v25.10.1"),
            entry("new", second_kube, second_nodes, operatorVersion="v26.7.0"),
        ],
    )
    document = as_json(root, "audit", "--all-clusters", code=1)
    tags = {(n["cluster"], n["node"]): n["tag"] for n in document["nodes"]}
    assert tags == {
        ("old", old): "550-5.14.0-427.13.1.el9_4.x86_64-rhel9.4",
        ("new", new): "550-5.14.0-427.13.1.el9_4.x86_64-rhel9",
    }
    # each cluster says the release it was read with, and where it came from (issue 37)
    assert [
        (c["desired"]["operator"]["version"], c["desired"]["operator"]["from"]) for c in document["clusters"]
    ] == [
        ("v25.10.1", "gpudrv.yaml"),
        ("v26.7.0", "gpudrv.yaml"),
    ]
    flag = as_json(root, "audit", "--all-clusters", "--operator-version", "v26.7.0", code=1)
    assert {n["tag"] for n in flag["nodes"]} == {"550-5.14.0-427.13.1.el9_4.x86_64-rhel9"}  # the flag wins
    assert [c["desired"]["operator"] for c in flag["clusters"]] == [
        {"version": "v26.7.0", "from": "flag", "origin": "--operator-version"}
    ] * 2


def test_a_cluster_that_stops_answering_mid_run(
    two: tuple[Path, str, str], spare_kube: PlaneKube, unique: str
) -> None:
    """The third cluster's API server is frozen (SIGSTOP) while the audit runs: its read times out on
    its own timeout and is one line; the other two clusters' results are complete. Then it is gone."""
    root, gap, gap2 = two
    spare = FakeNodes(spare_kube, wait_ready=False)
    spare.add_gpu(f"{unique}-spare")
    with (root / "gpudrv.yaml").open("a") as config:
        config.write(entry("spare", spare_kube, spare))
    pid = json.loads((spare_kube.state / "state.json").read_text())["pids"]["kube-apiserver"]
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        found = gpudrv(root, "audit", "--all-clusters", "--request-timeout", "3s")
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert found.returncode == 2, found.stdout + found.stderr
    assert found.stdout.splitlines() == [
        f"main/{gap} MISSING 550-5.15.0-998-generic-ubuntu22.04",
        f"second/{gap2} MISSING 550-5.15.0-997-generic-ubuntu22.04",
    ]
    [line] = found.stderr.splitlines()
    assert line.startswith("gpudrv: cluster spare: "), line
    assert took < 30, took  # its own timeout, not the others' time added up

    spare_kube.stop()
    gone = gpudrv(root, "audit", "--all-clusters", "-o", "json")
    assert gone.returncode == 2
    document = json.loads(gone.stdout)
    assert [c["error"] is None for c in document["clusters"]] == [True, True, False]
    assert "cannot reach the cluster" in document["clusters"][2]["error"]
    assert len(document["findings"]) == 2


def door() -> examples.Block:
    """The block docs/clusters.md shows after `python -m tests.e2e.clusters DIR`: its door."""
    page = REPO / "docs" / "clusters.md"
    text = page.read_text(encoding="utf-8")
    after = text[: text.index("python -m tests.e2e.clusters DIR")].count("\n") + 1
    return next(block for block in examples.blocks(page) if block.line > after and block.live)


def test_the_door_of_many_clusters(tmp_path: Path) -> None:
    """python -m tests.e2e.clusters DIR, then the commands docs/clusters.md shows, read from the page and
    run in DIR as tests/docs runs an example: each prints what the page shows (and exits as its
    `echo $?` shows)."""
    block = door()
    folder = tmp_path / "door"
    try:
        assert clusters.main([str(folder)]) == 0
        actual = examples.run_in(block, folder, tmp_path / "shell")
        difference = examples.mismatch(block, actual)
        assert difference is None, f"docs/clusters.md:{block.line}: the output differs\n\n{difference}"
    finally:
        clusters.main([str(folder), "--down"])
