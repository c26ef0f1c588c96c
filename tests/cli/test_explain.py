"""`gpudrv explain` through main(): the lab's CUDA jobs offline, every output, every refusal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.base import github_text
from tests.conftest import run_main

LAB = "clusters/lab"
JOBS = "clusters/lab/workloads/cuda-jobs.yaml"
MAJOR = "nvidia.com/cuda.driver.major"
VERSION_ID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
COMPAT_2407 = (
    "nvcr.io/nvidia/pytorch:24.07-py3 is CUDA 12.5.1, which was built for driver >= 555.42.06; {nodes} "
    "would run it in minor-version compatibility mode, without the features that need a newer driver"
)
UNCONDITIONED_2407 = (
    "nvcr.io/nvidia/pytorch:24.07-py3 is CUDA 12.5.1, which needs driver >= 525, but the placement states no "
    "nvidia.com/cuda.driver.* condition, so nothing keeps it off an older driver"
)
ALL_THREE = "lab-node-0 (550.90.07), lab-node-1 (535.183.06), lab-node-2 (550.90.07)"
LAB_TEXT = f"""\
Pod gpu-drv/cuda12-job fits lab-node-0
  lab-node-1: {MAJOR}=535 is not In [550]
  lab-node-2: {VERSION_ID}=24.04 is not In [22.04]
  warning: {COMPAT_2407.format(nodes="lab-node-0 (550.90.07)")}
Pod gpu-drv/cuda13-job fits no node
  lab-node-0: {MAJOR}=550 is not Gt 560
  lab-node-1: {MAJOR}=535 is not Gt 560
  lab-node-2: {MAJOR}=550 is not Gt 560
Deployment gpu-drv/trainer fits lab-node-0, lab-node-1, lab-node-2
  warning: {COMPAT_2407.format(nodes=ALL_THREE)}
  warning: {UNCONDITIONED_2407}
"""
NODE_580 = """apiVersion: v1
kind: Node
metadata:
  name: lab-node-3
  labels:
    nvidia.com/gpu.present: "true"
    nvidia.com/cuda.driver.major: "580"
    nvidia.com/cuda.driver.minor: "65"
    nvidia.com/cuda.driver.rev: "06"
"""
CUDA13_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: cuda13-train
  namespace: gpu-drv
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: nvcr.io/nvidia/pytorch:25.12-py3 # CUDA 13.1.0: needs driver >= 580
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: nvidia.com/cuda.driver.major
                    operator: Gt
                    values: ["540"] # too low a bar: admits the 550 nodes
"""


def workloads(stdout: str) -> list[dict[str, Any]]:
    """The workloads of explain's -o json object."""
    document = json.loads(stdout)
    assert document["kind"] == "explain"
    items: list[dict[str, Any]] = document["workloads"]
    return items


def fits(item: dict[str, Any]) -> list[str]:
    return [node["node"] for node in item["nodes"] if node["fits"]]


def reasons(item: dict[str, Any]) -> dict[str, str]:
    return {node["node"]: node["reason"] for node in item["nodes"] if not node["fits"]}


def explain(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = run_main("explain", *args, cwd=lab)
    assert "Traceback" not in result.stderr
    return result


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("gpudrv: ")
    for fragment in fragments:
        assert fragment in result.stderr


# --- the lab, offline -------------------------------------------------------------------------------


def test_lab_text(lab: Path) -> None:
    result = explain(lab, "--from", LAB)
    assert (result.returncode, result.stdout, result.stderr) == (1, LAB_TEXT, "")


def test_lab_json(lab: Path) -> None:
    result = explain(lab, "--from", LAB, "-o", "json")
    assert result.returncode == 1
    items = workloads(result.stdout)
    assert [(i["kind"], i["namespace"], i["name"], fits(i)) for i in items] == [
        ("Pod", "gpu-drv", "cuda12-job", ["lab-node-0"]),
        ("Pod", "gpu-drv", "cuda13-job", []),
        ("Deployment", "gpu-drv", "trainer", ["lab-node-0", "lab-node-1", "lab-node-2"]),
    ]
    assert reasons(items[1]) == {
        "lab-node-0": f"{MAJOR}=550 is not Gt 560",
        "lab-node-1": f"{MAJOR}=535 is not Gt 560",
        "lab-node-2": f"{MAJOR}=550 is not Gt 560",
    }
    assert reasons(items[0]) == {
        "lab-node-1": f"{MAJOR}=535 is not In [550]",
        "lab-node-2": f"{VERSION_ID}=24.04 is not In [22.04]",
    }
    assert reasons(items[2]) == {}
    assert items[1]["origin"] == f"{JOBS}:24"
    assert items[1]["scheduler"] is None  # offline there is no scheduler to ask
    assert items[0]["findings"] == [
        {
            "severity": "warning",
            "image": "nvcr.io/nvidia/pytorch:24.07-py3",
            "cuda": "12.5.1",
            "node_names": ["lab-node-0"],
            "message": COMPAT_2407.format(nodes="lab-node-0 (550.90.07)"),
        }
    ]


def test_lab_pr_check_warns_and_passes(lab: Path) -> None:
    result = explain(lab, "--from", LAB, "-o", "github")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[1] == (
        f"::warning file={JOBS},line=24,title=Pod gpu-drv/cuda13-job fits no node::"
        f"Pod gpu-drv/cuda13-job fits no node%0Alab-node-0: {MAJOR}=550 is not Gt 560"
        f"%0Alab-node-1: {MAJOR}=535 is not Gt 560%0Alab-node-2: {MAJOR}=550 is not Gt 560"
    )
    title = "Deployment gpu-drv/trainer%3A CUDA 12.5.1 and the node driver"
    assert lines[3] == (
        f"::warning file=clusters/lab/workloads/trainer.yaml,line=2,title={title}::{UNCONDITIONED_2407}"
    )
    assert sum(line.startswith("::warning ") for line in lines) == 4
    assert not any(line.startswith("::error") for line in lines)
    assert lines[-1] == (
        "gpudrv explain: 3 workloads, 1 fit no node, 0 CUDA driver errors, 3 CUDA driver warnings"
    )


def test_pr_check_paths_are_relative_to_the_checkout_even_when_given_absolute(lab: Path) -> None:
    result = explain(lab, "--from", str(lab / LAB), "-o", "github")
    assert f"file={JOBS},line=24" in result.stdout


def test_driver_too_old_for_the_image_is_an_error_and_fails_the_check(lab: Path) -> None:
    (lab / LAB / "workloads/cuda13-train.yaml").write_text(CUDA13_JOB)
    result = explain(lab, "--from", LAB, "-o", "github", "job/cuda13-train")
    assert result.returncode == 1
    message = (
        "nvcr.io/nvidia/pytorch:25.12-py3 is CUDA 13.1.0, which needs driver >= 580; "
        "lab-node-0 (550.90.07), lab-node-2 (550.90.07) cannot run it"
    )
    title = "Job gpu-drv/cuda13-train%3A CUDA 13.1.0 and the node driver"
    file = "clusters/lab/workloads/cuda13-train.yaml"
    assert result.stdout.splitlines() == [
        f"::error file={file},line=1,title={title}::{message}",
        "gpudrv explain: 1 workloads, 0 fit no node, 1 CUDA driver errors, 0 CUDA driver warnings",
    ]
    text = explain(lab, "--from", LAB, "job/cuda13-train")
    assert text.returncode == 1
    assert text.stdout.splitlines()[0] == "Job gpu-drv/cuda13-train fits lab-node-0, lab-node-2"
    assert text.stdout.splitlines()[-1] == f"  error: {message}"


def test_a_new_node_with_a_580_driver_takes_cuda13_job(lab: Path) -> None:
    (lab / LAB / "nodes/lab-node-3.yaml").write_text(NODE_580)
    result = explain(lab, "--from", LAB, "pod/cuda13-job", "-o", "json")
    assert result.returncode == 0
    [item] = workloads(result.stdout)
    assert (fits(item), item["findings"]) == (["lab-node-3"], [])


# --- choosing workloads -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["pod/cuda13-job"], ["cuda13-job"]),
        (["po/cuda12-job", "-n", "gpu-drv"], ["cuda12-job"]),
        (["deploy/trainer"], ["trainer"]),
        (["Deployment/trainer"], ["trainer"]),
        (["trainer"], ["trainer"]),  # a bare name is any kind
        (["-n", "gpu-drv"], ["cuda12-job", "cuda13-job", "trainer"]),
    ],
)
def test_targets(lab: Path, args: list[str], names: list[str]) -> None:
    result = explain(lab, "--from", LAB, "-o", "json", *args)
    assert [item["name"] for item in workloads(result.stdout)] == names


def test_every_kind_and_lists(lab: Path) -> None:
    template = '{"spec": {"nodeSelector": {"nvidia.com/cuda.driver.major": "535"}, "containers": []}}'
    (lab / LAB / "workloads/more.yaml").write_text(
        f"""apiVersion: v1
kind: List
items:
  - {{apiVersion: batch/v1, kind: CronJob, metadata: {{name: nightly, namespace: ml}},
     spec: {{schedule: "@daily", jobTemplate: {{spec: {{template: {template}}}}}}}}}
  - {{apiVersion: apps/v1, kind: StatefulSet, metadata: {{name: db}}, spec: {{template: {template}}}}}
  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: ignored}}}}
"""
    )
    result = explain(lab, "--from", LAB, "-o", "json")
    items = {(i["kind"], i["namespace"], i["name"]): i for i in workloads(result.stdout)}
    assert fits(items["CronJob", "ml", "nightly"]) == ["lab-node-1"]
    assert fits(items["StatefulSet", "default", "db"]) == ["lab-node-1"]
    assert items["StatefulSet", "default", "db"]["origin"] == "clusters/lab/workloads/more.yaml:6"
    assert not any(kind == "ConfigMap" for kind, _, _ in items)


def test_nothing_to_explain(tmp_path: Path) -> None:
    result = run_main("explain", "--from", str(tmp_path))
    assert (result.returncode, result.stdout) == (0, "no workloads to explain\n")


# --- refusals: one line, exit 2 ------------------------------------------------------------------------


def test_unknown_target(lab: Path) -> None:
    assert_one_line_error(explain(lab, "--from", LAB, "pod/nope"), "pod/nope not found under clusters/lab")
    assert_one_line_error(
        explain(lab, "--from", LAB, "-n", "other", "trainer"), "trainer not found in namespace other"
    )
    assert_one_line_error(explain(lab, "--from", LAB, "svc/x"), "unknown kind 'svc'")
    assert_one_line_error(explain(lab, "--from", LAB, "pod/"), "give KIND/NAME")


def test_unquoted_number_names_file_line_and_path(lab: Path) -> None:
    path = lab / JOBS
    path.write_text(path.read_text().replace('values: ["22.04"]', "values: [22.04]"))
    assert_one_line_error(
        explain(lab, "--from", LAB),
        f"{JOBS}:22: Pod cuda12-job: spec.affinity.nodeAffinity"
        ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values[0]"
        ' must be a string; quote it: "22.04"',
    )


def test_a_workload_declared_twice(lab: Path) -> None:
    (lab / LAB / "workloads/copy.yaml").write_text((lab / JOBS).read_text())
    assert_one_line_error(
        explain(lab, "--from", LAB),
        "clusters/lab/workloads/cuda-jobs.yaml:3: Pod gpu-drv/cuda12-job is declared twice",
    )


def test_an_invalid_operator_is_explained_not_refused(lab: Path) -> None:
    path = lab / JOBS
    path.write_text(path.read_text().replace("operator: Gt", "operator: GreaterThan"))
    result = explain(lab, "--from", LAB, "pod/cuda13-job")
    assert result.returncode == 1
    assert (
        "lab-node-0: the scheduler cannot parse the term: nvidia.com/cuda.driver.major: unknown operator"
        in (result.stdout)
    )


def test_live_needs_a_cluster(lab: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    result = run_main("explain", "pod/x", "-n", "gpu-drv", cwd=lab, env={"KUBECONFIG": str(missing)})
    assert_one_line_error(result, f"kubeconfig {missing}: no such file")


def test_live_explains_pods_only(lab: Path) -> None:
    assert_one_line_error(
        explain(lab, "deploy/trainer", "-n", "gpu-drv"), "live, explain reads pods", "use --from DIR"
    )


def test_from_and_kubeconfig_do_not_mix(lab: Path) -> None:
    result = explain(lab, "--from", LAB, "--kubeconfig", "x")
    assert result.returncode == 2
    assert "--from reads manifests" in result.stderr


# --- the annotation writer ----------------------------------------------------------------------------


def test_annotation_escaping() -> None:
    assert github_text.escape_data("100% a\r\nb:c,d") == "100%25 a%0D%0Ab:c,d"
    assert github_text.escape_property("100% a\r\nb:c,d") == "100%25 a%0D%0Ab%3Ac%2Cd"
    assert github_text.escape_data("%0A") == "%250A"  # % first, so escapes are not escaped twice
    line = github_text.annotation("warning", "m: 1%\nnext", "dir/a,b.yaml", 7, "T: x")
    assert line == "::warning file=dir/a%2Cb.yaml,line=7,title=T%3A x::m: 1%25%0Anext"
    assert github_text.annotation("error", "plain") == "::error::plain"
    assert github_text.annotation("notice", "m", title="t") == "::notice title=t::m"
