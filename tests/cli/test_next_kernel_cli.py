"""Issue 24, item 2: every command knows the kernel a node boots next (the label
gpudrv.dev/kernel-version.next), offline with --from manifests: audit (text, json, github, --registry),
report (text, json, html), matrix impact, status (against a fake API server), and the GPU Operator's
fleets (ClusterPolicy, NVIDIADriver)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.registry import oci
from tests.cli.test_github_cli import commands, in_actions, summary, unescape
from tests.cli.test_operator_cli import MATRIX as OPERATOR_MATRIX
from tests.cli.test_operator_cli import POLICY, POOLS
from tests.cli.test_output_contract import Lab
from tests.conftest import git, run_main

NEXT_LABEL = "gpudrv.dev/kernel-version.next"
KERNEL_LINE = '    feature.node.kubernetes.io/kernel-version.full: "5.15.0-119-generic"\n'
NEXT = "5.15.0-120-generic"
NEXT_TAG = f"550-{NEXT}-ubuntu22.04"
NEXT_ROW = f"550,{NEXT},ubuntu22.04"
LINE = f"lab-node-0 NEXT-MISSING {NEXT_TAG} (kernel {NEXT}, at its next reboot)"
ARROW = "\u2192"


def boots_next(manifest: Path, kernel: str, running: str = KERNEL_LINE) -> None:
    """The node's manifest with the label NFD publishes from `gpudrv probe`."""
    text = manifest.read_text()
    assert running in text, manifest
    manifest.write_text(text.replace(running, f"{running}    {NEXT_LABEL}: {json.dumps(kernel)}\n", 1))


@pytest.fixture
def fleet(lab: Path) -> Path:
    boots_next(lab / "clusters/lab/nodes/lab-node-0.yaml", NEXT)
    return lab


def audit(lab: Path, *args: str, fleet: str = "clusters/lab") -> Any:
    return run_main("audit", "--from", fleet, *args, cwd=lab)


# --- audit ----------------------------------------------------------------------------------------


def test_audit_names_the_image_the_next_kernel_needs_until_its_row_is_added(fleet: Path) -> None:
    result = audit(fleet)
    assert (result.returncode, result.stdout, result.stderr) == (1, LINE + "\n", "")
    added = run_main("matrix", "add", "550", NEXT, "ubuntu22.04", cwd=fleet)
    assert added.returncode == 0, added.stderr
    assert (audit(fleet).returncode, audit(fleet).stdout) == (0, "OK\n")


def test_a_node_lacking_both_images_gets_both_lines(fleet: Path) -> None:
    matrix = fleet / "matrix/support-matrix.csv"
    matrix.write_text(matrix.read_text().replace("550,5.15.0-119-generic,ubuntu22.04\n", ""))
    result = audit(fleet)
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["lab-node-0 MISSING 550-5.15.0-119-generic-ubuntu22.04", LINE]


def test_audit_json(fleet: Path) -> None:
    result = audit(fleet, "-o", "json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert (data["ok"], data["missing_count"], data["next_missing_count"]) == (False, 0, 1)
    assert data["nodes"][0] == {
        "node": "lab-node-0",
        "status": "NEXT-MISSING",
        "tag": "550-5.15.0-119-generic-ubuntu22.04",
        "next_kernel": NEXT,
    }
    assert data["findings"] == [
        {
            "node": "lab-node-0",
            "status": "NEXT-MISSING",
            "tag": NEXT_TAG,
            "image": None,
            "reason": None,
            "next_kernel": NEXT,
            "origin": "clusters/lab/nodes/lab-node-0.yaml:1",
            "resource": None,
        }
    ]


def test_audit_github_annotates_the_node_and_says_when(fleet: Path) -> None:
    result = in_actions(fleet, "audit", "--from", "clusters/lab")
    assert result.returncode == 1
    (line,) = commands(result.stdout)
    assert line.startswith(
        "::error file=clusters/lab/nodes/lab-node-0.yaml,line=1,"
        "title=lab-node-0%3A driver image for its next kernel not in the support matrix::"
    )
    assert unescape(line.split("::", 2)[2]).startswith(
        f"node lab-node-0 boots kernel {NEXT} at its next reboot and then needs the driver image {NEXT_TAG}"
    )
    assert "gpudrv audit: 3 GPU nodes, 0 MISSING, 0 INVALID, 1 NEXT-MISSING" in result.stdout
    text = summary(fleet)
    assert "gpudrv audit: 3 GPU nodes, 1 without the image of its next kernel" in text
    assert f"| `lab-node-0` | **NEXT-MISSING** | `{NEXT_TAG}` |" in text


def test_an_empty_next_kernel_label_is_one_invalid_line(fleet: Path) -> None:
    # A label value the API server accepts is a valid kernel, but for the empty one.
    manifest = fleet / "clusters/lab/nodes/lab-node-1.yaml"
    boots_next(manifest, "", '    feature.node.kubernetes.io/kernel-version.full: "5.15.0-107-generic"\n')
    result = audit(fleet)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines() == [
        LINE,
        f"lab-node-1 INVALID next kernel: label {NEXT_LABEL} is empty",
    ]


class Registry:
    """An OCI registry that has the tags given (oci.connect's client, in process)."""

    def __init__(self, present: set[str]) -> None:
        self.present = present
        self.asked: list[str] = []

    def exists_all(self, tags: list[str]) -> dict[str, bool]:
        self.asked += tags
        return {tag: tag in self.present for tag in tags}


def test_audit_against_the_registry_asks_for_the_next_kernels_image(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = Registry({"550-5.15.0-119-generic-ubuntu22.04", "535-5.15.0-107-generic-ubuntu22.04"})
    registry.present.add("550-6.8.0-45-generic-ubuntu24.04")

    @contextlib.contextmanager
    def connect(repo: object, concurrency: int = 0) -> Iterator[Registry]:
        yield registry

    monkeypatch.setattr(oci, "connect", connect)
    result = audit(fleet, "--registry", "oci.example.com/nvidia/driver")
    assert NEXT_TAG in registry.asked
    assert result.returncode == 1, result.stderr
    reference = f"oci.example.com/nvidia/driver:{NEXT_TAG}"
    assert (
        result.stdout.splitlines()[0]
        == f"lab-node-0 NEXT-MISSING {reference} (kernel {NEXT}, at its next reboot)"
    )
    registry.present.add(NEXT_TAG)
    assert audit(fleet, "--registry", "oci.example.com/nvidia/driver").returncode == 0


# --- report and the fleet page --------------------------------------------------------------------


def test_report_counts_next_skew_and_names_the_next_image(fleet: Path) -> None:
    result = run_main("report", "--from", "clusters/lab", cwd=fleet)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[:4] == ["NODES=3", "SKEW=0", "MATRIX_ROWS=3", "NEXT_SKEW=1"]
    assert f"LAB_NODE_0_NEXT_KERNEL={NEXT}" in lines
    assert f"LAB_NODE_0_NEXT_TAG={NEXT_TAG}" in lines
    assert not any(line.startswith("LAB_NODE_1_NEXT") for line in lines)
    data = json.loads(run_main("report", "--from", "clusters/lab", "-o", "json", cwd=fleet).stdout)
    assert (data["missing_count"], data["next_missing_count"]) == (0, 1)
    assert {key: data["nodes"][0][key] for key in ("next_kernel", "next_tag", "next_status")} == {
        "next_kernel": NEXT,
        "next_tag": NEXT_TAG,
        "next_status": "NEXT-MISSING",
    }


def test_the_fleet_page_shows_the_next_kernels_missing_image(fleet: Path) -> None:
    page = run_main("report", "--from", "clusters/lab", "-o", "html", cwd=fleet)
    assert page.returncode == 0, page.stderr
    assert 'id="next-missing-images"' in page.stdout
    assert f'<td class="c next" data-tag="{NEXT_TAG}"' in page.stdout
    assert '<tr class="next-missing">' in page.stdout
    assert 'id="next-missing-count"><b>1</b>missing at the next reboot (1 node)' in page.stdout
    run_main("matrix", "add", "550", NEXT, "ubuntu22.04", cwd=fleet)
    page = run_main("report", "--from", "clusters/lab", "-o", "html", cwd=fleet)
    assert 'id="next-missing-images"' not in page.stdout
    assert 'id="next-missing-count"><b>0</b>' in page.stdout


def test_the_fleet_page_row_of_a_node_lacking_both_images_says_both(fleet: Path) -> None:
    matrix = fleet / "matrix/support-matrix.csv"
    matrix.write_text(matrix.read_text().replace("550,5.15.0-119-generic,ubuntu22.04\n", ""))
    page = run_main("report", "--from", "clusters/lab", "-o", "html", cwd=fleet).stdout
    start = '<tr class="missing"><td class="nowrap">lab-node-0<'
    row = next(line for line in page.splitlines() if start in line)
    assert f'<b class="bad">MISSING</b>; <b class="bad">NEXT-MISSING</b> <code>{NEXT_TAG}</code>' in row


# --- matrix impact --------------------------------------------------------------------------------


def test_impact_of_retiring_the_row_a_next_kernel_needs(fleet: Path) -> None:
    matrix = fleet / "matrix/support-matrix.csv"
    matrix.write_text(matrix.read_text() + NEXT_ROW + "\n")
    git(fleet, "init", "-q")
    git(fleet, "add", "-A")
    git(fleet, "commit", "-qm", "lab")
    matrix.write_text(matrix.read_text().replace(NEXT_ROW + "\n", ""))
    result = run_main("matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", cwd=fleet)
    assert (result.returncode, result.stderr) == (1, "")
    assert (
        f"lab-node-0: OK {ARROW} NEXT-MISSING  550-5.15.0-119-generic-ubuntu22.04, next kernel {NEXT}: "
        f"{NEXT_TAG} (lost at its next reboot)"
    ) in result.stdout.splitlines()
    data = json.loads(
        run_main(
            "matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", "-o", "json", cwd=fleet
        ).stdout
    )
    (finding,) = data["findings"]
    assert (finding["node"], finding["before"], finding["after"]) == ("lab-node-0", "OK", "NEXT-MISSING")
    assert (finding["next_kernel"], finding["next_tag"], finding["broken"]) == (NEXT, NEXT_TAG, True)
    github = in_actions(fleet, "matrix", "impact", "--base", "HEAD", "--from", "clusters/lab")
    assert github.returncode == 1
    (line,) = commands(github.stdout)
    assert f"needed at the next reboot by lab-node-0 (kernel {NEXT})" in unescape(line)


def test_impact_with_the_row_still_there_is_ok(fleet: Path) -> None:
    matrix = fleet / "matrix/support-matrix.csv"
    git(fleet, "init", "-q")
    git(fleet, "add", "-A")
    git(fleet, "commit", "-qm", "lab")
    matrix.write_text(matrix.read_text() + NEXT_ROW + "\n")
    result = run_main("matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", cwd=fleet)
    assert result.returncode == 0, result.stdout
    assert f"lab-node-0: NEXT-MISSING {ARROW} OK  550-5.15.0-119-generic-ubuntu22.04, next kernel {NEXT}" in (
        result.stdout
    )


# --- status, live ---------------------------------------------------------------------------------


def test_status_shows_the_next_kernel_and_whether_its_image_is_there(lab: Path) -> None:
    server = Lab()
    server.nodes["lab-node-0"]["metadata"]["labels"][NEXT_LABEL] = NEXT
    server.nodes["lab-node-1"]["metadata"]["labels"][NEXT_LABEL] = "5.15.0-107-generic"  # the running one
    with server.fake:
        config = str(server.fake.kubeconfig(lab / "kubeconfig"))
        result = run_main("status", "--kubeconfig", config, cwd=lab)
        assert result.returncode == 0, result.stderr
        header, *rows = result.stdout.splitlines()
        assert "IN-MATRIX  NEXT-KERNEL" in header
        assert f"yes        {NEXT} NEXT-MISSING" in rows[0]
        data = json.loads(run_main("status", "--kubeconfig", config, "-o", "json", cwd=lab).stdout)
        run_main("matrix", "add", "550", NEXT, "ubuntu22.04", cwd=lab)
        after = json.loads(run_main("status", "--kubeconfig", config, "-o", "json", cwd=lab).stdout)
    facts = [(n["next_kernel"], n["next_tag"], n["next_status"]) for n in data["nodes"]]
    assert facts == [(NEXT, NEXT_TAG, "NEXT-MISSING"), (None, None, None), (None, None, None)]
    assert after["nodes"][0]["next_status"] == "OK"


# --- the GPU Operator's fleets --------------------------------------------------------------------


def test_cluster_policy_fleet(lab: Path) -> None:
    boots_next(lab / f"{POLICY}/nodes/op-node-0.yaml", NEXT)
    result = audit(lab, "--matrix", OPERATOR_MATRIX, fleet=POLICY)
    assert result.returncode == 1, result.stderr
    assert result.stdout == (
        f"op-node-0 NEXT-MISSING nvcr.io/nvidia/driver:{NEXT_TAG} (kernel {NEXT}, at its next reboot) "
        "(ClusterPolicy/cluster-policy)\n"
    )
    data = json.loads(audit(lab, "--matrix", OPERATOR_MATRIX, "-o", "json", fleet=POLICY).stdout)
    (finding,) = data["findings"]
    assert (finding["status"], finding["next_kernel"], finding["image"]) == (
        "NEXT-MISSING",
        NEXT,
        f"nvcr.io/nvidia/driver:{NEXT_TAG}",
    )
    github = in_actions(lab, "audit", "--from", POLICY, "--matrix", OPERATOR_MATRIX)
    (line,) = commands(github.stdout)
    assert line.startswith(f"::error file={POLICY}/cluster-policy.yaml,line=")
    assert f"boots kernel {NEXT} at its next reboot and would then be stuck in ImagePullBackOff" in unescape(
        line
    )


def test_nvidiadriver_fleet_uses_each_pools_driver_and_os_tag(lab: Path) -> None:
    boots_next(lab / f"{POOLS}/nodes/pool-ubuntu-0.yaml", "6.8.0-52-generic")  # 535 has that row
    rhel = lab / f"{POOLS}/nodes/pool-rhel-0.yaml"
    running = next(line for line in rhel.read_text().splitlines(True) if "kernel-version.full" in line)
    boots_next(rhel, "5.14.0-503.11.1.el9_5.x86_64", running)
    result = audit(lab, "--matrix", OPERATOR_MATRIX, fleet=POOLS)
    assert result.returncode == 1, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith("pool-rhel-0 NEXT-MISSING ")
    assert line.endswith(
        "-5.14.0-503.11.1.el9_5.x86_64-rhel9 (kernel 5.14.0-503.11.1.el9_5.x86_64, at its next reboot) "
        "(NVIDIADriver/rhel)"
    )
