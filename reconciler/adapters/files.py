"""Reading text files with clear errors, and writing them atomically."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from reconciler.errors import GpudrvError


def read_text(path: Path) -> str:
    """The file's exact text (newlines untouched), or one clear error."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise GpudrvError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise GpudrvError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise GpudrvError("not UTF-8 text", file=str(path), line=line) from None


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new one, never half."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(mode)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
