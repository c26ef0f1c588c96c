"""`gpudrv matrix impact --base REF` on a Helm-installed fleet in a real repository: the base side under
the base commit's chart version, values and gpudrv.yaml, the head side under the working tree's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.git.conftest import Script

FLEET = "clusters/gpu-operator-helm"
RELEASE = f"{FLEET}/helmrelease.yaml"
MATRIX = "matrix/gpu-operator-helm.csv"
ARROW = "\u2192"
KERNEL_0, KERNEL_1 = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.40.1.el9_4.x86_64"


@pytest.fixture
def fleet(lab: Path) -> Script:
    return Script.committed(lab, "The Helm fleet (#1)")


def impact(fleet: Script, *args: str) -> tuple[int, str, str]:
    result = run_main(
        "matrix", "impact", "--base", "main", "--from", FLEET, "--matrix", MATRIX, *args, cwd=fleet.root
    )
    return result.returncode, result.stdout, result.stderr


def bump(fleet: Script, old: str = "version: v25.3.4", new: str = "version: v26.7.0") -> None:
    path = fleet.root / RELEASE
    path.write_text(path.read_text().replace(old, new, 1))


def test_a_chart_bump_shows_every_retagged_node_and_fails_on_the_missing_image(fleet: Script) -> None:
    bump(fleet)
    code, out, err = impact(fleet)
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"{MATRIX}: main {ARROW} working tree",
        "no rows added or removed",
        f"helm-rhel-0: OK {ARROW} OK  550-{KERNEL_0}-rhel9.4 {ARROW} 550-{KERNEL_0}-rhel9",
        f"helm-rhel-1: OK {ARROW} MISSING  550-{KERNEL_1}-rhel9.4 {ARROW} 550-{KERNEL_1}-rhel9",
        f"cause: chart v25.3.4 {ARROW} v26.7.0 changes the os tag of rhel 9.4 nodes: rhel9.4 {ARROW} rhel9",
    ]


def test_the_row_for_the_new_image_makes_the_bump_pass(fleet: Script) -> None:
    bump(fleet)
    (fleet.root / MATRIX).write_text((fleet.root / MATRIX).read_text() + f"550,{KERNEL_1},rhel9\n")
    code, out, _ = impact(fleet, "-o", "json")
    data = json.loads(out)
    assert (code, data["ok"], data["findings"]) == (0, True, [])
    assert [(n["node"], n["before_tag"], n["tag"]) for n in data["nodes"]] == [
        ("helm-rhel-0", f"550-{KERNEL_0}-rhel9.4", f"550-{KERNEL_0}-rhel9"),
        ("helm-rhel-1", f"550-{KERNEL_1}-rhel9.4", f"550-{KERNEL_1}-rhel9"),
    ]


def test_the_base_reads_its_own_gpudrv_yaml(fleet: Script) -> None:
    # At the base gpudrv.yaml pins v26.7.0 (rhel9); the change drops the pin: the chart's v25.3.4 rules.
    (fleet.root / "gpudrv.yaml").write_text("operatorVersion: v26.7.0\n")
    fleet.commit("Pin the operator (#2)")
    (fleet.root / "gpudrv.yaml").write_text(f"matrix: {MATRIX}\n")
    code, out, err = impact(fleet)
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == (
        f"cause: operatorVersion v26.7.0 {ARROW} chart v25.3.4 changes the os tag of rhel 9.4 nodes: "
        f"rhel9 {ARROW} rhel9.4"
    )


def test_a_values_change_names_the_driver_version_and_its_line(fleet: Script) -> None:
    bump(fleet, 'version: "550"', 'version: "535"')
    code, out, _ = impact(fleet)
    assert code == 1
    assert out.splitlines()[-1] == f"cause: driver version 550 {ARROW} 535 ({RELEASE}:23)"


def test_a_refused_rendering_fails_the_check_before_the_sync(fleet: Script) -> None:
    bump(fleet, 'version: "550"', 'version: "550"\n      nvidiaDriverCRD:\n        enabled: true')
    code, out, _ = impact(fleet, "-o", "json")
    data = json.loads(out)
    assert (code, data["ok"], data["findings"]) == (1, False, [])
    (problem,) = data["problems"]
    assert problem.startswith(f"{RELEASE}:23: HelmRelease gpu-operator: NVIDIADriver default")


def test_a_broken_base_names_the_ref(fleet: Script) -> None:
    (fleet.root / FLEET / "values.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    fleet.commit("Broken (#2)")
    (fleet.root / FLEET / "values.yaml").write_text(
        (fleet.root / FLEET / "values.yaml").read_text().replace("name: x", "name: gpu-operator-values")
        + 'data:\n  values.yaml: "driver: {usePrecompiled: true}"\n'
    )
    code, out, err = impact(fleet)
    assert (code, out) == (2, "")
    assert err.startswith(f"gpudrv: main:{RELEASE}:19: HelmRelease gpu-operator: valuesFrom ConfigMap"), err
