"""`gpudrv explain -o github` goes through github.publish like every other GitHub output: past ten
warnings the last shown one points at the job summary, and the step summary gets a section."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler import cli

REPO = Path(__file__).resolve().parents[2]
POD = """---
apiVersion: v1
kind: Pod
metadata:
  name: nowhere-{n}
  namespace: gpu-drv
spec:
  nodeSelector:
    pool: none
  containers:
    - name: c
      image: busybox
"""


def test_explain_github_caps_annotations_and_writes_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "clusters", tmp_path / "clusters")
    (tmp_path / "clusters/lab/workloads/nowhere.yaml").write_text("".join(POD.format(n=n) for n in range(12)))
    summary = tmp_path / "summary.md"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    code = cli.main(["explain", "--from", "clusters/lab", "-o", "github"])

    lines = capsys.readouterr().out.splitlines()
    assert code == 0  # fitting no node is a warning in a PR check
    warnings = [line for line in lines if line.startswith("::warning ")]
    assert len(warnings) == 10
    assert warnings[-1].startswith("::warning title=gpudrv::")
    assert warnings[-1].endswith("more warnings: see the job summary")
    assert (
        lines[-1]
        == "gpudrv explain: 15 workloads, 13 fit no node, 0 CUDA driver errors, 3 CUDA driver warnings"
    )
    text = summary.read_text()
    assert text.startswith("### gpudrv explain: 15 workloads, 13 fit no node, 0 CUDA driver errors\n")
    assert "| `Pod gpu-drv/nowhere-11` | **no node** | ok | `clusters/lab/workloads/nowhere.yaml:" in text
