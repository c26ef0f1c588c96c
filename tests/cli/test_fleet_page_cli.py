"""`gpudrv report` offline (--from DIR) and its fleet page, on copies of the example fleets."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_main

FAILED_NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: lab-node-9
  annotations:
    gpudrv.dev/upgrade-failure: "drain-required: PDB gpu-drv/trainer-pdb allows 0 disruptions"
  labels:
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu-driver-upgrade-state: upgrade-failed
    nvidia.com/cuda.driver.major: "570"
    feature.node.kubernetes.io/kernel-version.full: "6.8.0-45-generic"
    feature.node.kubernetes.io/system-os_release.ID: "ubuntu"
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "24.04"
"""


def test_report_reads_manifests_offline(lab: Path) -> None:
    result = run_main("report", "--from", "clusters/lab", cwd=lab)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[:3] == ["NODES=3", "SKEW=0", "MATRIX_ROWS=3"]
    data = json.loads(run_main("report", "--from", "clusters/lab", "-o", "json", cwd=lab).stdout)
    assert (data["kind"], data["node_count"], data["missing_count"], data["row_count"]) == ("report", 3, 0, 3)
    assert data["nodes"][1] == {
        "node": "lab-node-1",
        "tag": "535-5.15.0-107-generic-ubuntu22.04",
        "upgrade_state": None,
        "next_kernel": None,
        "next_tag": None,
        "next_status": None,
    }


def test_fleet_page_offline_outside_git(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-9.yaml").write_text(FAILED_NODE)
    result = run_main(
        "report", "--from", "clusters/lab", "-o", "html", cwd=lab, env={"SOURCE_DATE_EPOCH": "0"}
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    html = result.stdout
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert (
        '<dd id="source">manifests under clusters/lab (offline: the desired state, as declared)</dd>' in html
    )
    assert '<time datetime="1970-01-01T00:00:00+00:00">' in html
    # Not a git repository: no commit, no history, and the page says why instead of failing.
    assert '<dd id="commit">none &#8212; matrix/support-matrix.csv: not inside a git repository</dd>' in html
    assert "No matrix history on this page: matrix/support-matrix.csv: not inside a git repository" in html
    # The grid: the lab's three images, and lab-node-9's, which the matrix lacks.
    cells = re.findall(r'<td class="c (ok|spare|miss)" data-tag="([^"]+)"', html)
    assert sorted(cells) == [
        ("miss", "570-6.8.0-45-generic-ubuntu24.04"),
        ("ok", "535-5.15.0-107-generic-ubuntu22.04"),
        ("ok", "550-5.15.0-119-generic-ubuntu22.04"),
        ("ok", "550-6.8.0-45-generic-ubuntu24.04"),
    ]
    # The stuck node, with the reason gpudrv recorded on it.
    assert (
        "<tr><td>lab-node-9</td><td><code>upgrade-failed</code></td>"
        "<td>drain-required: PDB gpu-drv/trainer-pdb allows 0 disruptions</td></tr>"
    ) in html


def test_fleet_page_of_an_operator_fleet_names_the_images(lab: Path) -> None:
    pool = lab / "clusters/gpu-operator-pools/nodes"
    node = (pool / "pool-ubuntu-0.yaml").read_text().replace("pool-ubuntu-0", "pool-ubuntu-9")
    (pool / "pool-ubuntu-9.yaml").write_text(node.replace("5.15.0-119-generic", "6.8.0-60-generic"))
    result = run_main(
        "report",
        "--from",
        "clusters/gpu-operator-pools",
        "--matrix",
        "matrix/gpu-operator.csv",
        "-o",
        "html",
        cwd=lab,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    html = result.stdout
    assert "GPU Operator NVIDIADriver: NVIDIADriver/rhel, NVIDIADriver/ubuntu" in html
    assert re.search(r'<td class="c ok" data-tag="535-5\.14\.0-427\.13\.1\.el9_4\.x86_64-rhel9"', html)
    # The missing image, with the reference the GPU Operator would pull.
    assert re.search(r'<td class="c miss" data-tag="535-6\.8\.0-60-generic-ubuntu22\.04"', html)
    assert (
        '<tr><td class="nowrap"><code>535-6.8.0-60-generic-ubuntu22.04</code>'
        '<br><small class="mono">nvcr.io/nvidia/driver:535-6.8.0-60-generic-ubuntu22.04</small></td>'
    ) in html
    # Beside it, the command that adds its row once the image is built.
    fix = "gpudrv matrix add --matrix matrix/gpu-operator.csv --tag 535-6.8.0-60-generic-ubuntu22.04"
    assert f'<code class="fix">{fix}</code>' in html


def test_fleet_page_is_the_same_inside_github_actions(lab: Path) -> None:
    """There stdout goes through the workflow-command guard: the page has nothing for it to change,
    even with a failure reason that would be a workflow command."""
    node = FAILED_NODE.replace("drain-required: PDB", "\\n::warning::x ##[error]y PDB")
    (lab / "clusters/lab/nodes/lab-node-9.yaml").write_text(node)
    args = ("report", "--from", "clusters/lab", "-o", "html")
    plain = run_main(*args, cwd=lab, env={"SOURCE_DATE_EPOCH": "0"})
    guarded = run_main(*args, cwd=lab, env={"SOURCE_DATE_EPOCH": "0", "GITHUB_ACTIONS": "true"})
    assert (plain.returncode, guarded.returncode) == (0, 0)
    assert (
        "<td>&#10;::warning::x ##&#91;error]y PDB gpu-drv/trainer-pdb allows 0 disruptions</td>"
        in plain.stdout
    )
    assert guarded.stdout == plain.stdout
