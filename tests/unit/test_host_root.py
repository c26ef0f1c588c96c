"""The probe's reader of a real root: symlinks resolved inside it, bounded reads, no waiting on a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.adapters.files import host_root
from reconciler.adapters.files.host_root import HostRoot
from reconciler.core.boot import Undecided, next_kernel
from tests.unit.boot_roots import ubuntu


def materialise(root: Path, files: dict[str, bytes | None]) -> None:
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data or b"")


def test_a_real_root_decides_as_the_same_root_as_data(tmp_path: Path) -> None:
    data = ubuntu()
    materialise(tmp_path, data.files)
    assert next_kernel(HostRoot(tmp_path)) == next_kernel(data)


def test_an_absolute_symlink_is_resolved_inside_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"container file")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "secret").write_bytes(b"host file")
    (root / "boot").mkdir()
    (root / "boot" / "abs").symlink_to("/etc/secret")  # the host's /etc/secret, not this machine's
    (root / "boot" / "up").symlink_to("../../../../outside/secret")  # '..' stops at the root
    (root / "boot" / "escape").symlink_to(str(outside / "secret"))
    host = HostRoot(root)
    assert host.read("boot/abs") == b"host file"
    assert host.read("boot/up") is None  # /outside/secret inside the root: absent
    assert host.read("boot/escape") is None  # the absolute path, taken inside the root
    assert host.kind("boot/abs") == "file" and host.kind("boot") == "dir" and host.kind("nope") is None


def test_merged_usr_lib_modules_is_followed(tmp_path: Path) -> None:
    (tmp_path / "usr/lib/modules/6.8.0-52-generic").mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")
    assert HostRoot(tmp_path).kind("lib/modules/6.8.0-52-generic") == "dir"


def test_a_symlink_loop_a_fifo_and_a_huge_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * (host_root.MAX_FILE + 1))
    host = HostRoot(tmp_path)
    with pytest.raises(Undecided, match="too many levels of symbolic links"):
        host.read("a")
    with pytest.raises(Undecided, match="not a regular file"):
        host.read("fifo")
    with pytest.raises(Undecided, match="larger than"):
        host.read("big")
    assert host.kind("fifo") == "other"


def test_an_unreadable_file_is_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mode 000 does not stop root (these tests may run as root): the refusal of open(2) is simulated.
    (tmp_path / "grub.cfg").write_bytes(b"x")

    def refuse(*args: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(host_root.os, "open", refuse)
    with pytest.raises(Undecided, match="cannot be read: Permission denied"):
        HostRoot(tmp_path).read("grub.cfg")


def test_the_running_kernel_is_the_root_s_osrelease_else_this_process_s(tmp_path: Path) -> None:
    assert HostRoot(tmp_path).running_kernel() == os.uname().release
    materialise(tmp_path, {"proc/sys/kernel/osrelease": b"6.8.0-45-generic\n"})
    assert HostRoot(tmp_path).running_kernel() == "6.8.0-45-generic"
