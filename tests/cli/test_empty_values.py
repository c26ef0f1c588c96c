"""Issue 18, item 4: an empty value (`--from "$FLEET"` with FLEET unset) is refused with one line,
never read as the current directory; a directory where a file belongs is named as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import cli
from tests.conftest import run_gpudrv

UNSET = "(is a variable unset?)"
TAG = "550-5.15.0-1-generic-ubuntu22.04"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["audit", "--from", ""], "--from: empty path"),
        (["audit", "--from="], "--from: empty path"),
        (["tag", "lab-node-0", "--from", ""], "--from: empty path"),
        (["explain", "--from", ""], "--from: empty path"),
        (["manifests", "validate", "--from", ""], "--from: empty path"),
        (["diff", "--from", ""], "--from: empty path"),
        (["plan", "--from", ""], "--from: empty path"),
        (["apply", "--dry-run", "--from", ""], "--from: empty path"),
        (["status", "--from", ""], "--from: empty path"),
        (["matrix", "impact", "--base", "HEAD", "--from", ""], "--from: empty path"),
        (["audit", "--from", "clusters/lab", "--matrix", ""], "--matrix: empty path"),
        (["matrix", "validate", "--matrix", ""], "--matrix: empty path"),
        (["matrix", "validate", ""], "PATH: empty path"),
        (["matrix", "add", "--matrix", "", "--tag", TAG], "--matrix: empty path"),
        (["matrix", "history", "--matrix", ""], "--matrix: empty path"),
        (["report", "--matrix", ""], "--matrix: empty path"),
        (["audit", "--kubeconfig", ""], "--kubeconfig: empty path"),
        (["diff", "--from", "clusters/lab", "--kubeconfig", ""], "--kubeconfig: empty path"),
        (["drain", "lab-node-0", "--kubeconfig", ""], "--kubeconfig: empty path"),
        (["status", "--context", ""], "--context: empty context name"),
        (["plan", "--from", "clusters/lab", "--merged-ref", ""], "--merged-ref: empty git ref"),
        (["apply", "--dry-run", "--from", "clusters/lab", "--merged-ref", ""], "--merged-ref: empty git ref"),
        (["matrix", "impact", "--base", "", "--from", "clusters/lab"], "--base: empty git ref"),
        (["tag", "", "--from", "clusters/lab"], "NODE: empty node name"),
        (["drain", ""], "NODE: empty node name"),
    ],
)
def test_an_empty_value_is_one_error_line(
    lab: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(lab)
    for variable in ("GITHUB_ACTIONS", "KUBECONFIG"):
        monkeypatch.delenv(variable, raising=False)
    before = (lab / "matrix/support-matrix.csv").read_bytes()
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"gpudrv: {message} {UNSET}\n")
    assert (lab / "matrix/support-matrix.csv").read_bytes() == before


def test_an_empty_from_in_actions_is_an_annotation_too(lab: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(lab), "GITHUB_STEP_SUMMARY": ""}
    result = run_gpudrv("audit", "--from", "", cwd=lab, env=env)
    assert result.returncode == 2
    assert result.stderr == f"gpudrv: --from: empty path {UNSET}\n"
    assert result.stdout.startswith(f"::error title=gpudrv::--from: empty path {UNSET}\n")


def test_a_dot_is_still_the_current_directory(lab: Path) -> None:
    result = run_gpudrv("manifests", "validate", "--from", ".", cwd=lab / "clusters")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_kubeconfig_that_is_a_directory(lab: Path) -> None:
    folder = lab / "kube"
    folder.mkdir()
    result = run_gpudrv("audit", "--kubeconfig", str(folder), cwd=lab)
    assert result.returncode == 2
    assert result.stderr == f"gpudrv: kubeconfig {folder}: is a directory, not a file\n"
    result = run_gpudrv("audit", cwd=lab, env={"KUBECONFIG": str(folder)})
    assert result.stderr == f"gpudrv: kubeconfig {folder}: is a directory, not a file\n"
    result = run_gpudrv("audit", "--kubeconfig", str(lab / "none"), cwd=lab)
    assert result.stderr == f"gpudrv: kubeconfig {lab / 'none'}: no such file\n"


def test_a_matrix_that_is_a_directory(lab: Path) -> None:
    result = run_gpudrv("audit", "--from", "clusters/lab", "--matrix", "matrix", cwd=lab)
    assert (result.returncode, result.stderr) == (2, "gpudrv: matrix: is a directory, not a file\n")
