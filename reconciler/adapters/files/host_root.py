"""A node's root filesystem for `gpudrv probe`, read through core.boot's Root port.

Every symlink is resolved inside the root, as the host itself would resolve it: an absolute target
starts again at the root, `..` stops at it, so a link in the host's /boot never reaches the
container's own files. Reads are bounded (a FIFO or a huge file is refused, not waited on).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from reconciler.core.boot.port import Kind, Undecided
from reconciler.errors import GpudrvError

MAX_FILE = 1024 * 1024  # grub.cfg with dozens of kernels is tens of KiB
MAX_NAMES = 10_000
MAX_LINKS = 40  # the kernel's own limit (ELOOP)


class HostRoot:
    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise GpudrvError(f"--root {str(root)!r}: not a directory")
        self.root = root

    def _resolve(self, path: str) -> Path | None:
        """The path on this machine that `path` names inside the root; None when a part is missing."""
        pending = [part for part in path.split("/") if part not in ("", ".")]
        current: list[str] = []
        links = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if current:
                    current.pop()
                continue
            candidate = self.root.joinpath(*current, part)
            try:
                info = candidate.lstat()
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                raise Undecided(f"/{path}: cannot be read: {exc.strerror}") from None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Undecided(f"/{path}: too many levels of symbolic links")
                target = str(candidate.readlink())
                if target.startswith("/"):
                    current = []
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
                continue
            current.append(part)
        return self.root.joinpath(*current)

    def kind(self, path: str) -> Kind | None:
        found = self._resolve(path)
        if found is None:
            return None
        try:
            mode = found.lstat().st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Undecided(f"/{path}: cannot be read: {exc.strerror}") from None
        return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"

    def read(self, path: str) -> bytes | None:
        found = self._resolve(path)
        if found is None:
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(found, flags)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Undecided(f"/{path}: cannot be read: {exc.strerror}") from None
        with contextlib.closing(os.fdopen(fd, "rb")) as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Undecided(f"/{path}: not a regular file")
            try:
                data = handle.read(MAX_FILE + 1)  # /proc files report size 0: read, do not trust st_size
            except OSError as exc:
                raise Undecided(f"/{path}: cannot be read: {exc.strerror}") from None
        if len(data) > MAX_FILE:
            raise Undecided(f"/{path}: larger than {MAX_FILE} bytes")
        return data

    def names(self, path: str) -> tuple[str, ...] | None:
        found = self._resolve(path)
        if found is None or not found.is_dir():
            return None
        try:
            with os.scandir(found) as entries:
                names = []
                for entry in entries:
                    names.append(entry.name)
                    if len(names) > MAX_NAMES:
                        raise Undecided(f"/{path}: more than {MAX_NAMES} entries")
        except OSError as exc:
            raise Undecided(f"/{path}: cannot be listed: {exc.strerror}") from None
        return tuple(sorted(names))

    def stamp(self, path: str) -> tuple[int, int] | None:
        """(mtime in ns, size) of a file, for noticing a hook's trigger; None when absent or unreadable."""
        with contextlib.suppress(Undecided, OSError):
            found = self._resolve(path)
            if found is not None:
                info = found.stat()
                return info.st_mtime_ns, info.st_size
        return None

    def running_kernel(self) -> str:
        """The kernel the node runs: the root's /proc/sys/kernel/osrelease when it has one (a host
        root with /proc, or a fixture), else this process's own: a container runs on its node's
        kernel, and this is the file NFD reads for kernel-version.full (source/kernel/version.go 59-65)."""
        data = self.read("proc/sys/kernel/osrelease")
        if data is None:
            return os.uname().release
        return data.decode("utf-8", "replace").strip()


def remove(path: Path) -> bool:
    """Remove the feature file a run can no longer vouch for; True when there was one."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot remove the stale feature file: {exc.strerror}") from None
    return True
