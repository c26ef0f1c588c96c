"""gpudrv preflight --kernel K live: the real API server's GPU nodes (kwok), each moved to K with its own
OS and driver, grouped by pool; the nodes read fresh on every run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import FakeNodes, Kube

K = "6.8.0-60-generic"
OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
MAJOR = "nvidia.com/cuda.driver.major"
NEXT = "gpudrv.dev/kernel-version.next"


def write_matrix(folder: Path, *rows: str) -> Path:
    path = folder / "support-matrix.csv"
    path.write_text("driver_branch,kernel,os_tag\n" + "".join(f"{row}\n" for row in rows))
    return path


def test_preflight_pools_live(kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path) -> None:
    a = nodes.add_gpu(f"{unique}-a", {NEXT: "6.9.0-1-generic"})  # --kernel wins over the next kernel
    b = nodes.add_gpu(f"{unique}-b", {MAJOR: "535"})
    c = nodes.add_gpu(f"{unique}-c", {OS_VERSION: "24.04"})
    d = nodes.add_gpu(f"{unique}-d", {MAJOR: "535"})
    nodes.add(f"{unique}-cpu")  # not a GPU node: never looked at
    matrix = write_matrix(tmp_path, f"550,{K},ubuntu22.04")

    def preflight(*args: str) -> tuple[int, str]:
        result = kube.gpudrv("preflight", "--kernel", K, "--matrix", str(matrix), "-l", nodes.selector, *args)
        assert result.stderr == ""
        return result.returncode, result.stdout

    assert preflight() == (
        1,
        f"ubuntu22.04, driver 535: 2 GPU nodes need 535-{K}-ubuntu22.04\n"
        f"  {b} MISSING 535-{K}-ubuntu22.04\n"
        f"  {d} MISSING 535-{K}-ubuntu22.04\n"
        f"ubuntu24.04, driver 550: 1 GPU node needs 550-{K}-ubuntu24.04\n"
        f"  {c} MISSING 550-{K}-ubuntu24.04\n"
        f"kernel {K}: 3 of 4 GPU nodes not ready, 2 images not in {matrix}\n",
    )

    code, out = preflight("-o", "json")
    document = json.loads(out)
    assert (code, document["kind"], document["ok"], document["mode"]) == (1, "preflight", False, "lab")
    assert [(n["node"], n["status"]) for n in document["nodes"]] == [
        (a, "OK"), (b, "MISSING"), (c, "MISSING"), (d, "MISSING")
    ]  # fmt: skip
    assert {finding["origin"] for finding in document["findings"]} == {None}  # live: no manifest

    kube.run("label", "node", d, f"{MAJOR}=550", "--overwrite")  # read fresh: d joins a's pool
    for row in (f"535,{K},ubuntu22.04", f"550,{K},ubuntu24.04"):
        added = kube.gpudrv("matrix", "add", *row.split(","), "--matrix", str(matrix))
        assert added.returncode == 0, added.stderr
    assert preflight() == (0, f"OK: 4 GPU nodes ready for kernel {K}\n")


def test_preflight_live_invalid_and_empty(kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path) -> None:
    bad = nodes.add_gpu(f"{unique}-x", {MAJOR: None})
    matrix = write_matrix(tmp_path, f"550,{K},ubuntu22.04")
    result = kube.gpudrv("preflight", "--kernel", K, "--matrix", str(matrix), "-l", nodes.selector)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (
        f"{bad} INVALID label {MAJOR} is missing\nkernel {K}: 1 of 1 GPU node not ready, 1 INVALID\n"
    )

    nothing = kube.gpudrv("preflight", "--kernel", K, "--matrix", str(matrix), "-l", f"{nodes.selector}-none")
    assert (nothing.returncode, nothing.stdout) == (2, "")
    assert nothing.stderr.startswith("gpudrv: no GPU node in the cluster at https://127.0.0.1:")
    assert nothing.stderr.count("\n") == 1
