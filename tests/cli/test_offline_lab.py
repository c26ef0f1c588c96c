"""docs/lab.md steps 2-4, offline from the manifests, through main(); one audit and `python -m` run the
real entry point."""

from pathlib import Path

from tests.conftest import run_gpudrv, run_main

NODE_3 = """apiVersion: v1
kind: Node
metadata:
  name: lab-node-3
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    nvidia.com/gpu.present: "true"
    nvidia.com/cuda.driver.major: "550"
    nvidia.com/cuda.driver.minor: "90"
    nvidia.com/cuda.driver.rev: "07"
    feature.node.kubernetes.io/kernel-version.full: "6.8.0-52-generic"
    feature.node.kubernetes.io/system-os_release.ID: "ubuntu"
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "24.04"
"""


def test_step2_tag_per_node(lab: Path) -> None:
    expected = {
        "lab-node-0": "550-5.15.0-119-generic-ubuntu22.04",
        "lab-node-1": "535-5.15.0-107-generic-ubuntu22.04",
        "lab-node-2": "550-6.8.0-45-generic-ubuntu24.04",
    }
    for name, tag in expected.items():
        result = run_main("tag", name, "--from", "clusters/lab", cwd=lab)
        assert (result.returncode, result.stdout, result.stderr) == (0, tag + "\n", "")


def test_step3_audit_ok(lab: Path) -> None:
    # The real entry point: the installed console script, in a new process.
    result = run_gpudrv("audit", "--from", "clusters/lab", cwd=lab)
    assert (result.returncode, result.stdout) == (0, "OK\n")


def test_step4_new_node_missing_until_its_row_is_added(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    missing = run_main("audit", "--from", "clusters/lab", cwd=lab)
    assert (missing.returncode, missing.stdout) == (
        1,
        "lab-node-3 MISSING 550-6.8.0-52-generic-ubuntu24.04\n",
    )

    added = run_main("matrix", "add", "550", "6.8.0-52-generic", "ubuntu24.04", cwd=lab)
    assert added.returncode == 0, added.stderr
    assert "matrix/support-matrix.csv:5" in added.stdout

    ok = run_main("audit", "--from", "clusters/lab", cwd=lab)
    assert (ok.returncode, ok.stdout) == (0, "OK\n")


def test_audit_json_and_options_after_the_subcommand(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    result = run_main(
        "audit",
        "-o",
        "json",
        "--from",
        str(lab / "clusters/lab"),
        "--matrix",
        str(lab / "matrix/support-matrix.csv"),
    )
    assert result.returncode == 1
    import json

    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert [node["node"] for node in data["nodes"]] == [
        "lab-node-0",
        "lab-node-1",
        "lab-node-2",
        "lab-node-3",
    ]
    assert (data["node_count"], data["missing_count"]) == (4, 1)
    assert data["findings"] == [
        {
            "node": "lab-node-3",
            "status": "MISSING",
            "tag": "550-6.8.0-52-generic-ubuntu24.04",
            "image": None,  # the lab declares no GPU Operator resource: no registry path to name
            "reason": None,
            "next_kernel": None,
            "origin": f"{lab}/clusters/lab/nodes/lab-node-3.yaml:1",
            "resource": None,
        }
    ]
    assert (data["mode"], data["notes"]) == ("lab", [])


def test_invalid_node_in_audit(lab: Path) -> None:
    path = lab / "clusters/lab/nodes/lab-node-1.yaml"
    path.write_text(
        path.read_text().replace(
            '    feature.node.kubernetes.io/kernel-version.full: "5.15.0-107-generic"\n', ""
        )
    )
    result = run_main("audit", "--from", "clusters/lab", cwd=lab)
    assert (result.returncode, result.stdout) == (
        1,
        "lab-node-1 INVALID label feature.node.kubernetes.io/kernel-version.full is missing\n",
    )


def test_python_dash_m_works_too(lab: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "tag", "lab-node-2", "--from", "clusters/lab"],
        cwd=lab,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "550-6.8.0-45-generic-ubuntu24.04\n")
