"""Issue 37: one fleet, one reading, against the real control plane. The commands that read a cluster
(tests/fleets.py LIVE_COMMANDS) run on every kind of fleet source in git, the cluster's kwok nodes being
the fleet's nodes; then the live cluster itself is the source (its ClusterPolicy, the operator release
pinned by the flag) for every command that reads it without --from. Every command agrees on the mode,
the operator release and its provenance, and each node's desired image. matrix fill reads two real
registries (tests/registry). The offline commands are tests/cli/test_fleet_matrix.py's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.core.contract.desired import SourceKind
from tests import fleets
from tests.conftest import REPO, gpudrv_command, gpudrv_env
from tests.e2e.conftest import TEST_LABEL, FakeNodes, Kube
from tests.e2e.test_operator_rollout import precompiled
from tests.git.conftest import Script
from tests.helm import chart
from tests.registry import harness

Tags = dict[str, str]
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
EMPTY_MATRIX = "matrix/empty.csv"  # matrix fill's: every image is one to fill
FLAG = "v26.3.3"


@pytest.fixture(scope="module")
def registries(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[harness.Registry, harness.Registry]]:
    """The upstream and the target of matrix fill, both empty: a dry run lists what it would copy."""
    binary = harness.ensure_built()
    found = [harness.Registry(binary, tmp_path_factory.mktemp(name), "htpasswd") for name in ("up", "target")]
    for registry in found:
        registry.prepare()
        registry.start()
    try:
        yield found[0], found[1]
    finally:
        for registry in found:
            registry.stop()


@dataclass
class Site:
    """One kind's repository, the cluster's nodes for it, and gpudrv run there."""

    root: Path
    kube: Kube
    nodes: FakeNodes
    env: dict[str, str]
    registries: tuple[harness.Registry, harness.Registry]

    def run(self, *args: str, codes: tuple[int, ...] = (0, 1)) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*gpudrv_command(), *args],
            cwd=self.root,
            env=gpudrv_env({**self.kube.env, **self.env}),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode in codes, (args, result.returncode, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.run(*args, "-o", "json").stdout)
        return document

    @property
    def selector(self) -> tuple[str, str]:
        return ("-l", self.nodes.selector)


@pytest.fixture
def site(
    kube: Kube, nodes: FakeNodes, tmp_path: Path, registries: tuple[harness.Registry, harness.Registry]
) -> Site:
    """The fleet's two nodes in the cluster, running driver 550 (the names are the fleet's own)."""
    kube.run("delete", "node", *fleets.NODES, "--ignore-not-found", "--wait=true", check=False)
    for index, name in enumerate(fleets.NODES):
        nodes.add(name, **fleets.node_labels(index))
    env = harness.pair_env(
        tmp_path / "auth",
        [(registries[0], harness.USER, harness.PASSWORD), (registries[1], harness.USER, harness.PASSWORD)],
    )
    return Site(tmp_path / "repo", kube, nodes, env, registries)


def _by_node(key: str = "tag") -> Callable[[dict[str, Any]], Tags]:
    return lambda document: {node["node"]: node[key] for node in document["nodes"] if node[key]}


def _planned(document: dict[str, Any]) -> Tags:
    return {
        node["node"]: str(node["detail"]).rpartition(":")[2]
        for node in document["nodes"]
        if node["outcome"] == "planned"
    }


def _to_fill(document: dict[str, Any]) -> Tags:
    return {name: image["tag"] for image in document["images"] for name in image["nodes"]}


def _read(
    site: Site, args: tuple[str, ...], tags: Callable[[dict[str, Any]], Tags] | None
) -> tuple[dict[str, Any], Tags | None]:
    document = site.json(*args)
    return document["desired"], tags(document) if tags else None


FROM = ("--from", fleets.FOLDER)
MATRIX = ("--matrix", fleets.MATRIX)
MERGED = ("--merged-ref", "main")


def _fill(site: Site) -> tuple[str, ...]:
    up, target = site.registries
    return ("matrix", "fill", *FROM, "--matrix", EMPTY_MATRIX, "--upstream", up.repository,
            "--registry", target.repository, "--dry-run")  # fmt: skip


def _hold(site: Site, expected: fleets.Expected) -> tuple[dict[str, Any] | None, Tags | None]:
    """apply --hold: on an operator fleet it holds all but the canary (then --release puts them back);
    the lab's apply applies nothing a GitOps engine owns, so it refuses."""
    args = ("apply", "--hold", *FROM, *MATRIX, *MERGED, *site.selector)
    if expected.mode == "lab":
        refused = site.run(*args, codes=(2,))
        assert "declares no ClusterPolicy or NVIDIADriver" in refused.stderr, refused.stderr
        return None, None
    document = site.json(*args)
    held = {
        name: (site.kube.get("node", name)["metadata"].get("labels") or {}).get(SKIP_LABEL)
        for name in fleets.NODES
    }
    assert held == {fleets.NODES[0]: None, fleets.NODES[1]: "true"}, (held, document)
    site.run("apply", "--release", *FROM, *MATRIX, *MERGED, *site.selector)
    return document["desired"], None


RUNS: dict[str, Callable[[Site, fleets.Expected], tuple[dict[str, Any] | None, Tags | None]]] = {
    "status": lambda s, e: _read(s, ("status", *FROM, *MATRIX, *s.selector), _by_node()),
    "diff": lambda s, e: _read(s, ("diff", *FROM, *s.selector), None),
    "plan": lambda s, e: _read(s, ("plan", *FROM, *MATRIX, *MERGED, *s.selector), _by_node("target_tag")),
    "apply --dry-run": lambda s, e: _read(
        s, ("apply", "--dry-run", *FROM, *MATRIX, *MERGED, *s.selector), _planned
    ),
    "apply --hold": _hold,
    "matrix fill --dry-run": lambda s, e: _read(s, _fill(s), _to_fill),
}


@pytest.mark.parametrize("kind", list(fleets.WRITERS), ids=str)
def test_every_command_that_reads_a_cluster_reads_every_kind_of_fleet_alike(
    kind: SourceKind, site: Site
) -> None:
    site.root.mkdir()
    expected = fleets.repository(site.root, kind, labels={TEST_LABEL: site.nodes.id})
    (site.root / EMPTY_MATRIX).write_text("driver_branch,kernel,os_tag\n")
    for command, run in RUNS.items():
        desired, tags = run(site, expected)
        if desired is not None:
            expected.check(desired, f"{command} on {kind}")
        if tags is not None:
            assert tags == expected.tags(), f"{command} on {kind}: {tags}"
    assert set(RUNS) | {"reconcile --once"} == set(fleets.LIVE_COMMANDS)


# --- the live cluster as the source --------------------------------------------------------------


@pytest.fixture
def live_policy(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The operator's CRDs (its chart's own files) and the fleet's ClusterPolicy, in the cluster; both
    gone afterwards (the lab-mode tests refuse a cluster with a ClusterPolicy)."""
    crds = chart.chart_copy(tmp_path_factory.mktemp("chart")) / "crds"
    files = [crds / "nvidia.com_clusterpolicies.yaml", crds / "nvidia.com_nvidiadrivers.yaml"]
    for path in files:
        kube.run("apply", "--server-side", "-f", str(path))
    kube.wait_for(
        "the ClusterPolicy CRD", lambda: kube.run("get", "clusterpolicies", check=False).returncode == 0
    )
    kube.apply(json.dumps(precompiled(fleets.BRANCH)))  # the operator tests' ClusterPolicy, precompiled 570
    try:
        yield
    finally:
        kube.run("delete", "clusterpolicies", "--all", "--wait=true", check=False)
        for path in files:
            kube.run("delete", "-f", str(path), "--ignore-not-found", "--wait=true", check=False)


def test_every_command_reads_the_live_cluster_alike(site: Site, live_policy: None, tmp_path: Path) -> None:
    """The cluster's ClusterPolicy (precompiled 570), no operator running: --operator-version pins the
    release. The matrix lacks node 1's image: each command names the same image missing."""
    site.root.mkdir()
    fleets.repository(
        site.root, SourceKind.CLUSTER_POLICY, rows=[f"{fleets.BRANCH},{fleets.KERNELS[0]},ubuntu22.04"]
    )
    (site.root / fleets.FOLDER).rename(site.root / "unused")  # nothing here says --from: the cluster is read
    (site.root / EMPTY_MATRIX).write_text("driver_branch,kernel,os_tag\n")
    expected = fleets.Expected("ClusterPolicy", FLAG, "flag")
    pin, select = ("--operator-version", FLAG), site.selector
    up, target = site.registries
    found: dict[str, tuple[dict[str, Any], Tags | None]] = {
        "audit": _read(site, ("audit", *MATRIX, *pin, *select), _by_node()),
        "report": _read(site, ("report", *MATRIX, *pin, *select), _by_node()),
        "status": _read(site, ("status", *MATRIX, *pin, *select), _by_node()),
        "matrix impact": _read(
            site, ("matrix", "impact", "--base", "main", *MATRIX, *pin, *select), _by_node()
        ),
        "explain": _read(site, ("explain", *pin), None),
        "matrix fill --dry-run": _read(
            site,
            (
                "matrix",
                "fill",
                "--matrix",
                EMPTY_MATRIX,
                "--upstream",
                up.repository,
                "--registry",
                target.repository,
                "--dry-run",
                *pin,
                *select,
            ),
            _to_fill,
        ),
    }
    for name in fleets.NODES:
        document = site.json("tag", name, *pin)
        found[f"tag {name}"] = (document["desired"], {name: document["tag"]})
    preflight = site.json("preflight", "--kernel", fleets.NEXT_KERNEL, *MATRIX, *pin, *select)
    found["preflight"] = (
        preflight["desired"],
        {node["node"]: node["tag"] for node in preflight["nodes"]},
    )
    for command, (desired, tags) in found.items():
        expected.check(desired, command)
        assert desired["sources"] == [{"kind": "live cluster", "where": desired["sources"][0]["where"]}]
        if command == "preflight":
            assert tags == {name: fleets.tag(i, fleets.NEXT_KERNEL) for i, name in enumerate(fleets.NODES)}
        elif command.startswith("tag "):
            assert tags is not None and tags.items() <= expected.tags().items(), f"{command}: {tags}"
        elif tags is not None:
            assert tags == expected.tags(), f"{command}: {tags}"
    # The CronJob's audit: the same release, the same image missing, in its own words.
    once = site.run(
        "reconcile", "--once", "--repo", str(site.root), "--workdir", str(tmp_path / "work"), *pin, codes=(1,)
    )
    image = f"registry.gpudrv.invalid/nvidia/driver:{fleets.tag(1)}"
    assert f"{fleets.NODES[1]} MISSING {image} (ClusterPolicy/gpu-cluster-policy)" in once.stdout.splitlines()
    assert f"{fleets.NODES[0]} MISSING" not in once.stdout, once.stdout


def test_a_plain_apply_on_a_helm_fleet_waits_for_the_engine_and_writes_nothing_of_helms(site: Site) -> None:
    """The chart's ClusterPolicy is Helm's to write: apply says so, holds the moving nodes but the canary,
    and waits for the engine's sync (here it never comes: --timeout ends the wait, the holds stay)."""
    site.root.mkdir()
    fleets.repository(site.root, SourceKind.FLUX_HELM_RELEASE, labels={TEST_LABEL: site.nodes.id})
    args = ("apply", *FROM, *MATRIX, *MERGED, *site.selector)
    waited = site.run(*args, "--timeout", "2s", codes=(1,))
    assert "the driver resources are rendered from Helm values (fleet/helmrelease.yaml:" in waited.stdout
    assert "gpudrv never applies them" in waited.stdout
    assert "timed out after 2s waiting for the GitOps engine to apply the driver resources" in waited.stdout
    assert "applied ClusterPolicy" not in waited.stdout
    assert site.kube.run("get", "clusterpolicies", check=False).returncode != 0  # no CRD: nothing was written
    site.run("apply", "--release", *FROM, *MATRIX, *MERGED, *site.selector)


def test_the_bundled_flux_fleet_plans_and_applies_one_plan(
    kube: Kube, nodes: FakeNodes, tmp_path: Path
) -> None:
    """The issue's own story: the bundled Flux fleet (clusters/gpu-operator-helm), its nodes in the cluster,
    the HelmRelease's driver.version moved 550 -> 570 with no 570 image in the matrix. plan and
    apply --dry-run both go the operator's way through the chart's ClusterPolicy and both stop at the
    image gate; apply never says "nothing to upgrade"."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "clusters" / "gpu-operator-helm", root / "fleet")
    (root / "matrix").mkdir()
    shutil.copy(REPO / "matrix" / "gpu-operator-helm.csv", root / "matrix" / "support-matrix.csv")
    for manifest in sorted((root / "fleet" / "nodes").glob("*.yaml")):
        document = yaml.safe_load(manifest.read_text())
        kube.run(
            "delete", "node", document["metadata"]["name"], "--ignore-not-found", "--wait=true", check=False
        )
        nodes.add(document["metadata"]["name"], **document["metadata"]["labels"])
    release = root / "fleet" / "helmrelease.yaml"
    release.write_text(release.read_text().replace('version: "550"', 'version: "570"'))
    Script.committed(root, "driver 570")
    site = Site(root, kube, nodes, {}, ())  # type: ignore[arg-type]  # no registry is read here
    common = (*FROM, *MATRIX, *MERGED, *site.selector)
    plan = site.run("plan", *common, codes=(1,))
    dry = site.run("apply", "--dry-run", *common, codes=(1,))
    for name, kernel in (
        ("helm-rhel-0", "5.14.0-427.13.1.el9_4.x86_64"),
        ("helm-rhel-1", "5.14.0-427.40.1.el9_4.x86_64"),
    ):
        tag = f"570-{kernel}-rhel9.4"
        image = f"nvcr.io/nvidia/driver:{tag}"
        moving = f"{name}: driver 550 -> 570 (ClusterPolicy/cluster-policy), image {image} BLOCKED"
        assert moving in plan.stdout, plan.stdout
        assert f"[blocked] image: {tag} is not in matrix/support-matrix.csv on main" in plan.stdout, (
            plan.stdout
        )
        assert f"{name}: image gate: {tag} is not in matrix/support-matrix.csv on main" in dry.stdout, (
            dry.stdout
        )
    assert "nothing to upgrade" not in dry.stdout and dry.stdout.rstrip().endswith("nothing was changed")
    dry_json = json.loads(site.run("apply", "--dry-run", *common, "-o", "json", codes=(1,)).stdout)
    plan_json = json.loads(site.run("plan", *common, "-o", "json", codes=(1,)).stdout)
    assert dry_json["desired"] == plan_json["desired"]
    assert plan_json["desired"]["operator"]["version"] == "v25.3.4"
