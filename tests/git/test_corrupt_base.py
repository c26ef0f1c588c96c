"""Issue 18, item 4: a corrupt object at the base of `matrix impact` (or the merged ref of the image
gate) is one error line naming it, never an empty matrix, as `matrix history` does."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters import git
from reconciler.errors import GpudrvError
from tests.conftest import run_gpudrv
from tests.git.conftest import MATRIX, Script

R1 = "550,5.15.0-119-generic,ubuntu22.04"
R2 = "535,5.15.0-107-generic,ubuntu22.04"


def loose(script: Script, name: str) -> Path:
    object_id = script.git("rev-parse", name)
    path = script.root / ".git" / "objects" / object_id[:2] / object_id[2:]
    path.chmod(0o644)
    return path


def garbage(path: Path) -> None:
    path.write_bytes(b"garbage")


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:12])


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def removed(path: Path) -> None:
    path.unlink()


def other_content(path: Path) -> None:
    """Valid zlib, a valid header: only the object id tells that the content is not the blob's."""
    text = f"driver_branch,kernel,os_tag\n{R2}\n".encode()
    path.write_bytes(zlib.compress(b"blob %d\0" % len(text) + text))


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "garbage": garbage,
    "truncated": truncated,
    "emptied": emptied,
    "removed": removed,
    "other-content": other_content,
}


@pytest.fixture
def based(script: Script) -> tuple[Script, str]:
    """A matrix committed at HEAD, one more row in the working tree; the blob's id."""
    script.matrix(R1)
    script.commit("Start")
    blob = script.git("rev-parse", f"HEAD:{MATRIX}")
    script.matrix(R1, R2)
    return script, blob


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_base_blob_is_one_error_naming_it(based: tuple[Script, str], corruption: str) -> None:
    script, blob = based
    fleet = Path(__file__).resolve().parents[2] / "clusters" / "lab"
    CORRUPTIONS[corruption](loose(script, blob))
    result = run_gpudrv("matrix", "impact", "--base", "HEAD", "--from", str(fleet), cwd=script.root)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gpudrv: HEAD:{MATRIX}: ")
    assert blob in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("corruption", ["garbage", "truncated", "removed"])
def test_a_corrupt_tree_is_one_error_naming_it(based: tuple[Script, str], corruption: str) -> None:
    script, _ = based
    tree = script.git("rev-parse", "HEAD:matrix")
    CORRUPTIONS[corruption](loose(script, tree))
    with pytest.raises(GpudrvError, match=f"HEAD:{MATRIX}: git cannot read it in .*{tree}") as error:
        git.read_at(git.open_repo(script.root), "HEAD", MATRIX)
    assert "\n" not in str(error.value)


def test_history_and_impact_name_the_same_object(based: tuple[Script, str]) -> None:
    script, blob = based
    garbage(loose(script, blob))
    history = run_gpudrv("matrix", "history", cwd=script.root)
    assert history.returncode == 2
    assert blob in history.stderr
    with pytest.raises(GpudrvError, match=blob):
        git.read_at(git.open_repo(script.root), "HEAD", MATRIX)


def test_a_sound_repository_reads_as_before(based: tuple[Script, str]) -> None:
    script, _ = based
    repo = git.open_repo(script.root)
    assert git.read_at(repo, "HEAD", MATRIX) == f"driver_branch,kernel,os_tag\n{R1}\n"
    assert git.read_at(repo, "HEAD", "matrix/none.csv") is None
    assert git.read_at(repo, "HEAD", "no/such/dir.csv") is None
    script.write("matrix/[x]*.csv", "a\n")  # literal pathspecs: no glob
    script.commit("Odd name")
    assert git.read_at(repo, "HEAD", "matrix/[x]*.csv") == "a\n"
    assert git.read_at(repo, "HEAD", "matrix/x*.csv") is None
