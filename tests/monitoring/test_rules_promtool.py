"""deploy/monitoring's rules through the real promtool: `promtool check rules` on the rule file, and
`promtool test rules` on tests/monitoring/gpudrv.rules.test.yaml (the reboot gate's alert fires at once
for a node with the series, outlives a leader handover, goes 10 minutes after the series; the other
alerts fire after their `for:`; ALERTS shows what kured reads; with two clusters' series in one view,
each alert is its cluster's and the recording rules count per cluster and across the fleet).

promtool is github.com/prometheus/prometheus/cmd/promtool at the version tests/monitoring/go.mod pins,
built from the Go module proxy with `-tags remove_all_sd` (scripts/promtool build, cached; the first
run builds it). A build that fails fails these tests: they are never skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.promtool

RULE_FILE = REPO / "deploy" / "monitoring" / "gpudrv.rules.yaml"
TESTS = REPO / "tests" / "monitoring" / "gpudrv.rules.test.yaml"


@pytest.fixture(scope="session")
def promtool() -> Path:
    proc = subprocess.run(
        [str(REPO / "scripts" / "promtool"), "build"],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert proc.returncode == 0, f"scripts/promtool build failed:\n{proc.stderr[-3000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


def test_the_build_tag_drops_every_service_discovery_plugin(promtool: Path) -> None:
    """scripts/promtool's `-tags remove_all_sd` is upstream's: each plugins/plugin_*.go of the pinned
    module is built only without it (a bump that renamed the tag would quietly build them all)."""
    version = subprocess.run(
        [str(REPO / "scripts" / "promtool"), "version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/prometheus/prometheus@{version}"],
        cwd=REPO / "tests" / "monitoring",
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plugins = sorted((Path(json.loads(proc.stdout)["Dir"]) / "plugins").glob("plugin_*.go"))
    assert len(plugins) > 10
    for plugin in plugins:
        constraint = re.search(r"^//go:build (.*)$", plugin.read_text(), re.M)
        assert constraint and constraint.group(1).startswith("!remove_all_sd ||"), plugin.name


def run(promtool: Path, *args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_promtool_finds_the_nine_rules_valid(promtool: Path) -> None:
    """Five alerts, four recording rules."""
    proc = run(promtool, "check", "rules", RULE_FILE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 9 rules found" in proc.stdout + proc.stderr


def test_the_rules_unit_tests_pass(promtool: Path) -> None:
    proc = run(promtool, "test", "rules", TESTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def changed_copy(tmp_path: Path, old: str, new: str) -> Path:
    """The rule file with one change, and the unit tests pointed at it."""
    rules = RULE_FILE.read_text()
    assert old in rules
    (tmp_path / "deploy" / "monitoring").mkdir(parents=True)
    (tmp_path / "deploy" / "monitoring" / RULE_FILE.name).write_text(rules.replace(old, new))
    (tmp_path / "tests" / "monitoring").mkdir(parents=True)
    shutil.copy(TESTS, tmp_path / "tests" / "monitoring" / TESTS.name)
    return tmp_path / "tests" / "monitoring" / TESTS.name


GATE = "GPUDriverNextKernelImageMissing"
KEEP = "        keep_firing_for: 10m\n"
BROKEN = [
    (KEEP, "", "time: 11m"),  # without keep_firing_for the handover opens the gate
    (KEEP, KEEP + "        for: 5m\n", "time: 0s"),  # a `for:`: the gate is not shut at once
    ("(gpudrv_node_next_kernel_image_missing)", "(gpudrv_node_next_kernel_missing)", GATE),  # renamed
    ("expr: max by (cluster, node, kernel, tag)", "expr: max by (cluster, node, tag)", GATE),  # no kernel
    # the cluster dropped: two clusters' gpu-1 are one alert, and it names no cluster
    ("expr: max by (cluster, node, kernel, tag)", "expr: max by (node, kernel, tag)", GATE),
]


@pytest.mark.parametrize(("old", "new", "caught"), BROKEN)
def test_the_unit_tests_catch_a_broken_gate(
    promtool: Path, tmp_path: Path, old: str, new: str, caught: str
) -> None:
    proc = run(promtool, "test", "rules", changed_copy(tmp_path, old, new))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert caught in proc.stdout + proc.stderr


AUDIT = "time() - max by (cluster) (last_over_time(gpudrv_last_audit_success_timestamp_seconds[1d])) > 900"
# Each rule with `cluster` dropped, or without what finds a stale cluster among healthy ones.
MERGED = [
    ("expr: max by (cluster, node, tag)", "expr: max by (node, tag)", "GPUDriverImageMissing"),
    (AUDIT, "time() - max(gpudrv_last_audit_success_timestamp_seconds) > 900", "GPUDriverAuditStale"),
    (AUDIT, AUDIT.replace("last_over_time(", "(").replace("[1d]", ""), "GPUDriverAuditStale"),  # gone
    ("or max by (cluster) (gpudrv_leader) == 0\n", "", "GPUDriverAuditStale"),  # runs, none leads
    ("max by (cluster) (gpudrv_git_last", "max(gpudrv_git_last", "GPUDriverFleetRepoStale"),
    (
        "(tag) (max by (cluster, node, tag)",
        "(tag) (max by (node, tag)",
        'expr: "tag:gpudrv_node_image_missing:count"',  # the fleet-wide record (not cluster_tag:)
    ),
    (
        "(kernel, tag) (max by (cluster, node, kernel, tag)",
        "(kernel, tag) (max by (node, kernel, tag)",
        'expr: "kernel_tag:gpudrv_node_next_kernel_image_missing:count"',
    ),
]


@pytest.mark.parametrize(("old", "new", "caught"), MERGED)
def test_the_unit_tests_catch_a_rule_that_merges_clusters(
    promtool: Path, tmp_path: Path, old: str, new: str, caught: str
) -> None:
    proc = run(promtool, "test", "rules", changed_copy(tmp_path, old, new))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert caught in proc.stdout + proc.stderr
