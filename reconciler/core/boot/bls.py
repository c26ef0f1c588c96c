"""RHEL 8 and 9: BLS entries in /boot/loader/entries, the blscfg module's sort, and grubenv.

rhboot/grub2 rhel-9-main (7878971) grub-core/commands/blscfg.c: which files (421-455), the id is the
file name without .conf (486-488, 730), the line parse (490-531), entries without `linux` skipped
(743-749), the title (761, 784), newest first by bls_cmp (352-366) with equal ids rejected (391-392).
RHEL 8 (rhel-8-main, ca8b1d2): qsort by bls_cmp, by the `version` keys first when every entry has
one (393-436, 832-846), the menu built from the highest down. The default is resolved by RHEL's
menu.c (reconciler.core.boot.menu.rhel_number).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from reconciler.core.boot import grubcfg, grubenv, menu
from reconciler.core.boot.kernels import installed, refuse_armed_env, release_of
from reconciler.core.boot.menu import Entry
from reconciler.core.boot.port import Root, Undecided
from reconciler.core.boot.vercmp import split_cmp

ENTRIES = "boot/loader/entries"
# Where a BIOS or a unified EFI install keeps grub.cfg, then RHEL 8's EFI directories.
CONFIGS = (
    "boot/grub2/grub.cfg",
    *(f"boot/efi/EFI/{vendor}/grub.cfg" for vendor in ("redhat", "centos", "rocky", "almalinux")),
)
MAX_ENTRIES = 100  # a real host has a handful; the order is checked pairwise


@dataclass(frozen=True)
class Bls:
    id: str  # the file name without .conf
    keys: tuple[tuple[str, str], ...]

    def get(self, key: str) -> str | None:
        return next((value for name, value in self.keys if name == key), None)  # the first one


def parse_entry(name: str, data: bytes) -> Bls:
    """read_entry's loop: blanks stripped, '#' lines skipped, key up to the first space (else tab),
    and a line without a separator or value ends the file's parse."""
    keys: list[tuple[str, str]] = []
    for raw in data.decode("utf-8", "surrogateescape").split("\n"):
        line = raw.rstrip("\r").lstrip(" \t")
        if line.startswith("#"):
            continue
        at = line.find(" ")
        if at < 0:
            at = line.find("\t")
        if at < 0 or at + 1 >= len(line):
            break
        keys.append((line[:at], line[at + 1 :].lstrip(" \t")))
    return Bls(name[: -len(".conf")], tuple(keys))


def read_entries(root: Root) -> tuple[Bls, ...]:
    if root.kind("loader/entries") is not None:
        raise Undecided("/loader/entries exists: blscfg would read it before /boot/loader/entries")
    names = root.names(ENTRIES)
    if names is None:
        raise Undecided(f"/{ENTRIES} is missing")
    wanted = [name for name in names if not name.startswith(".") and len(name) > 5 and name.endswith(".conf")]
    if len(wanted) > MAX_ENTRIES:
        raise Undecided(f"/{ENTRIES}: more than {MAX_ENTRIES} entries")
    entries = []
    for name in wanted:
        if not name.isprintable():
            raise Undecided(f"/{ENTRIES}: a file name with a control character: {name!r}")
        data = root.read(f"{ENTRIES}/{name}")
        if data is not None and root.kind(f"{ENTRIES}/{name}") == "file":
            entries.append(parse_entry(name, data))
    return tuple(entries)


def sort(entries: tuple[Bls, ...], *, rhel8: bool) -> tuple[Bls, ...]:
    """Newest first, as the menu lists them. Two entries that compare equal are refused: RHEL 9 keeps
    whichever the directory lists first, RHEL 8's qsort leaves them in no defined order."""
    use_version = rhel8 and all(entry.get("version") is not None for entry in entries)

    def compare(e0: Bls, e1: Bls) -> int:
        if use_version:
            result = split_cmp(e0.get("version") or "", e1.get("version") or "", has_name=False, plus=False)
            if result:
                return result
        return split_cmp(e0.id, e1.id, has_name=True, plus=not rhel8)

    ordered = sorted(entries, key=functools.cmp_to_key(compare), reverse=True)
    # Every pair, not only neighbours: then the order is total and any directory order gives this menu.
    for index, first in enumerate(ordered):
        for second in ordered[index + 1 :]:
            if compare(first, second) != 1:
                raise Undecided(
                    f"BLS entries {first.id!r} and {second.id!r} have no defined order (they compare equal)"
                )
    return tuple(ordered)


def next_kernel(root: Root, *, rhel8: bool) -> tuple[str, str]:
    where, config = _config(root)
    env = _env(root, where)
    entries = sort(read_entries(root), rhel8=rhel8)
    shown = [entry for entry in entries if entry.get("linux") is not None]
    menu_entries = tuple(
        Entry(title=e.get("title") or e.get("linux") or "", id=e.id, kernel=e.get("linux"), section="blscfg")
        for e in shown
    )
    full = menu_entries + config.entries  # BLS entries first: 10_linux runs blscfg before the later scripts
    value = env.get("next_entry") or ""
    if not value:
        value = env.get("saved_entry", "") if config.default == grubcfg.SAVED else config.default
        if "$" in value and config.default != grubcfg.SAVED:
            raise Undecided(
                f"/{where}: set default={config.default!r}: a variable this reader does not expand"
            )
    chosen = menu.pick(full, menu.rhel_number(full, value))
    if chosen.section != "blscfg" or chosen.kernel is None:
        raise Undecided(f"the default is {chosen.title!r}, not a BLS entry")
    release = release_of(chosen.kernel, strip="vmlinuz")
    return installed(root, release), f"/{ENTRIES}: {f'{chosen.id}.conf'!r}"


def _config(root: Root) -> tuple[str, grubcfg.Config]:
    """The one grub.cfg that runs blscfg (a stub that only `configfile`s another is not it)."""
    found: list[tuple[str, bytes]] = []
    for path in CONFIGS:
        data = root.read(path)
        if data is not None and b"blscfg" in data:
            found.append((path, data))
    if not found:
        raise Undecided("no grub.cfg running blscfg in /boot/grub2 or /boot/efi/EFI/*")
    if len({data for _, data in found}) > 1:
        paths = ", ".join(f"/{path}" for path, _ in found)
        raise Undecided(
            f"two different grub.cfg ({paths}): which one the firmware starts is not in the files"
        )
    path, data = found[0]
    if b"\0" in data:
        raise Undecided(f"/{path}: a NUL byte")
    config = grubcfg.parse(data.decode("utf-8", "surrogateescape"))
    if config.blscfg_after != 0:
        raise Undecided(f"/{path}: menu entries before blscfg, or no blscfg command this reader knows")
    if config.has_cmostest:
        raise Undecided(
            f"/{path}: a cmostest (GRUB_BUTTON_CMOS_ADDRESS): the default depends on the firmware"
        )
    custom = path.rsplit("/", 1)[0] + "/custom.cfg"
    if root.kind(custom) is not None:
        raise Undecided(f"/{custom} exists: 41_custom sources it at boot, and it may change the menu")
    return path, config


def _env(root: Root, config: str) -> dict[str, str]:
    """00_header on RHEL: load_env -f ${config_directory}/grubenv (rhel-9-main 00_header.in 56-60)."""
    where = config.rsplit("/", 1)[0] + "/grubenv"
    data = root.read(where)
    if data is None:
        return {}
    env = grubenv.parse(data, f"/{where}")
    refuse_armed_env(env, f"/{where}")
    if env.get("blsdir"):
        raise Undecided(f"/{where}: blsdir is set: entries from another directory")
    return env
