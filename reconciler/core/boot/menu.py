"""How GRUB turns the `default` variable into a menu entry: upstream (Debian, Ubuntu) and RHEL differ.

Upstream, rhboot/grub2 tag grub-2.12, grub-core/normal/menu.c: get_entry_number 492-536 (a numeric
prefix is an index, else the first entry whose title or id menuentry_eq the value, 467-489), the
fallback to entry 0 when nothing is found or the index is out of range (585-590), and a submenu's
default = what follows the first single '>' (278-293). grub_strtoull: grub-core/kern/misc.c 429-505.
RHEL 8 and 9 (rhel-8-main, rhel-9-main): get_entry_number_helper, menu.c 196-245 in rhel-9-main: an
id (up to the first blank), then a title, then a number that must be the whole value; the same on
RHEL 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core.boot.port import Undecided

_SPACE = " \t\n\r\f\v"  # grub_isspace


@dataclass(frozen=True)
class Entry:
    """A menu entry or a submenu as grub.cfg (or blscfg) makes it. `known` is False when its title
    or id is computed at boot (a variable in it); `conditional` when an `if` decides whether it exists."""

    title: str
    id: str | None  # None: GRUB makes the title its id (grub-2.12 commands/menuentry.c 152)
    kernel: str | None = None  # the path on its one `linux` line
    children: tuple[Entry, ...] | None = None  # a submenu's entries
    section: str = ""  # the /etc/grub.d script that wrote it
    conditional: bool = False
    known: bool = True
    linux_lines: int = 0


def strtoul(value: str) -> tuple[int | None, str]:
    """grub_strtoul(value, &end, 0): (the number, or None for BAD_NUMBER; -1 for an overflow), and the
    rest. Leading blanks, 0x hex and 0-digit octal as misc.c reads them."""
    at = 0
    while at < len(value) and value[at] in _SPACE:
        at += 1
    base = 0
    if value[at : at + 1] == "0":
        if value[at + 1 : at + 2] == "x":
            base, at = 16, at + 2
        elif "0" <= value[at + 1 : at + 2] <= "7" and value[at + 1 : at + 2] != "":
            base = 8
    base = base or 10
    number, found = 0, False
    while at < len(value):
        char = value[at].lower()
        digit = int(char, 36) if char.isascii() and char.isalnum() else 99
        if digit >= base:
            break
        found, number, at = True, number * base + digit, at + 1
        if number > 2**64 - 1:
            return -1, value[at:]  # OUT_OF_RANGE: get_entry_number's errno check makes it -1
    if not found:
        return None, value[at:]
    return _as_int(number), value[at:]


def _as_int(number: int) -> int:
    # get_entry_number casts the unsigned long to int.
    number %= 2**32
    return number - 2**32 if number >= 2**31 else number


def upstream_eq(name: str, spec: str) -> bool:
    """menuentry_eq (grub-2.12 menu.c 467-489): equal up to an unescaped '>'; '>>' is a literal '>'."""
    i = j = 0
    while True:
        c1 = name[i] if i < len(name) else ""
        c2 = spec[j] if j < len(spec) else ""
        after = spec[j + 1] if j + 1 < len(spec) else ""
        if c2 == ">" and after != ">":
            return c1 == ""
        if c2 == ">":
            j += 1
            c2 = spec[j] if j < len(spec) else ""
        if c1 != c2:
            return False
        if c1 == "":
            return True
        i, j = i + 1, j + 1


def rhel_eq(name: str, spec: str, limit: int) -> int:
    """RHEL's menuentry_eq(id, spec, limit) (rhel-9-main menu.c 168-193): its int result, 0 for no."""
    i = j = 0
    while limit == -1 or i <= limit:
        c1 = name[i] if i < len(name) else ""
        c2 = spec[j] if j < len(spec) else ""
        after = spec[j + 1] if j + 1 < len(spec) else ""
        if c2 == ">" and after != ">" and c1 == "":
            return j
        if c2 == ">" and after != ">":
            return 0
        if c2 == ">":
            j += 1
            c2 = spec[j] if j < len(spec) else ""
        if c1 != c2:
            if limit > -1 and i == limit and c1 == "" and c2 != "" and c2 in _SPACE:
                return i - 1
            return 0
        if c1 == "":
            return i
        i, j = i + 1, j + 1
    return 0


def submenu_default(value: str | None) -> str | None:
    """What a submenu's `default` becomes: the rest after the first single '>' (menu.c 278-293)."""
    if value is None:
        return None
    at = 0
    while at < len(value):
        if value[at : at + 2] == ">>":
            at += 2
            continue
        if value[at] == ">":
            break
        at += 1
    rest = value[at + 1 :]
    return rest if at < len(value) and rest else None


def upstream_number(entries: tuple[Entry, ...], value: str | None) -> int:
    """get_entry_number: -1 when unset or not found (the caller falls back to entry 0)."""
    if value is None:
        return -1
    number, _ = strtoul(value)
    if number is not None:
        return number
    for index, entry in enumerate(entries):
        if not entry.known:
            raise Undecided(f"entry {index} of the menu has a title computed at boot: cannot match {value!r}")
        if upstream_eq(entry.title, value) or upstream_eq(entry.id or entry.title, value):
            if entry.conditional:
                raise Undecided(f"{value!r} names an entry that exists only on some platforms")
            return index
    return -1


def rhel_number(entries: tuple[Entry, ...], value: str | None) -> int:
    """RHEL's get_entry_number: id (up to the first blank), title, then a whole-value number."""
    if value is None:
        return -1
    length = next((at for at, char in enumerate(value) if char in _SPACE), len(value))
    for index, entry in enumerate(entries):
        _known(entry, index, value)
        if rhel_eq(entry.id or entry.title, value, length):
            return index if value[length:] == "" else -1
    for index, entry in enumerate(entries):
        if rhel_eq(entry.title, value, -1):
            return index
    number, rest = strtoul(value)
    if number is None or (rest and rest[0] not in _SPACE) or rest:
        return -1
    return number


def _known(entry: Entry, index: int, value: str) -> None:
    if not entry.known or entry.conditional:
        raise Undecided(f"entry {index} of the menu is decided at boot: cannot match {value!r}")


def pick(entries: tuple[Entry, ...], number: int) -> Entry:
    """The entry at `number`, or entry 0 when it is out of range (menu.c 585-590)."""
    # Past the end of every entry, conditional ones included: out of range on every platform.
    if number < 0 or number >= len(entries):
        number = 0
    if not entries:
        raise Undecided("the menu has no entries")
    if any(entry.conditional or not entry.known for entry in entries[: number + 1]):
        raise Undecided(
            f"entry {number}: an entry at or before it is decided at boot (an `if` or a variable)"
        )
    return entries[number]
