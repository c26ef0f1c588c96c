"""The fleet page live: `gpudrv report -o html` against the real cluster, and the audit workflow's steps
that make it and link it, run as GitHub Actions runs them.

Other tests share the cluster: the assertions look only at this test's nodes, and the node whose image
is missing lives only while the page is made.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import REPO
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.test_github_ci import run_workflow

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
STATE = "nvidia.com/gpu-driver-upgrade-state"
FAILURE = "gpudrv.dev/upgrade-failure"
MATRIX = "matrix/support-matrix.csv"


def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    (folder / "matrix").mkdir(parents=True)
    (folder / MATRIX).write_bytes((REPO / MATRIX).read_bytes())
    return folder


def test_live_fleet_page(kube: Kube, nodes: FakeNodes, namespace: str, unique: str, tmp_path: Path) -> None:
    done = nodes.add_gpu(f"{unique}-done", {STATE: "upgrade-done"})
    failed = nodes.add_gpu(f"{unique}-failed", {STATE: "upgrade-failed"})
    kube.run(
        "annotate", "node", failed, f"{FAILURE}=validation-required: driver 550.90.07 not reported in 10m"
    )
    held = nodes.add_gpu(f"{unique}-held", {STATE: "drain-required"})
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": namespace},
        "spec": {"nodeName": held, "containers": [{"name": "c", "image": "busybox"}]},
    }
    kube.apply(json.dumps(bare))
    gap = nodes.add_gpu(f"{unique}-gap", {KERNEL: "5.15.0-998-generic"})
    try:
        result = kube.gpudrv("report", "-o", "html", cwd=workspace(tmp_path))
    finally:
        kube.run("delete", "node", gap, "--ignore-not-found", "--wait=false", check=False)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    html = result.stdout
    assert re.search(r'<dd id="source">the cluster at https://127\.0\.0\.1:\d+ \(live\)</dd>', html)
    # The grid: the covered image, and the gap's image marked missing, with the node that needs it.
    assert re.search(r'<td class="c ok" data-tag="550-5\.15\.0-119-generic-ubuntu22\.04"', html)
    assert '<td class="c miss" data-tag="550-5.15.0-998-generic-ubuntu22.04"' in html
    missing = re.search(
        r"<code>550-5\.15\.0-998-generic-ubuntu22\.04</code></td>\s*<td[^>]*>\d+</td>\s*<td>([^<]*)", html
    )
    assert missing and gap in missing[1]
    # Stuck: the recorded failure, and the bare pod that holds the drain (status's BLOCKER).
    stuck = dict(re.findall(r"<tr><td>([^<]+)</td><td><code>[^<]+</code></td><td>([^<]*)</td></tr>", html))
    assert stuck[failed] == "validation-required: driver 550.90.07 not reported in 10m"
    assert stuck[held] == f"pod {namespace}/bare has no controller (use --force to delete it)"
    assert done not in stuck
    assert "No matrix history on this page: matrix/support-matrix.csv: not inside a git repository" in html


def test_audit_workflow_makes_the_page_and_links_it(
    kube: Kube, nodes: FakeNodes, unique: str, tmp_path: Path
) -> None:
    nodes.add_gpu(f"{unique}-ok")  # at least one GPU node, whose image is in the matrix
    folder, runner = workspace(tmp_path), tmp_path / "runner"
    contexts = {"secrets.KUBECONFIG": kube.kubeconfig.read_text()}
    [page_step] = run_workflow("audit.yml", folder, runner, contexts, only="gpudrv report -o html").values()
    assert (page_step.code, page_step.stderr) == (0, ""), page_step.stderr
    [page] = runner.glob("*/fleet-page/fleet.html")
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert '<td class="c ok" data-tag="550-5.15.0-119-generic-ubuntu22.04"' in html
    assert not list(runner.glob("*/fleet-page/*.partial"))
    assert not any(runner.glob("*/kubeconfig")), "the workflow leaves the kubeconfig behind"

    url = "https://github.com/example/fleet/actions/runs/1/artifacts/2"
    [link] = run_workflow(
        "audit.yml",
        folder,
        tmp_path / "runner-link",
        {**contexts, "steps.upload-page.outputs.artifact-url": url},  # every step's expressions resolve
        only="GITHUB_STEP_SUMMARY",
    ).values()
    assert link.code == 0, link.stderr
    assert link.summary.startswith(f"### Fleet page\n\n[fleet.html]({url}): coverage grid, upgrade states")
