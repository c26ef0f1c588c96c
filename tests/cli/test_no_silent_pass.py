"""Issue 22, item 4: a command that checks GPU nodes and finds none says so (one line, exit 2), unless
--allow-empty declares the fleet empty; an OK line outside lab mode says what was checked."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, run_main
from tests.hostile.fake_api import Answer, FakeApi, Request

NOTHING = "nothing was checked (--allow-empty if that is expected)"
UNLABELLED = "(no node labelled nvidia.com/gpu.present=true)"
CPU_NODE = "apiVersion: v1\nkind: Node\nmetadata:\n  name: cpu-0\n  labels:\n    kubernetes.io/os: linux\n"


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    return line


@pytest.fixture
def fleets(lab: Path) -> Path:
    """The lab, with an empty folder and a folder of one CPU node beside its fleet."""
    (lab / "empty").mkdir()
    (lab / "cpu").mkdir()
    (lab / "cpu/cpu-0.yaml").write_text(CPU_NODE)
    return lab


@pytest.mark.parametrize("folder", ["empty", "cpu"])
@pytest.mark.parametrize(
    "command",
    [
        ["audit"],
        ["audit", "-o", "json"],
        ["report"],
        ["report", "-o", "json"],
        ["report", "-o", "html"],
        ["preflight", "--kernel", "6.8.0-60-generic"],
        ["preflight", "--kernel", "6.8.0-60-generic", "-o", "json"],
    ],
)
def test_no_gpu_node_under_from_is_an_error(fleets: Path, folder: str, command: list[str]) -> None:
    line = one_line_error(run_main(*command, "--from", folder, cwd=fleets))
    assert line == f"gpudrv: no GPU node in {folder} {UNLABELLED}: {NOTHING}"


def test_a_selector_that_matches_nothing_is_an_error_in_every_node_check(fleets: Path) -> None:
    for command in (
        ["audit"],
        ["report"],
        ["plan"],
        ["apply"],
        ["preflight", "--kernel", "6.8.0-60-generic"],
    ):
        result = run_main(*command, "--from", "clusters/lab", "-l", "pool=none", cwd=fleets)
        assert (
            one_line_error(result) == f"gpudrv: no GPU node in clusters/lab matches -l pool=none: {NOTHING}"
        )


def test_allow_empty_is_ok_and_says_zero_nodes(fleets: Path) -> None:
    result = run_main("audit", "--from", "empty", "--allow-empty", cwd=fleets)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "NOTHING CHECKED: 0 GPU nodes, 3 images in matrix/support-matrix.csv\n",
        "",
    )
    data = json.loads(run_main("audit", "--from", "cpu", "--allow-empty", "-o", "json", cwd=fleets).stdout)
    assert (data["ok"], data["nodes"], data["node_count"]) == (True, [], 0)
    report = run_main("report", "--from", "empty", "--allow-empty", cwd=fleets)
    assert report.returncode == 0
    assert "NODES=0" in report.stdout.splitlines()


def test_in_github_actions_the_error_is_an_annotation_too(fleets: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    result = run_main("audit", "--from", "empty", cwd=fleets, env=env)
    assert result.returncode == 2
    assert result.stderr == f"gpudrv: no GPU node in empty {UNLABELLED}: {NOTHING}\n"
    assert result.stdout.startswith("::error")
    assert "no GPU node in empty" in summary.read_text()


def test_the_lab_keeps_its_one_word_ok(fleets: Path) -> None:
    result = run_main("audit", "--from", "clusters/lab", cwd=fleets)
    assert (result.returncode, result.stdout, result.stderr) == (0, "OK\n", "")


def test_plan_and_apply_refuse_an_empty_desired_state_before_reading_the_cluster(fleets: Path) -> None:
    # No cluster configured: the refusal comes first, from the manifests alone.
    env = {"KUBECONFIG": "", "HOME": str(fleets)}
    for command in (["plan"], ["apply"], ["apply", "--dry-run"]):
        line = one_line_error(run_main(*command, "--from", "empty", cwd=fleets, env=env))
        assert line == f"gpudrv: no GPU node in empty {UNLABELLED}: {NOTHING}"


def test_matrix_impact_refuses_no_gpu_node(fleets: Path) -> None:
    git(fleets, "init", "-q")
    git(fleets, "add", "-A")
    git(fleets, "commit", "-qm", "fleet")
    line = one_line_error(run_main("matrix", "impact", "--base", "main", "--from", "cpu", cwd=fleets))
    assert line == f"gpudrv: no GPU node in cpu {UNLABELLED}: {NOTHING}"
    allowed = run_main("matrix", "impact", "--base", "main", "--from", "cpu", "--allow-empty", cwd=fleets)
    assert allowed.returncode == 0, allowed.stderr


# --- a live cluster without a GPU node -------------------------------------------------------------


def no_gpu_nodes(request: Request) -> Answer:
    """A cluster whose only node has no GPU: the GPU node list is empty."""
    if "/apis/nvidia.com/" in request.path:
        return Answer(status=404, body=b'{"kind": "Status", "message": "not found", "code": 404}')
    return Answer(body=b'{"kind": "List", "items": [], "metadata": {}}')


@pytest.fixture
def cluster(fleets: Path) -> Iterator[tuple[Path, dict[str, str], str]]:
    with FakeApi(no_gpu_nodes) as fake:
        kubeconfig = fake.kubeconfig(fleets / "kubeconfig")
        yield fleets, {"KUBECONFIG": str(kubeconfig)}, fake.url


@pytest.mark.parametrize("command", [["audit"], ["audit", "-o", "json"], ["status"], ["report"]])
def test_a_live_cluster_without_gpu_nodes_is_an_error(
    cluster: tuple[Path, dict[str, str], str], command: list[str]
) -> None:
    root, env, url = cluster
    line = one_line_error(run_main(*command, cwd=root, env=env))
    assert line == f"gpudrv: no GPU node in the cluster at {url} {UNLABELLED}: {NOTHING}"


def test_a_live_cluster_without_gpu_nodes_with_allow_empty(cluster: tuple[Path, dict[str, str], str]) -> None:
    root, env, _ = cluster
    result = run_main("status", "--allow-empty", cwd=root, env=env)
    assert (result.returncode, result.stderr) == (0, "")
