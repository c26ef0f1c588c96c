"""The GitHub Action's step (reconciler/action.py): inputs from the environment become one gpudrv
command line, split like a shell's words but never run by one; the kubeconfig input is a private
file that lives only while the command runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from reconciler import action

LAB_ENV = {"GPUDRV_COMMAND": "audit", "GPUDRV_ARGS": "--from clusters/lab", "GPUDRV_OUTPUT": "github"}


def test_command_args_and_output_make_one_command_line() -> None:
    environ = {"GPUDRV_COMMAND": "matrix impact", "GPUDRV_ARGS": "--base 'origin/main' --from \"a b\""}
    assert action.words({**environ, "GPUDRV_OUTPUT": "github"}) == [
        "matrix",
        "impact",
        "--base",
        "origin/main",
        "--from",
        "a b",
        "-o",
        "github",
    ]
    assert action.words({**environ, "GPUDRV_OUTPUT": ""})[-2:] == [
        "--from",
        "a b",
    ]  # -o left out (apply has no -o github)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"GPUDRV_COMMAND": ""}, "input command is empty"),
        (
            {"GPUDRV_COMMAND": "audit", "GPUDRV_ARGS": "--from 'x"},
            "inputs command/args: No closing quotation",
        ),
    ],
)
def test_inputs_that_make_no_command_line(environ: dict[str, str], message: str) -> None:
    with pytest.raises(action.InputError, match=message):
        action.words(environ)


def test_kubeconfig_is_a_private_file_only_while_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path))
    with action.kubeconfig("apiVersion: v1\nkind: Config") as extra:
        flag, name = extra
        path = Path(name)
        assert (flag, path.parent) == ("--kubeconfig", tmp_path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_text() == "apiVersion: v1\nkind: Config\n"
    assert not path.exists()
    with action.kubeconfig("") as extra:
        assert extra == []


def test_the_step_runs_gpudrv_with_github_output(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = lab / "summary.md"
    for key, value in {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(lab)
    assert action.main(LAB_ENV) == 0
    assert capsys.readouterr().out == "gpudrv audit: 3 GPU nodes, 0 MISSING, 0 INVALID\n"
    assert summary.read_text().startswith("### gpudrv audit: OK\n")


def test_an_input_is_never_shell_code(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(lab / "summary.md"))
    monkeypatch.chdir(lab)
    environ = {**LAB_ENV, "GPUDRV_ARGS": '--from "$(touch pwned)" --matrix "; touch pwned2"'}
    assert action.main(environ) == 2
    assert not (lab / "pwned").exists()
    assert not (lab / "pwned2").exists()
    assert capsys.readouterr().err.startswith("gpudrv: ")  # one error line: no such file or directory


def test_an_empty_command_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert action.main({"GPUDRV_COMMAND": " "}) == 2
    assert capsys.readouterr().err == (
        "gpudrv action: input command is empty: give a gpudrv command, like audit or matrix validate\n"
    )
