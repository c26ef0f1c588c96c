"""Issue 12, item 4: every case of the generated hostile corpus (corpus.py) keeps gpudrv's promises:

- the exit code the case allows (2 for input that must be refused);
- at most one line on stderr, `gpudrv: ...` (validators may instead report on stdout), no traceback;
- every file of the workspace unchanged, byte for byte (names, kinds, modes, contents);
- no workflow command it did not mean to write, on either stream, whether or not it runs as in GitHub
  Actions (every other case has GITHUB_ACTIONS=true, so -o github is the default where a command has
  it; the ci-log cases of ci_log.py run text and json both ways): the runner reads every line;
- within the case's time bound (a hang is cut off by an alarm, and fails the case).

Cases run in-process through reconciler.cli.main (fast); the output cases run the real entry point
with stdout closed by its reader, full (/dev/full) or closed (>&-).
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from reconciler.core.base import github_text
from tests.conftest import gpudrv_command, gpudrv_env, run_main
from tests.hostile.corpus import VALIDATORS, Case, Workspace, cases, lab

CASES = cases()
OWN_ANNOTATION = re.compile(r"::(error|warning|notice)( [^:\r\n]*)?::[^\r\n]*")
LEADING_COMMAND = re.compile(r"^\s*::")
INVISIBLE = re.compile(f"[{github_text.IGNORABLE}]")


def test_the_corpus_is_large_and_covers_every_command() -> None:
    assert len(CASES) >= 1200
    commands = {
        case.argv[0] if case.argv and case.argv[0] != "--config" else case.argv[2]
        for case in CASES
        if case.argv
    }
    verbs = {" ".join(case.argv[:2]) for case in CASES if case.argv[:1] in (("matrix",), ("manifests",))}
    assert {"tag", "audit", "explain", "diff", "plan", "apply", "drain", "status", "report"} <= commands
    assert {"matrix validate", "matrix add", "matrix history", "matrix impact", "manifests validate"} <= verbs


class Hung(BaseException):
    """The case ran past its time bound (BaseException: no handler of gpudrv's may swallow it)."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hung


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes | str | None]]:
    """Every entry under root, without following links: kind, mode and content (FIFOs: no content)."""
    found: dict[str, tuple[str, int, bytes | str | None]] = {}
    for folder, names, files in os.walk(root):
        for name in [*names, *files]:
            path = Path(folder) / name
            info = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", 0, str(path.readlink()))
            elif stat.S_ISREG(info.st_mode):
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
            else:
                found[relative] = (
                    "dir" if stat.S_ISDIR(info.st_mode) else "other",
                    stat.S_IMODE(info.st_mode),
                    None,
                )
    return found


def assert_no_injected_command(out: str, err: str, own: bool = True) -> None:
    """The runner reads every line of both streams (split at LF, CR and CRLF): none holds `##[`, none
    starts with `::` after blanks, with the characters its culture-sensitive comparison may skip left
    out, except gpudrv's own annotations (`own`: not in -o text or json), each a whole line on stdout."""
    for stream, text in (("stdout", out), ("stderr", err)):
        for line in text.split("\n"):
            if own and stream == "stdout" and OWN_ANNOTATION.fullmatch(line):
                assert "##[" not in line, line
                continue
            for piece in line.split("\r"):
                visible = INVISIBLE.sub("", piece)
                assert "##[" not in visible, (stream, piece)
                assert LEADING_COMMAND.match(visible) is None, (stream, piece)


def explicit_output(argv: tuple[str, ...], *modes: str) -> bool:
    """Does the command line ask for one of `modes` with -o?"""
    return any(a == "-o" and b in modes for a, b in itertools.pairwise(argv))


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "work"
    root.mkdir()
    lab(root)
    space = Workspace(root, env={"HOME": str(tmp_path / "home"), "KUBECONFIG": ""})
    (tmp_path / "home").mkdir()
    with space.stack:
        yield space
    # Give back what a case took away (dubious ownership), so pytest can remove it.
    os.chown(root, os.getuid(), os.getgid())


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case(case: Case, workspace: Workspace, tmp_path: Path) -> None:
    case.prepare(workspace)
    in_actions = CASES.index(case) % 2 == 0 if case.actions is None else case.actions
    env = dict(workspace.env)
    if in_actions:
        env.update(
            GITHUB_ACTIONS="true",
            GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),  # outside the workspace
            GITHUB_WORKSPACE=str(workspace.root),
        )
    before = snapshot(workspace.root)
    started = time.monotonic()
    if case.process is None:
        code, out, err = run_in_process(case, workspace.root, env)
    else:
        code, out, err = run_process(case, workspace.root, env)
    elapsed = time.monotonic() - started

    assert elapsed < case.limit, f"{case.id} took {elapsed:.1f}s"
    assert code in case.codes, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = err.splitlines()
    if lines:
        assert len(lines) == 1, err
        assert lines[0].startswith("gpudrv: "), err
    elif code == 2:
        assert case.argv[:2] in VALIDATORS and out, (case.id, out)
    assert_no_injected_command(out, err, own=not explicit_output(case.argv, "text", "json", "yaml"))
    if not case.changes_files:
        assert snapshot(workspace.root) == before, "files changed"


def run_in_process(case: Case, root: Path, env: dict[str, str]) -> tuple[int, str, str]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, case.limit + 5)
    try:
        result = run_main(*case.argv, cwd=root, env=env)
    except Hung:
        pytest.fail(f"{case.id} hung: no answer within {case.limit + 5:.0f}s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return result.returncode, result.stdout, result.stderr


def run_process(case: Case, root: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """The real entry point with its stdout closed by the reader, full, or closed."""
    command = [*gpudrv_command(), *case.argv]
    full_env = gpudrv_env(env)
    if case.process == "pipe-closed":
        process = subprocess.Popen(
            command, cwd=root, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first byte (`| head -0`)
        err = process.stderr.read().decode(errors="replace")
        return process.wait(timeout=case.limit), "", err
    if case.process == "full":
        with Path("/dev/full").open("wb") as full:
            result = subprocess.run(
                command,
                cwd=root,
                env=full_env,
                stdout=full,
                stderr=subprocess.PIPE,
                timeout=case.limit,
                check=False,
            )
        return result.returncode, "", result.stderr.decode(errors="replace")
    if case.process == "plain":
        result = subprocess.run(
            command, cwd=root, env=full_env, capture_output=True, timeout=case.limit, check=False
        )
        return (
            result.returncode,
            result.stdout.decode(errors="replace"),
            result.stderr.decode(errors="replace"),
        )
    assert case.process == "stdout-closed"
    result = subprocess.run(
        command,
        cwd=root,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=case.limit,
        check=False,
        preexec_fn=lambda: os.close(1),  # `>&-`
    )
    return result.returncode, "", result.stderr.decode(errors="replace")
