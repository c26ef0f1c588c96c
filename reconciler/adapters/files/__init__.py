"""Reading text files with clear errors, and changing them atomically under a lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from reconciler.errors import GpudrvError

# The package's own data files: inside it, so they ship in the wheel with no packaging rule of their own.
DATA = Path(__file__).resolve().parents[2] / "data"
T = TypeVar("T")

# An input gpudrv reads whole (a matrix, a manifest, a kubeconfig): far more than any real one.
MAX_INPUT_BYTES = 64 * 1024 * 1024
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def cwd() -> Path:
    """The current directory, or one clear error when it was deleted under gpudrv's feet."""
    try:
        return Path.cwd()
    except OSError as exc:
        raise GpudrvError(f"the current directory is gone ({exc.strerror}): cd to one that exists") from None


def absolute(path: Path) -> Path:
    """`path` from the current directory (an absolute path needs no current directory)."""
    return path if path.is_absolute() else cwd() / path


def read_text(path: Path) -> str:
    """The file's exact text (newlines untouched), or one clear error. Regular files only: a FIFO
    (opened without blocking, so no writer is waited for), a device (/dev/zero never ends) or a
    socket is refused at once, and so is a file of more than MAX_INPUT_BYTES."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise GpudrvError("not UTF-8 text", file=str(path), line=line) from None


def read_json(path: Path, parse: Callable[[Any], T]) -> T:
    """A JSON data file read and handed to `parse`; one that is not JSON or that `parse` refuses
    (a ValueError) is one error naming the file."""
    try:
        return parse(json.loads(read_text(path)))
    except ValueError as exc:
        raise GpudrvError(f"{path}: {exc}") from None


def read_bytes(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise GpudrvError(f"{path}: no such file") from None
    except NotADirectoryError:
        raise GpudrvError(f"{path}: no such file (a part of the path is not a directory)") from None
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise GpudrvError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise GpudrvError(f"{path}: is {kind}, not a regular file")
        # Its size now, and one byte more to see it grow past the limit (not a 64 MiB buffer each time).
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(min(info.st_size, MAX_INPUT_BYTES) + 1)
            while len(data) <= MAX_INPUT_BYTES and (more := handle.read(64 * 1024)):
                data += more
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_INPUT_BYTES:
        raise GpudrvError(
            f"{path}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; not an input gpudrv reads"
        )
    return data


# How long a change waits for another process changing the same file, and how often it looks again.
LOCK_WAIT = 30.0  # fifty adds at once on a loaded 2-core runner finish well inside it
LOCK_POLL = 0.05


def real_path(path: Path) -> Path:
    """Where a change to `path` must go: a symlink's target (the link stays a link, as editors and
    git expect), else the path itself; one clear error for a path too long or a symlink loop."""
    try:
        return absolute(path).resolve() if path.is_symlink() else path
    except RuntimeError:  # Python 3.11's resolve() on a symlink loop (3.13 raises OSError ELOOP)
        raise GpudrvError(f"{path}: cannot read: {os.strerror(errno.ELOOP)}") from None
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES on a part of the path
        raise GpudrvError(f"{path}: cannot read: {exc.strerror or exc}") from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[Path]:
    """Hold an exclusive advisory lock for changing `path` (read, check, write) and yield the file to
    write: `real_path(path)`. The lock is flock(2) on the file's directory, not on the file: the file is
    replaced by a rename, so a lock on its inode would not cover the next writer, and a lock file beside
    it would be left behind in the working tree. Waits at most LOCK_WAIT seconds, then one clear error."""
    target = real_path(path)
    folder = target.parent
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise GpudrvError(f"{path}: no such file") from None
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot lock its directory {folder}: {exc.strerror}") from None
    try:
        _take(fd, path)
        yield target
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _take(fd: int, path: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise GpudrvError(
                    f"{path}: another process has been changing it for {LOCK_WAIT:g} s "
                    "(a lock on its directory); file unchanged, try again"
                ) from None
            time.sleep(LOCK_POLL)
        except OSError as exc:
            raise GpudrvError(f"{path}: cannot lock its directory: {exc.strerror}") from None


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new one, never half.
    A symlink is written through: its target changes, the link stays."""
    path = real_path(path)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot write in {path.parent}: {exc.strerror}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(mode)
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise GpudrvError(f"{path}: cannot write: {exc.strerror}") from None
        raise
