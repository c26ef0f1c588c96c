"""What the boot-loader rules read: a host root as a small read-only port, and the one way they refuse.

The core does no I/O: adapters.files.host_root reads a real root (symlinks resolved inside it, sizes
limited); Memory is a root given as plain data, for tests and for anything already in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

Kind = Literal["file", "dir", "other"]


class Undecided(Exception):
    """The next kernel cannot be decided from the files; the message is one line saying why."""


class Root(Protocol):
    """Paths are relative to the root, with `/` separators and no leading slash: "boot/grub/grub.cfg"."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when there is no such file. Raises Undecided when it cannot be read."""
        ...

    def kind(self, path: str) -> Kind | None:
        """What the path is, after its symlinks (resolved inside the root); None when absent."""
        ...

    def names(self, path: str) -> tuple[str, ...] | None:
        """A directory's entries, sorted; None when it is not a directory. Raises Undecided likewise."""
        ...


@dataclass(frozen=True)
class Memory:
    """A root as data: `files` maps a path to its bytes (None: there, but unreadable); directories are
    the files' parents plus `dirs`."""

    files: Mapping[str, bytes | None]
    dirs: frozenset[str] = field(default_factory=frozenset)

    def read(self, path: str) -> bytes | None:
        if path not in self.files:
            return None
        data = self.files[path]
        if data is None:
            raise Undecided(f"/{path}: cannot be read")
        return data

    def _directories(self) -> set[str]:
        found = {"", *self.dirs}  # "": the root itself
        for path in [*self.files, *self.dirs]:
            parts = path.split("/")
            found.update("/".join(parts[:i]) for i in range(1, len(parts)))
        return found

    def kind(self, path: str) -> Kind | None:
        if path in self.files:
            return "file"
        return "dir" if path in self._directories() else None

    def names(self, path: str) -> tuple[str, ...] | None:
        if path not in self._directories():
            return None
        prefix = f"{path}/" if path else ""
        children = {p[len(prefix) :].split("/")[0] for p in [*self.files, *self.dirs] if p.startswith(prefix)}
        return tuple(sorted(children))
