"""Debian and Ubuntu: the generated /boot/grub/grub.cfg, checked against /boot, with grubenv.

docs/research/next-kernel.md 1.5, rules 1-8: read grub.cfg, refuse the shapes it cannot follow, check
it is fresh (the kernels its 10_linux entries boot are the kernels 10_linux would find in /boot now:
2.12 10_linux.in 165-177, grub-mkconfig_lib.in 188-201), take next_entry, else the default line
(saved_entry when GRUB_DEFAULT=saved), resolve it as upstream menu.c does, and name the release.
"""

from __future__ import annotations

from reconciler.core.boot import grubcfg, grubenv, menu
from reconciler.core.boot.kernels import installed, refuse_armed_env, release_of
from reconciler.core.boot.menu import Entry
from reconciler.core.boot.port import Root, Undecided

CFG, ENV, CUSTOM = "boot/grub/grub.cfg", "boot/grub/grubenv", "boot/grub/custom.cfg"
_IMAGES = ("vmlinuz-", "vmlinux-", "kernel-")  # x86's glob, and vmlinux-* of the other architectures
_GARBAGE_SUFFIXES = (".rpmsave", ".rpmnew", ".sig")


def next_kernel(root: Root, data: bytes) -> tuple[str, str]:
    """(release, how it was found)."""
    if root.kind(CUSTOM) is not None:
        raise Undecided(f"/{CUSTOM} exists: 41_custom sources it at boot, and it may change the menu")
    config = grubcfg.parse(_text(data))
    if config.has_cmostest:
        raise Undecided(f"/{CFG}: a cmostest (GRUB_BUTTON_CMOS_ADDRESS): the default depends on the firmware")
    if config.blscfg_after is not None:
        raise Undecided(f"/{CFG}: runs blscfg: a BLS menu in a Debian-style /boot/grub")
    _fresh(root, config.entries)
    env = _env(root)
    value = _default(config, env)
    entry, path = _resolve(config.entries, value)
    if entry.section != "10_linux":
        raise Undecided(
            f"the default is {path}, written by {entry.section or 'no grub.d script'!r}, not 10_linux"
        )
    if entry.kernel is None:
        raise Undecided(f"the default is {path}, which has {entry.linux_lines} linux lines (one is needed)")
    release = release_of(entry.kernel, strip="sed")
    return installed(root, release), f"/{CFG}: {path}"


def _text(data: bytes) -> str:
    if b"\0" in data:
        raise Undecided(f"/{CFG}: a NUL byte")
    return data.decode("utf-8", "surrogateescape")


def _env(root: Root) -> dict[str, str]:
    data = root.read(ENV)
    if not data:  # 00_header: load_env only when grubenv is non-empty (`-s`)
        return {}
    env = grubenv.parse(data, f"/{ENV}")
    refuse_armed_env(env, f"/{ENV}")
    return env


def _default(config: grubcfg.Config, env: dict[str, str]) -> str:
    """next_entry when set (00_header: it wins whatever GRUB_DEFAULT says), else D, with ${saved_entry}
    expanded; then title_correction_code as grub.cfg runs it."""
    value = env.get("next_entry") or ""
    if not value:
        if "$" in config.default or "\\" in config.default:
            if config.default != grubcfg.SAVED:
                raise Undecided(
                    f"/{CFG}: set default={config.default!r}: a variable this reader does not expand"
                )
            value = env.get("saved_entry", "")
        else:
            value = config.default
    for old, new in config.corrections:
        if value == old:
            value = new
    return value


def _resolve(entries: tuple[Entry, ...], value: str | None) -> tuple[Entry, str]:
    """menu.c: the entry, then inside a submenu the rest after the first single '>'."""
    trail: list[str] = []
    while True:
        entry = menu.pick(entries, menu.upstream_number(entries, value))
        trail.append(repr(entry.title))
        if entry.children is None:
            return entry, " > ".join(trail)
        entries, value = entry.children, menu.submenu_default(value)


def _kernels(entries: tuple[Entry, ...]) -> set[str]:
    found: set[str] = set()
    for entry in entries:
        if entry.children is not None:
            found |= _kernels(entry.children)
        elif entry.section == "10_linux" and entry.kernel is not None:
            found.add(release_of(entry.kernel, strip="sed"))
    return found


def _fresh(root: Root, entries: tuple[Entry, ...]) -> None:
    """update-grub has run since the last kernel came or went: the same releases in both."""
    on_disk = {
        release_of(f"/{folder}/{name}", strip="sed")
        for folder in ("boot", "")
        for name in root.names(folder) or ()
        if name.startswith(_IMAGES) and _not_garbage(root, f"{folder}/{name}".lstrip("/"))
    }
    in_cfg = _kernels(entries)
    if not in_cfg:
        raise Undecided(f"/{CFG}: no 10_linux entry boots a kernel")
    if on_disk != in_cfg:
        added, gone = sorted(on_disk - in_cfg), sorted(in_cfg - on_disk)
        raise Undecided(
            f"/{CFG} is stale (update-grub has not run): in /boot, not in grub.cfg: {added or 'none'}; "
            f"in grub.cfg, not in /boot: {gone or 'none'}"
        )


def _not_garbage(root: Root, path: str) -> bool:
    # grub_file_is_not_garbage: a regular file (test -f follows symlinks), not a package manager's leftover.
    name = path.rsplit("/", 1)[-1]
    if ".dpkg-" in name or name.endswith(_GARBAGE_SUFFIXES) or name.startswith("README"):
        return False
    return root.kind(path) == "file"
