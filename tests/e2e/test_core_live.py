"""The core commands live: tag and audit read the real API server, fresh on every run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import FakeNodes, Kube

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
MAJOR = "nvidia.com/cuda.driver.major"


def write_matrix(folder: Path, *rows: str) -> Path:
    path = folder / "support-matrix.csv"
    path.write_text("driver_branch,kernel,os_tag\n" + "".join(f"{row}\n" for row in rows))
    return path


def test_tag_per_node(kube: Kube, nodes: FakeNodes, unique: str) -> None:
    a = nodes.add_gpu(f"{unique}-a")
    b = nodes.add_gpu(
        f"{unique}-b",
        {KERNEL: "6.8.0-45-generic", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04"},
    )
    rhel = nodes.add_gpu(
        f"{unique}-c",
        {
            MAJOR: "535",
            KERNEL: "5.14.0-427.13.1.el9_4.x86_64",
            "feature.node.kubernetes.io/system-os_release.ID": "rhel",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "9.4",
        },
    )
    expected = {
        a: "550-5.15.0-119-generic-ubuntu22.04",
        b: "550-6.8.0-45-generic-ubuntu24.04",
        rhel: "535-5.14.0-427.13.1.el9_4.x86_64-rhel9",
    }
    for name, tag in expected.items():
        result = kube.gpudrv("tag", name)
        assert (result.returncode, result.stdout, result.stderr) == (0, tag + "\n", "")


def test_tag_errors_live(kube: Kube, nodes: FakeNodes, unique: str) -> None:
    missing = nodes.add_gpu(f"{unique}-m", {MAJOR: None})
    empty = nodes.add_gpu(f"{unique}-e", {MAJOR: ""})
    result = kube.gpudrv("tag", missing)
    assert (result.returncode, result.stderr) == (2, f"gpudrv: node {missing}: label {MAJOR} is missing\n")
    result = kube.gpudrv("tag", empty)
    assert (result.returncode, result.stderr) == (2, f"gpudrv: node {empty}: label {MAJOR} is empty\n")
    result = kube.gpudrv("tag", f"{unique}-nope")
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"gpudrv: node {unique}-nope not found in the cluster at https://127.0.0.1:"
    )


def test_audit_sees_every_change_at_once(kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path) -> None:
    a = nodes.add_gpu(f"{unique}-a")
    b = nodes.add_gpu(f"{unique}-b")
    nodes.add(f"{unique}-cpu", **{KERNEL: "9.9.9-odd"})  # not a GPU node: never audited
    nodes.add_gpu(f"{unique}-off", {"nvidia.com/gpu.present": "false", KERNEL: "9.9.9-odd"})
    matrix = write_matrix(tmp_path, "550,5.15.0-119-generic,ubuntu22.04")

    def audit() -> tuple[int, str]:
        result = kube.gpudrv("audit", "--matrix", str(matrix), "-l", nodes.selector)
        assert result.stderr == ""
        return result.returncode, result.stdout

    assert audit() == (0, "OK\n")

    kube.run("label", "node", b, f"{KERNEL}=5.15.0-122-generic", "--overwrite")
    assert audit() == (1, f"{b} MISSING 550-5.15.0-122-generic-ubuntu22.04\n")

    c = nodes.add_gpu(f"{unique}-c", {KERNEL: "6.8.0-52-generic"})
    assert audit() == (
        1,
        f"{b} MISSING 550-5.15.0-122-generic-ubuntu22.04\n{c} MISSING 550-6.8.0-52-generic-ubuntu22.04\n",
    )

    kube.run("label", "node", a, f"{KERNEL}-")
    assert audit() == (
        1,
        f"{a} INVALID label {KERNEL} is missing\n"
        f"{b} MISSING 550-5.15.0-122-generic-ubuntu22.04\n"
        f"{c} MISSING 550-6.8.0-52-generic-ubuntu22.04\n",
    )

    kube.run("label", "node", a, f"{KERNEL}=5.15.0-119-generic")
    for row in ("550,5.15.0-122-generic,ubuntu22.04", "550,6.8.0-52-generic,ubuntu22.04"):
        added = kube.gpudrv("matrix", "add", *row.split(","), "--matrix", str(matrix))
        assert added.returncode == 0, added.stderr
    assert audit() == (0, "OK\n")


def test_audit_json_live(kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path) -> None:
    a = nodes.add_gpu(f"{unique}-a")
    b = nodes.add_gpu(f"{unique}-b", {MAJOR: "535"})
    matrix = write_matrix(tmp_path, "550,5.15.0-119-generic,ubuntu22.04")
    result = kube.gpudrv("audit", "-o", "json", "--matrix", str(matrix), "-l", nodes.selector)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert [node["node"] for node in data["nodes"]] == [a, b]
    assert data["findings"] == [
        {
            "node": b,
            "status": "MISSING",
            "tag": "535-5.15.0-119-generic-ubuntu22.04",
            "image": None,  # no GPU Operator resource in the cluster: the lab's model, no registry path
            "reason": None,
            "next_kernel": None,
            "origin": None,
            "resource": None,
        }
    ]
    assert (data["mode"], data["notes"]) == ("lab", [])


def test_audit_with_context_and_kubeconfig_flags(
    kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    nodes.add_gpu(f"{unique}-a")
    matrix = write_matrix(tmp_path, "550,5.15.0-119-generic,ubuntu22.04")
    context = kube.run("config", "current-context").stdout.strip()
    from tests.conftest import run_gpudrv

    result = run_gpudrv(
        "audit",
        "--kubeconfig",
        str(kube.kubeconfig),
        "--context",
        context,
        "--matrix",
        str(matrix),
        "--selector",
        nodes.selector,
        env={"KUBECONFIG": ""},
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "OK\n", "")
