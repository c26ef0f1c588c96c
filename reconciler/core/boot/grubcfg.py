"""A generated grub.cfg, read without running it: the default line 00_header writes, the menu the
/etc/grub.d scripts write, and every shape this reader does not know refused.

Shapes, from rhboot/grub2 grub-2.12 and Ubuntu noble's grub2 2.12-1ubuntu1 (docs/research/next-kernel.md
1.1 and 1.5): 00_header's `if [ "${next_entry}" ] ; then ... else set default="D" ; fi`
(util/grub.d/00_header.in 80-87 in 2.12-1ubuntu1), menuentry/submenu lines with
`$menuentry_id_option 'ID'` (10_linux.in 181-197), titles single-quoted with '\\'' for a quote
(grub-mkconfig_lib.in 314-316), and 10_linux's title_correction_code (10_linux.in 189-193).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from reconciler.core.boot.menu import Entry
from reconciler.core.boot.port import Undecided

HEADER = (
    'if [ "${next_entry}" ] ; then',
    'set default="${next_entry}"',
    "set next_entry=",
    "save_env next_entry",
    "set boot_once=true",
    "else",
)
SAVED = "${saved_entry}"
_SECTION = re.compile(r"### (BEGIN|END) /etc/grub\.d/(\S+) ###")
_QUOTED = r"'((?:[^']|'\\'')*)'"
_CORRECTION = re.compile(rf"""if \[ "x\$default" = {_QUOTED} \]; then default={_QUOTED}; fi;""")
_ASSIGNS_DEFAULT = re.compile(r"(^|[\s;])(set\s+)?default=")
_LINUX = ("linux", "linux16", "linuxefi")
# 08_fallback_counting (rhel-9-main util/grub.d/08_fallback_counting.in 10-23) sets default=1 when
# boot_counter runs out; the rules refuse a grubenv that arms it, so its line is expected, not refused.
_ALLOWED_DEFAULTS = {"08_fallback_counting": "set default=1"}


@dataclass(frozen=True)
class Config:
    default: str  # D, as written between the quotes
    corrections: tuple[tuple[str, str], ...]  # title_correction_code: (if default is, set it to)
    entries: tuple[Entry, ...]
    blscfg_after: int | None  # top-level entries before the `blscfg` command; None: no blscfg
    has_cmostest: bool


def words(line: str) -> list[tuple[str, bool]]:
    """GRUB script words: (text, whether a variable is expanded in it). Quotes are removed;
    `$name` outside single quotes is kept as written and flagged."""
    found: list[tuple[str, bool]] = []
    text, expanded, started, at = "", False, False, 0
    while at < len(line):
        char = line[at]
        if char in " \t":
            if started:
                found.append((text, expanded))
            text, expanded, started = "", False, False
        elif char == "'":
            end = line.find("'", at + 1)
            if end < 0:
                raise Undecided("grub.cfg: an unterminated single quote")
            text, started, at = text + line[at + 1 : end], True, end
        elif char == '"':
            at, piece, dollar = _double(line, at + 1)
            text, expanded, started = text + piece, expanded or dollar, True
        elif char == "\\":
            text, started, at = text + line[at + 1 : at + 2], True, at + 1
        else:
            text, expanded, started = text + char, expanded or char == "$", True
        at += 1
    if started:
        found.append((text, expanded))
    return found


def _double(line: str, at: int) -> tuple[int, str, bool]:
    piece, dollar = "", False
    while at < len(line) and line[at] != '"':
        if line[at] == "\\" and line[at + 1 : at + 2] in ('"', "\\", "$"):
            at += 1
        elif line[at] == "$":
            dollar = True
        piece += line[at : at + 1]
        at += 1
    if at >= len(line):
        raise Undecided("grub.cfg: an unterminated double quote")
    return at, piece, dollar


def unquote(text: str) -> str:
    return text.replace("'\\''", "'")


class _Builder:
    def __init__(self, kind: str, head: list[tuple[str, bool]], section: str, conditional: bool) -> None:
        self.kind, self.section, self.conditional = kind, section, conditional
        if len(head) < 3 or head[-1] != ("{", False):
            raise Undecided(f"grub.cfg: a {kind} line this reader does not know")
        self.title, title_expanded = head[1]
        self.id: str | None = None
        known = not title_expanded
        for (word, _), following in itertools.pairwise(head):
            if word in ("$menuentry_id_option", "--id"):
                self.id, id_expanded = following
                known = known and not id_expanded
        self.known = known
        self.kernels: list[str] = []
        self.children: list[Entry] = []

    def build(self) -> Entry:
        return Entry(
            title=self.title,
            id=self.id,
            kernel=self.kernels[0] if len(self.kernels) == 1 else None,
            children=tuple(self.children) if self.kind == "submenu" else None,
            section=self.section,
            conditional=self.conditional,
            known=self.known,
            linux_lines=len(self.kernels),
        )


def parse(text: str) -> Config:
    lines = [line.strip() for line in text.split("\n")]
    default, header_at = _header(lines)
    reader = _Reader()
    for number, line in enumerate(lines, 1):
        if number - 1 not in header_at and line:
            reader.line(number, line)
    if reader.stack:
        raise Undecided("grub.cfg: a block is not closed at the end of the file")
    return Config(default, tuple(reader.corrections), tuple(reader.top), reader.blscfg_after, reader.cmostest)


class _Reader:
    """One line at a time: the blocks open (entries, submenus, `if`, functions), the menu so far."""

    def __init__(self) -> None:
        self.corrections: list[tuple[str, str]] = []
        self.top: list[Entry] = []
        self.stack: list[_Builder | str] = []  # builders, "if" and "function"
        self.section = ""
        self.blscfg_after: int | None = None
        self.cmostest = False

    def inside(self) -> _Builder | None:
        builders = [item for item in self.stack if isinstance(item, _Builder)]
        return builders[-1] if builders else None

    def line(self, number: int, line: str) -> None:
        if line.startswith("#"):
            marker = _SECTION.fullmatch(line)
            if marker:
                self.section = marker.group(2) if marker.group(1) == "BEGIN" else ""
            return
        self.cmostest = self.cmostest or "cmostest" in line
        if _ASSIGNS_DEFAULT.search(line) and not self._default_line(number, line):
            return
        head = words(line)
        first, inside = head[0][0], self.inside()
        if first in ("menuentry", "submenu"):
            if inside is not None and inside.kind == "menuentry":
                raise Undecided(f"grub.cfg line {number}: a {first} inside a menuentry")
            conditional = "if" in self.stack or (inside is not None and inside.conditional)
            self.stack.append(_Builder(first, head, self.section, conditional))
        elif first == "}":
            self._close(number)
        elif inside is not None and inside.kind == "menuentry":
            if first in _LINUX and len(head) > 1:
                inside.kernels.append(head[1][0])
            if line.endswith("{"):
                raise Undecided(f"grub.cfg line {number}: a block inside a menuentry")
        else:
            self._command(number, line, head)

    def _default_line(self, number: int, line: str) -> bool:
        """A line assigning default: title_correction_code is kept (False: nothing more to read),
        08_fallback_counting's is read on (True); any other is refused."""
        found = _CORRECTION.findall(line)
        if found and _CORRECTION.sub("", line).strip() == "":
            self.corrections.extend((unquote(old), unquote(new)) for old, new in found)
            return False
        if _ALLOWED_DEFAULTS.get(self.section) != line:
            raise Undecided(
                f"grub.cfg line {number}: another assignment of default, which this reader does not run"
            )
        return True

    def _close(self, number: int) -> None:
        if not self.stack or self.stack[-1] == "if":
            raise Undecided(f"grub.cfg line {number}: a '}}' this reader cannot match")
        closed = self.stack.pop()
        if isinstance(closed, _Builder):
            parent = self.inside()
            (parent.children if parent is not None else self.top).append(closed.build())

    def _command(self, number: int, line: str, head: list[tuple[str, bool]]) -> None:
        first = head[0][0]
        if first == "function" and line.endswith("{"):
            self.stack.append("function")
        elif first == "if" and head[-1][0] not in ("fi", "fi;"):
            self.stack.append("if")
        elif first == "fi":
            if not self.stack or self.stack[-1] != "if":
                raise Undecided(f"grub.cfg line {number}: a 'fi' this reader cannot match")
            self.stack.pop()
        elif first == "blscfg" and "function" not in self.stack:
            if "if" in self.stack or self.inside() is not None or self.blscfg_after is not None:
                raise Undecided(f"grub.cfg line {number}: a blscfg command this reader does not know")
            self.blscfg_after = len(self.top)


def _header(lines: list[str]) -> tuple[str, set[int]]:
    """00_header's default block, exactly once: D and the line indexes it takes."""
    found = [at for at in range(len(lines)) if tuple(lines[at : at + len(HEADER)]) == HEADER]
    if len(found) != 1:
        raise Undecided("grub.cfg: not 00_header's next_entry/default block exactly once")
    at = found[0] + len(HEADER)
    default = re.fullmatch(r'set default="([^"]*)"', lines[at] if at < len(lines) else "")
    if not default or lines[at + 1 : at + 2] != ["fi"]:
        raise Undecided("grub.cfg: 00_header's default block has a shape this reader does not know")
    return default.group(1), set(range(found[0], at + 2))
