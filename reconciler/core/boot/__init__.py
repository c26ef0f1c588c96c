"""The kernel a node boots next, decided from its files as its boot loader would decide it.

`decide(root, running)` reads through the Root port (no I/O here) and returns what the probe writes;
anything the rules cannot follow raises Undecided with one line saying why, never a guess.
Debian and Ubuntu: debian.py (GRUB's generated grub.cfg); RHEL 8 and 9: bls.py (BLS entries).
The rules and their sources: docs/research/next-kernel.md and docs/commands/probe.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core.boot import bls, debian, nfd
from reconciler.core.boot.port import Memory, Root, Undecided
from reconciler.core.images import tags

__all__ = ["Decision", "Memory", "Root", "Undecided", "decide", "next_kernel"]

_RHEL_LIKE = {"rhel", "centos", "rocky", "almalinux", "ol", "fedora"}


@dataclass(frozen=True)
class Decision:
    release: str  # what `uname -r` will print after the reboot
    value: str | None  # the label's value; None when it is the running kernel
    source: str  # where it was found: the file and entry

    @property
    def features(self) -> str:
        return nfd.feature_file(self.value)


def decide(root: Root, running: str) -> Decision:
    release, source = next_kernel(root)
    value = nfd.label_value(release)
    if value is None:
        raise Undecided(f"the next kernel {release!r} spells no kernel label: it must be {tags.KERNEL_SHAPE}")
    return Decision(release, None if value == nfd.spell(running) else value, source)


def next_kernel(root: Root) -> tuple[str, str]:
    grub = root.read(debian.CFG)
    has_bls = root.kind(bls.ENTRIES) == "dir"
    if grub is not None and has_bls:
        raise Undecided(f"both /{debian.CFG} and /{bls.ENTRIES}: which boot loader runs is not in the files")
    if grub is not None:
        return debian.next_kernel(root, grub)
    if has_bls:
        return _bls(root)
    raise Undecided(
        f"no /{debian.CFG} (Debian, Ubuntu) and no /{bls.ENTRIES} (RHEL): no boot loader this probe reads"
    )


def _bls(root: Root) -> tuple[str, str]:
    """RHEL 8 sorts as rhel-8-main, 9 and later (and Fedora) as rhel-9-main; an unknown release is
    decided only when both sorts pick the same kernel."""
    major = _rhel_major(root.read("etc/os-release"))
    if major is not None:
        return bls.next_kernel(root, rhel8=major == 8)
    found = {bls.next_kernel(root, rhel8=flag) for flag in (True, False)}
    if len(found) > 1:
        raise Undecided("/etc/os-release names no RHEL 8 or 9, and the two blscfg sorts disagree")
    return found.pop()


def _rhel_major(data: bytes | None) -> int | None:
    fields: dict[str, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip().strip("\"'")
    family = {fields.get("ID", ""), *fields.get("ID_LIKE", "").split()}
    if not family & _RHEL_LIKE:
        return None
    if fields.get("ID") == "fedora":
        return 99
    major = fields.get("VERSION_ID", "").split(".")[0]
    return int(major) if major.isdigit() and major in ("8", "9", "10") else None
