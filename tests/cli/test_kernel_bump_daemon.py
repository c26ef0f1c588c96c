"""benchmarks/kernel_bump.py's simulated reboot daemon: its decision on plain labels, and the whole bump
offline on manifests, with the gate read from gpudrv audit's real JSON (through main())."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO, run_main


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kernel_bump", REPO / "benchmarks" / "kernel_bump.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bump = _load()
KERNEL, NEXT = bump.KERNEL, bump.NEXT_KERNEL


def test_a_node_needs_a_reboot_only_for_a_next_kernel_it_does_not_run() -> None:
    assert bump.needs_reboot({KERNEL: "k1", NEXT: "k2"})
    assert not bump.needs_reboot({KERNEL: "k1"})
    assert not bump.needs_reboot({KERNEL: "k1", NEXT: "k1"})


def test_the_daemon_reboots_one_node_a_tick_by_name_without_a_gate_or_with_it_open() -> None:
    pool = {"b": {KERNEL: "k1", NEXT: "k2"}, "a": {KERNEL: "k1", NEXT: "k2"}, "c": {KERNEL: "k2"}}
    assert bump.decide(pool, None) == bump.Decision("a")
    assert bump.decide(pool, bump.Gate(True)) == bump.Decision("a")


def test_a_closed_gate_holds_every_waiting_node_wherever_the_finding_is() -> None:
    pool = {"b": {KERNEL: "k1", NEXT: "k2"}, "a": {KERNEL: "k1", NEXT: "k2"}, "c": {KERNEL: "k2"}}
    # Cluster-wide, as kured's alert check: a finding on another node holds these too.
    assert bump.decide(pool, bump.Gate(False, ("elsewhere",))) == bump.Decision(None, ("a", "b"))


def test_nothing_to_do_when_no_node_waits() -> None:
    pool = {"a": {KERNEL: "k2"}, "b": {KERNEL: "k2", NEXT: "k2"}}
    assert bump.decide(pool, bump.Gate(False, ("a",))) == bump.Decision(None)
    assert bump.decide({}, None) == bump.Decision(None)


def test_a_reboot_moves_the_running_kernel_and_drops_the_next_one() -> None:
    assert bump.reboot_patch({KERNEL: "k1", NEXT: "k2", "x": "y"}) == {KERNEL: "k2", NEXT: None}


def test_read_audit_refuses_what_is_not_an_audit_document() -> None:
    with pytest.raises(ValueError, match="not a gpudrv audit document"):
        bump.read_audit('{"kind": "status"}', 0)
    with pytest.raises(ValueError):
        bump.read_audit("MISSING", 1)


# --- the bump offline, against gpudrv's real answers -------------------------------------------------


def _write_pool(folder: Path, pool: dict[str, dict[str, str]]) -> None:
    for name, labels in pool.items():
        document = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        (folder / f"{name}.yaml").write_text(json.dumps(document))  # JSON is YAML


def _audit(fleet: Path) -> bump.Audit:
    result = run_main("audit", "--from", "nodes", "--matrix", "matrix.csv", "-o", "json", cwd=fleet)
    assert result.returncode in (0, 1), result.stderr
    return bump.read_audit(result.stdout, result.returncode)


def _fleet(tmp_path: Path, nodes: int) -> tuple[Path, dict[str, dict[str, str]]]:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "matrix.csv").write_text(f"driver_branch,kernel,os_tag\n550,{bump.K1},{bump.OS_TAG}\n")
    pool = {bump.node_name(index): {**bump.node_labels(index), NEXT: bump.K2} for index in range(nodes)}
    _write_pool(tmp_path / "nodes", pool)
    return tmp_path, pool


def _reboot_all(fleet: Path, pool: dict[str, dict[str, str]], gated: bool, add_after: int) -> int:
    """The benchmark's loop on manifests; returns the held gate checks."""
    held = 0
    for _ in range(4 * len(pool) + add_after + 5):
        gate = bump.gate_of(_audit(fleet)) if gated else None
        decision = bump.decide(pool, gate)
        if decision.reboot is None and not decision.held:
            return held
        if decision.reboot is None:
            held += 1
            if held == add_after:
                added = run_main(
                    "matrix", "add", "--matrix", "matrix.csv", "550", bump.K2, bump.OS_TAG, cwd=fleet
                )
                assert added.returncode == 0, added.stderr
            continue
        patch = bump.reboot_patch(pool[decision.reboot])
        labels = {**pool[decision.reboot], **patch}
        pool[decision.reboot] = {key: value for key, value in labels.items() if value is not None}
        _write_pool(fleet / "nodes", pool)
    raise AssertionError("the daemon did not finish")


def test_without_the_gate_every_node_of_the_pool_loses_its_driver(tmp_path: Path) -> None:
    fleet, pool = _fleet(tmp_path, 3)
    before = _audit(fleet)
    assert (before.missing, before.next_missing_nodes) == (0, ("bump-00", "bump-01", "bump-02"))
    assert _reboot_all(fleet, pool, gated=False, add_after=0) == 0
    after = _audit(fleet)
    assert (after.nodes, after.missing, after.missing_nodes, after.exit_code) == (
        3, 3, ("bump-00", "bump-01", "bump-02"), 1,
    )  # fmt: skip
    assert after.next_missing_nodes == ()


def test_with_the_gate_reboots_wait_for_the_row_and_no_node_loses_its_driver(tmp_path: Path) -> None:
    fleet, pool = _fleet(tmp_path, 3)
    assert _reboot_all(fleet, pool, gated=True, add_after=2) == 2
    after = _audit(fleet)
    assert (after.nodes, after.missing, after.next_missing_nodes, after.exit_code) == (3, 0, (), 0)
    assert {labels[KERNEL] for labels in pool.values()} == {bump.K2}


def test_the_summary_line_carries_gpudrvs_counts() -> None:
    lost = bump.Audit(20, 20, (), (), 1)
    kept = bump.Audit(20, 0, (), (), 0)
    line = bump.summary(20, lost, kept)
    assert "without the gate 20 of 20 nodes lose their driver; with it 0" in line
    assert line.startswith(f"20-node pool, kernel {bump.K1} → {bump.K2} with no {bump.K2} image")
