"""Issue 12: `matrix add` in a directory it may not write is one line, and the matrix unchanged.

As root every directory is writable, so the real entry point then runs as nobody (setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, gpudrv_command, gpudrv_env


def test_matrix_add_in_a_read_only_directory() -> None:
    as_nobody: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: no user for whom a directory is read-only")
        as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        root.chmod(0o755)
        shutil.copytree(REPO / "matrix", root / "matrix")
        matrix = root / "matrix" / "support-matrix.csv"
        before = matrix.read_bytes()
        matrix.chmod(0o444)
        (root / "matrix").chmod(0o555)
        try:
            result = subprocess.run(
                [*as_nobody, *gpudrv_command(), "matrix", "add", "550", "5.15.0-1-generic", "ubuntu22.04"],
                cwd=root,
                env=gpudrv_env(),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            (root / "matrix").chmod(0o755)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert (
            result.stderr == "gpudrv: matrix/support-matrix.csv: cannot write in matrix: Permission denied\n"
        )
        assert matrix.read_bytes() == before
        assert sorted(path.name for path in (root / "matrix").iterdir()) == [
            "gpu-operator-helm.csv",
            "gpu-operator.csv",
            "support-matrix.csv",
        ]
