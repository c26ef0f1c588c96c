"""Issue 18, item 1: `matrix add` under concurrency, through symlinks, and in a read-only directory."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.adapters import files
from tests.conftest import REPO, gpudrv_command, gpudrv_env, run_gpudrv

MATRIX = "matrix/support-matrix.csv"
HEADER = "driver_branch,kernel,os_tag"


def one_error_line(returncode: int, stderr: str, *fragments: str) -> None:
    assert returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("gpudrv: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_fifty_concurrent_adds_keep_every_row(lab: Path) -> None:
    before = (lab / MATRIX).read_text().splitlines()
    rows = [f"550,5.15.0-{1000 + number}-generic,ubuntu22.04" for number in range(50)]
    processes = [
        subprocess.Popen(
            [*gpudrv_command(), "matrix", "add", *row.split(",")],
            cwd=lab,
            env=gpudrv_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for row in rows
    ]
    for process, row in zip(processes, rows, strict=True):
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        assert stdout.startswith(f"added {row} at {MATRIX}:")
    lines = (lab / MATRIX).read_text().splitlines()
    assert lines[: len(before)] == before
    assert sorted(lines[len(before) :]) == sorted(rows)
    # Every process printed the line it appended: all different, as the file has them.
    validate = run_gpudrv("matrix", "validate", cwd=lab)
    assert validate.returncode == 0, validate.stdout
    assert validate.stdout == f"{MATRIX}: {len(before) - 1 + 50} rows, valid\n"
    # Nothing left beside the matrix: no temporary file, no lock file.
    assert sorted(path.name for path in (lab / "matrix").iterdir()) == [
        "gpu-operator-helm.csv",
        "gpu-operator.csv",
        "support-matrix.csv",
    ]


def test_add_writes_through_a_symlink(lab: Path) -> None:
    shared = lab / "shared"
    shared.mkdir()
    target = shared / "matrix.csv"
    shutil.move(lab / MATRIX, target)
    (lab / MATRIX).symlink_to(Path("../shared/matrix.csv"))  # relative, as git stores links
    result = run_gpudrv("matrix", "add", "--tag", "550-5.15.0-1-generic-ubuntu22.04", cwd=lab)
    assert result.returncode == 0, result.stderr
    link = lab / MATRIX
    assert link.is_symlink()
    assert str(link.readlink()) == "../shared/matrix.csv"
    assert target.read_text().endswith("\n550,5.15.0-1-generic,ubuntu22.04\n")
    assert sorted(path.name for path in shared.iterdir()) == ["matrix.csv"]  # no temporary file left
    assert run_gpudrv("matrix", "validate", cwd=lab).returncode == 0


def test_add_through_a_chain_of_symlinks_keeps_the_mode(lab: Path) -> None:
    target = lab / "real.csv"
    shutil.move(lab / MATRIX, target)
    target.chmod(0o640)
    (lab / "middle.csv").symlink_to(target)
    (lab / MATRIX).symlink_to(lab / "middle.csv")
    result = run_gpudrv("matrix", "add", "550", "5.15.0-2-generic", "ubuntu22.04", cwd=lab)
    assert result.returncode == 0, result.stderr
    assert (lab / MATRIX).is_symlink()
    assert (lab / "middle.csv").is_symlink()
    assert target.read_text().endswith("550,5.15.0-2-generic,ubuntu22.04\n")
    assert target.stat().st_mode & 0o777 == 0o640


def test_add_to_a_dangling_symlink_is_one_error(lab: Path) -> None:
    (lab / MATRIX).unlink()
    (lab / MATRIX).symlink_to(lab / "gone" / "matrix.csv")
    result = run_gpudrv("matrix", "add", "550", "5.15.0-2-generic", "ubuntu22.04", cwd=lab)
    one_error_line(result.returncode, result.stderr, f"{MATRIX}: no such file")
    assert (lab / MATRIX).is_symlink()


@pytest.fixture
def readonly_lab() -> Iterator[Path]:
    """The example under /tmp, readable by everyone: a user without write access runs gpudrv there."""
    with tempfile.TemporaryDirectory(dir="/tmp") as name:
        root = Path(name)
        root.chmod(0o755)
        shutil.copytree(REPO / "matrix", root / "matrix")
        (root / "matrix").chmod(0o555)
        try:
            yield root
        finally:
            (root / "matrix").chmod(0o755)


def _as_unprivileged(command: list[str]) -> list[str]:
    """Root writes anywhere: run as nobody then (setpriv), so the directory really is read-only."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop the right to write")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]


def test_add_in_a_readonly_directory_is_one_error(readonly_lab: Path) -> None:
    before = (readonly_lab / MATRIX).read_bytes()
    result = subprocess.run(
        _as_unprivileged([*gpudrv_command(), "matrix", "add", "550", "5.15.0-3-generic", "ubuntu22.04"]),
        cwd=readonly_lab,
        env=gpudrv_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    one_error_line(result.returncode, result.stderr, f"{MATRIX}: cannot write in matrix", "ermission denied")
    assert result.stdout == ""
    assert (readonly_lab / MATRIX).read_bytes() == before
    assert sorted(path.name for path in (readonly_lab / "matrix").iterdir()) == [
        "gpu-operator-helm.csv",
        "gpu-operator.csv",
        "support-matrix.csv",
    ]


def test_a_held_lock_gives_one_error_after_the_wait(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(lab)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)  # this suite may itself run in Actions
    monkeypatch.setattr(files, "LOCK_WAIT", 0.3)
    before = (lab / MATRIX).read_bytes()
    holder = os.open(lab / "matrix", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another process changing the matrix, as far as flock knows
        code = cli.main(["matrix", "add", "550", "5.15.0-4-generic", "ubuntu22.04"])
    finally:
        os.close(holder)
    captured = capsys.readouterr()
    one_error_line(code, captured.err, f"{MATRIX}: another process has been changing it for 0.3 s")
    assert captured.out == ""
    assert (lab / MATRIX).read_bytes() == before
    # Once the holder is gone, the same add goes through.
    assert cli.main(["matrix", "add", "550", "5.15.0-4-generic", "ubuntu22.04"]) == 0
    assert (lab / MATRIX).read_text().endswith("550,5.15.0-4-generic,ubuntu22.04\n")


def test_write_atomic_failure_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.csv"
    path.write_text(f"{HEADER}\n")

    def refuse(self: Path, target: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(files.GpudrvError, match=r"m\.csv: cannot write: Permission denied"):
        files.write_atomic(path, f"{HEADER}\n550,k,u\n")
    assert [p.name for p in tmp_path.iterdir()] == ["m.csv"]
    assert path.read_text() == f"{HEADER}\n"
