"""A working directory deleted under gpudrv (`mkdir d && cd d && rmdir d && gpudrv audit`): one line
and exit 2 for every verb, never a traceback (issue 38, item 4). cli.py checks it once, before any verb
reads a path; `--help` and `--version` need no directory and still answer."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import cli
from tests.conftest import gpudrv_command, gpudrv_env

GONE = "gpudrv: the current directory is gone (No such file or directory): cd to one that exists\n"

# The arguments each verb's parser needs to get as far as running (the directory is checked then).
ARGUMENTS: dict[str, list[str]] = {
    "tag": ["node-0"],
    "audit": [],
    "preflight": ["--kernel", "5.15.0-119-generic"],
    "matrix validate": [],
    "matrix add": ["550", "5.15.0-119-generic", "ubuntu22.04"],
    "matrix verify": [],
    "matrix fill": [],
    "matrix history": [],
    "matrix impact": ["--base", "main"],
    "manifests validate": [],
    "plan": [],
    "apply": [],
    "drain": ["node-0"],
    "status": [],
    "report": [],
    "explain": [],
    "diff": [],
    "init": [],
    "reconcile": ["--repo", "https://example.com/fleet.git", "--once"],
    "probe": [],
}


def verbs(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """Every verb `gpudrv` has, `matrix add` as one: the leaves of its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                inner = list(verbs(child, (*prefix, name)))
                yield from inner or [" ".join((*prefix, name))]


def in_a_deleted_directory(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """The real console script, started in a directory removed before it runs (as the shell does it)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$0" && rmdir "$0" && exec "$@"'
    return subprocess.run(
        ["sh", "-c", script, str(gone), *gpudrv_command(), *argv],
        env=gpudrv_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("argv", [["audit"], ["matrix", "history"], ["matrix", "validate"]])
def test_the_reported_commands_say_one_line(tmp_path: Path, argv: list[str]) -> None:
    result = in_a_deleted_directory(tmp_path, argv)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", GONE)


def test_help_and_version_still_answer(tmp_path: Path) -> None:
    assert in_a_deleted_directory(tmp_path, ["--version"]).returncode == 0
    assert in_a_deleted_directory(tmp_path, ["audit", "--help"]).returncode == 0


def test_every_verb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = list(verbs(cli.build_parser()))
    assert sorted(found) == sorted(ARGUMENTS), "a new verb: add the arguments it needs to ARGUMENTS"
    gone = tmp_path / "gone"
    for verb in found:
        gone.mkdir()
        monkeypatch.chdir(gone)
        gone.rmdir()
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.main([*verb.split(), *ARGUMENTS[verb]])
        monkeypatch.chdir(tmp_path)
        assert (code, stdout.getvalue(), stderr.getvalue()) == (2, "", GONE), verb
