"""The GPU Operator's driver resources as the desired driver, offline: the example fleets, a driver bump
in a pull request, the os-tag rule per release, gpudrv.yaml, and the bad inputs (one line, exit 2)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_github_cli import commands, in_actions
from tests.conftest import run_main

POOLS = "clusters/gpu-operator-pools"
POLICY = "clusters/gpu-operator"
MATRIX = "matrix/gpu-operator.csv"
UBUNTU_DRIVER = f"{POOLS}/nvidiadriver-ubuntu.yaml"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("gpudrv: ")
    for fragment in fragments:
        assert fragment in line, line
    return line


def test_the_example_fleets_pass(lab: Path) -> None:
    # Outside lab mode the OK line says what was checked.
    for fleet, nodes in ((POOLS, 3), (POLICY, 2)):
        result = run_main("audit", "--from", fleet, "--matrix", MATRIX, cwd=lab)
        expected = f"OK: {nodes} GPU nodes, 6 images in {MATRIX}\n"
        assert (result.returncode, result.stdout) == (0, expected), result.stderr


def test_a_driver_bump_strands_the_kernel_without_an_image(lab: Path) -> None:
    edit(lab / UBUNTU_DRIVER, 'version: "535"', 'version: "550"')
    result = run_main("audit", "--from", POOLS, "--matrix", MATRIX, cwd=lab)
    assert result.returncode == 1
    assert result.stdout == (
        "pool-ubuntu-1 MISSING nvcr.io/nvidia/driver:550-6.8.0-52-generic-ubuntu22.04 (NVIDIADriver/ubuntu)\n"
    )
    data = json.loads(run_main("audit", "--from", POOLS, "--matrix", MATRIX, "-o", "json", cwd=lab).stdout)
    (finding,) = data["findings"]
    assert data["mode"] == "NVIDIADriver"
    assert finding["resource"] == {
        "kind": "NVIDIADriver", "name": "ubuntu", "version": "550", "origin": f"{UBUNTU_DRIVER}:11",
    }  # fmt: skip


def test_the_pr_check_annotates_the_resource_once_per_missing_image(lab: Path) -> None:
    edit(lab / UBUNTU_DRIVER, 'version: "535"', 'version: "550"')
    extra = (lab / f"{POOLS}/nodes/pool-ubuntu-1.yaml").read_text()
    for index in range(2, 14):  # a big pool on the same kernel: still one annotation, counted
        node = extra.replace("pool-ubuntu-1", f"pool-ubuntu-{index}")
        (lab / f"{POOLS}/nodes/pool-ubuntu-{index}.yaml").write_text(node)
    result = in_actions(lab, "audit", "--from", POOLS, "--matrix", MATRIX)
    assert result.returncode == 1
    (line,) = commands(result.stdout)
    assert line.startswith(f"::error file={UBUNTU_DRIVER},line=11,title=driver image 550-6.8.0-52-generic")
    assert (
        "NVIDIADriver/ubuntu (version 550) needs nvcr.io/nvidia/driver:550-6.8.0-52-generic-ubuntu22.04"
        in line
    )
    assert "for kernel 6.8.0-52-generic" in line and "13 nodes (pool-ubuntu-1, pool-ubuntu-10," in line
    assert "and 3 more)" in line


def test_the_operator_release_decides_the_rhel_tag(lab: Path) -> None:
    args = ("tag", "pool-rhel-0", "--from", POOLS)
    assert run_main(*args, cwd=lab).stdout == "535-5.14.0-427.13.1.el9_4.x86_64-rhel9\n"
    old = run_main(*args, "--operator-version", "v26.3.3", cwd=lab)
    assert old.stdout == "535-5.14.0-427.13.1.el9_4.x86_64-rhel9.4\n"
    audit = run_main("audit", "--from", POOLS, "--matrix", MATRIX, "--operator-version", "v25.10.1", cwd=lab)
    assert audit.stdout == (
        "pool-rhel-0 MISSING nvcr.io/nvidia/driver:535-5.14.0-427.13.1.el9_4.x86_64-rhel9.4"
        " (NVIDIADriver/rhel)\n"
    )


def test_gpudrv_yaml_gives_the_defaults_and_flags_win(lab: Path) -> None:
    (lab / "gpudrv.yaml").write_text(f"fleet: {POOLS}\nmatrix: {MATRIX}\noperatorVersion: v26.3.3\n")
    audit = run_main("audit", "--from", POOLS, cwd=lab)
    assert "rhel9.4" in audit.stdout  # the matrix and the release both came from the file
    newer = run_main("audit", "--from", POOLS, "--operator-version", "v26.7.0", cwd=lab)
    assert newer.stdout == f"OK: 3 GPU nodes, 6 images in {MATRIX}\n"
    assert run_main("manifests", "validate", cwd=lab).stdout == f"{POOLS}: 3 Node manifests, valid\n"
    moved = lab / "conf"
    moved.mkdir()
    (lab / "gpudrv.yaml").rename(moved / "fleet.yaml")  # paths are read from the file's own folder
    (moved / "fleet.yaml").write_text(f"matrix: ../{MATRIX}\n")
    ok = f"OK: 3 GPU nodes, 6 images in conf/../{MATRIX}\n"
    assert run_main("--config", "conf/fleet.yaml", "audit", "--from", POOLS, cwd=lab).stdout == ok
    from_env = run_main("audit", "--from", POOLS, cwd=lab, env={"GPUDRV_CONFIG": "conf/fleet.yaml"})
    assert from_env.stdout == ok


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("matrix: [a]\n", ("gpudrv.yaml:1: matrix: ['a'] is not of type 'string'",)),
        (
            "fleet: x\nregistr: y\n",
            ("gpudrv.yaml:2: unknown key 'registr'", "known keys: clusters, fleet, helm, matrix"),
        ),
        ("registry: 'not a repo'\n", ("gpudrv.yaml:1: registry: must be the repository",)),
        ("operatorVersion: 26.3\n", ("gpudrv.yaml:1: operatorVersion:", "is not of type 'string'")),
        ("- a\n", ("gpudrv.yaml:1: a gpudrv config is one YAML mapping",)),
    ],
)
def test_a_broken_config_is_one_line(lab: Path, content: str, fragments: tuple[str, ...]) -> None:
    (lab / "gpudrv.yaml").write_text(content)
    one_line_error(run_main("audit", "--from", POOLS, cwd=lab), *fragments)


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ('  version: "535"\n', "", ("nvidiadriver-ubuntu.yaml:6:", "version not set")),
        ("usePrecompiled: true", "usePrecompiled: false", ("does not set usePrecompiled: true", "outside")),
        ('version: "535"', "version: 535", (":11: NVIDIADriver: spec.version must be a string",)),
        ("  repository: nvcr.io/nvidia\n", "", ("repository not set", "'/driver:535'")),
        (
            "    feature.node.kubernetes.io/system-os_release.ID: ubuntu\n",
            '    nvidia.com/gpu.present: "true"\n',
            ("node pool-rhel-0 is selected by both", "NVIDIADriver/rhel", "NVIDIADriver/ubuntu", "overlap"),
        ),
        (
            "apiVersion: nvidia.com/v1alpha1",
            "apiVersion: nvidia.com/v1",
            ("must have apiVersion: nvidia.com/v1alpha1",),
        ),
    ],
)
def test_bad_driver_resources_are_one_line(lab: Path, old: str, new: str, fragments: tuple[str, ...]) -> None:
    edit(lab / UBUNTU_DRIVER, old, new)
    one_line_error(run_main("audit", "--from", POOLS, "--matrix", MATRIX, cwd=lab), *fragments)


@pytest.mark.parametrize("version", ["v26.4.0", "latest", "v23.9.2"])
def test_an_unknown_operator_release_is_one_line(lab: Path, version: str) -> None:
    result = run_main("audit", "--from", POOLS, "--matrix", MATRIX, "--operator-version", version, cwd=lab)
    one_line_error(result, "--operator-version:", version)


def test_two_cluster_policies_are_refused(lab: Path) -> None:
    one_line_error(
        run_main("audit", "--from", "clusters", cwd=lab), "ClusterPolicy/cluster-policy is declared twice"
    )


def test_a_mixed_os_cluster_policy_fails_with_the_exact_images(lab: Path) -> None:
    fleet = lab / "mixed"
    fleet.mkdir()
    (fleet / "policy.yaml").write_text((lab / POLICY / "cluster-policy.yaml").read_text())
    for node in (lab / POOLS / "nodes").iterdir():
        (fleet / node.name).write_text(node.read_text())
    result = run_main("audit", "--from", "mixed", "--matrix", MATRIX, cwd=lab)
    assert result.returncode == 1
    fleet_line = next(line for line in result.stdout.splitlines() if line.startswith("fleet: "))
    assert (
        "pool-rhel-0 pulls nvcr.io/nvidia/driver:550-5.14.0-427.13.1.el9_4.x86_64-ubuntu22.04" in fleet_line
    )
    assert "pool-ubuntu-0 pulls nvcr.io/nvidia/driver:550-5.15.0-119-generic-rhel9" in fleet_line
    annotated = commands(in_actions(lab, "audit", "--from", "mixed", "--matrix", MATRIX).stdout)
    assert any(
        re.match(r"::error file=mixed/policy.yaml,line=3,title=GPU Operator fleet problem::", a)
        for a in annotated
    )


def test_explain_judges_the_driver_the_resources_will_install(lab: Path) -> None:
    job = """apiVersion: batch/v1
kind: Job
metadata: {name: cuda13, namespace: ml}
spec:
  template:
    spec:
      nodeSelector: {feature.node.kubernetes.io/system-os_release.ID: ubuntu}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: nvidia.com/cuda.driver.major, operator: Gt, values: ["540"]}
      containers: [{name: c, image: "nvcr.io/nvidia/pytorch:24.07-py3"}]
      restartPolicy: Never
"""
    (lab / POOLS / "job.yaml").write_text(job)
    before = run_main("explain", "--from", POOLS, cwd=lab)
    assert before.stdout.startswith("Job ml/cuda13 fits no node\n"), before.stdout
    edit(lab / UBUNTU_DRIVER, 'version: "535"', 'version: "550"')
    after = run_main("explain", "--from", POOLS, cwd=lab)
    assert after.stdout.startswith("Job ml/cuda13 fits pool-ubuntu-0, pool-ubuntu-1\n"), after.stdout


def test_apply_on_an_operator_fleet_stages_the_operator_and_reads_the_merged_matrix_first(lab: Path) -> None:
    """The operator's resources in DIR make apply the staged rollout (tests/e2e/test_gpu_operator.py
    runs it against the operator); its image gate reads the matrix on the merged ref before any request."""
    result = run_main("apply", "--from", POOLS, "--matrix", MATRIX, cwd=lab)
    one_line_error(result, "matrix/gpu-operator.csv", "not inside a git repository")


@pytest.mark.parametrize("flag", ["--hold", "--await-sync"])
def test_staging_around_an_engine_is_for_operator_fleets_only(lab: Path, flag: str) -> None:
    result = run_main("apply", "--from", "clusters/lab", flag, cwd=lab)
    one_line_error(
        result, f"{flag} stages a GPU Operator rollout", "declares no ClusterPolicy or NVIDIADriver"
    )


def test_hold_await_sync_and_release_exclude_each_other(lab: Path) -> None:
    result = run_main("apply", "--from", POOLS, "--hold", "--release", cwd=lab)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr, result.stderr
