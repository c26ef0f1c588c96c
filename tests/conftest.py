"""Shared helpers: run `gpudrv` (in-process through `reconciler.cli.main`, or the real entry point in a
subprocess), and a copy of the example fleet to change freely."""

from __future__ import annotations

import contextlib
import io
import locale
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpudrv_command() -> list[str]:
    """The installed console script next to this interpreter, as a user would run it."""
    script = Path(sys.executable).with_name("gpudrv")
    if not script.exists():
        raise RuntimeError(f"gpudrv is not installed next to {sys.executable}: run pip install -e '.[dev]'")
    return [str(script)]


# Inside GitHub Actions gpudrv defaults to GitHub output; tests that want it say so in `env`.
GITHUB_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")


def gpudrv_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without GitHub's variables, plus `env`."""
    inherited = {key: value for key, value in os.environ.items() if key not in GITHUB_VARIABLES}
    return {**inherited, **(env or {})}


def run_gpudrv(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real entry point in a new process: for what only a process shows, and for the e2e tier."""
    full_env = gpudrv_env(env)
    return subprocess.run(
        [*gpudrv_command(), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_main(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`reconciler.cli.main(args)` in this process, as `run_gpudrv` would see the real entry point.

    The same environment (this process's without GitHub's variables, plus `env`) and working
    directory, both restored afterwards; the exit status the console script would give (argparse's
    SystemExit included: 2 and the usage on stderr); stdout and stderr as a pipe shows them (not a
    TTY, encoded strictly resp. with backslashreplace, read back with universal newlines like
    subprocess's text mode). An exception main() does not handle propagates and fails the test, where
    the process would have printed a traceback.
    """
    from reconciler import cli

    with pytest.MonkeyPatch.context() as patch, _fresh_process_logging():
        for name in GITHUB_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        _kubeconfig_default_as_at_import(patch)
        if cwd is not None:
            patch.chdir(cwd)
        stdout, stderr = _pipe("strict"), _pipe("backslashreplace")
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                returncode = cli.main(list(args))
            except SystemExit as exc:
                returncode = _exit_status(exc.code)
            stdout.flush()
            stderr.flush()
    return subprocess.CompletedProcess(["gpudrv", *args], returncode, _read_back(stdout), _read_back(stderr))


def git(root: Path, *args: str) -> None:
    """git in `root`, as a throwaway identity on `main`: for tests that need a repository, not its authors."""
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *identity, *args], cwd=root, capture_output=True, check=True)


def _pipe(errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding=locale.getpreferredencoding(False), errors=errors)


def _read_back(stream: io.TextIOWrapper) -> str:
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    text = raw.getvalue().decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _exit_status(code: object) -> int:
    """What the interpreter makes of sys.exit(code): None is 0, another non-int is printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _kubeconfig_default_as_at_import(patch: pytest.MonkeyPatch) -> None:
    """The kubernetes client reads $KUBECONFIG once, at import; a new process would import it now."""
    module = sys.modules.get("kubernetes.config.kube_config")
    if module is not None:
        patch.setattr(module, "KUBE_CONFIG_DEFAULT_LOCATION", os.environ.get("KUBECONFIG", "~/.kube/config"))


@contextlib.contextmanager
def _fresh_process_logging() -> Iterator[None]:
    """No handler on the root logger, as in a new process: a warning from a logger without a handler
    of its own reaches stderr (logging's last resort) instead of pytest's log capture."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A working copy of the bundled example: matrix/ and clusters/lab/."""
    shutil.copytree(REPO / "matrix", tmp_path / "matrix")
    shutil.copytree(REPO / "clusters", tmp_path / "clusters")
    return tmp_path
