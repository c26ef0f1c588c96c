"""The installed `gpudrv` console script, in a new process: it starts, knows its version and its commands.

Most CLI tests call `reconciler.cli.main` in-process (tests/conftest.py::run_main); these, and a few
marked ones beside them, exercise the real entry point.
"""

from importlib.metadata import version

from reconciler import __version__
from tests.conftest import run_gpudrv

COMMANDS = (
    "tag",
    "audit",
    "matrix",
    "manifests",
    "plan",
    "apply",
    "drain",
    "status",
    "report",
    "explain",
    "diff",
    "init",
)


def test_version_is_the_installed_one() -> None:
    result = run_gpudrv("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"gpudrv {__version__}\n", "")
    assert __version__ == version("gpudrv")


def test_help_lists_every_command() -> None:
    result = run_gpudrv("--help")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: gpudrv ")
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("    ")}
    assert set(COMMANDS) <= listed
