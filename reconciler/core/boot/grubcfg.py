"""A generated grub.cfg, read without running it: the default line 00_header writes, the menu the
/etc/grub.d scripts write, and every shape this reader does not know refused.

Shapes, from rhboot/grub2 grub-2.12 and Ubuntu noble's grub2 2.12-1ubuntu1 (docs/research/next-kernel.md
1.1 and 1.5): 00_header's `if [ "${next_entry}" ] ; then ... else set default="D" ; fi`
(util/grub.d/00_header.in 76-85 in 2.12-1ubuntu1), menuentry/submenu lines with
`$menuentry_id_option 'ID'` (10_linux.in 181-197), titles single-quoted with '\\'' for a quote
(grub-mkconfig_lib.in 314-316), and 10_linux's title_correction_code (10_linux.in 189-193).
"""

from __future__ import annotations

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
        for (word, _), following in zip(head, head[1:], strict=False):
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
    corrections: list[tuple[str, str]] = []
    top: list[Entry] = []
    stack: list[_Builder | str] = []  # builders, "if" and "function"
    section, blscfg_after, cmostest = "", None, False
    for number, line in enumerate(lines, 1):
        if number - 1 in header_at or not line:
            continue
        if line.startswith("#"):
            marker = _SECTION.fullmatch(line)
            if marker:
                section = marker.group(2) if marker.group(1) == "BEGIN" else ""
            continue
        cmostest = cmostest or "cmostest" in line
        if _ASSIGNS_DEFAULT.search(line):
            found = _CORRECTION.findall(line)
            if found and _CORRECTION.sub("", line).strip() == "":
                corrections.extend((unquote(old), unquote(new)) for old, new in found)
                continue
            if _ALLOWED_DEFAULTS.get(section) != line:
                raise Undecided(
                    f"grub.cfg line {number}: another assignment of default, which this reader does not run"
                )
        head = words(line)
        first = head[0][0]
        builders = [item for item in stack if isinstance(item, _Builder)]
        inside = builders[-1] if builders else None
        if first in ("menuentry", "submenu"):
            if inside is not None and inside.kind == "menuentry":
                raise Undecided(f"grub.cfg line {number}: a {first} inside a menuentry")
            conditional = "if" in stack or (inside is not None and inside.conditional)
            stack.append(_Builder(first, head, section, conditional))
        elif first == "}":
            if not stack or stack[-1] == "if":
                raise Undecided(f"grub.cfg line {number}: a '}}' this reader cannot match")
            closed = stack.pop()
            if isinstance(closed, _Builder):
                (inside_of(stack).children if inside_of(stack) else top).append(closed.build())
        elif inside is not None and inside.kind == "menuentry":
            if first in _LINUX and len(head) > 1:
                inside.kernels.append(head[1][0])
            if line.endswith("{"):
                raise Undecided(f"grub.cfg line {number}: a block inside a menuentry")
        elif first == "function" and line.endswith("{"):
            stack.append("function")
        elif first == "if" and head[-1][0] not in ("fi", "fi;"):
            stack.append("if")
        elif first == "fi":
            if not stack or stack[-1] != "if":
                raise Undecided(f"grub.cfg line {number}: a 'fi' this reader cannot match")
            stack.pop()
        elif first == "blscfg" and "function" not in stack:
            if "if" in stack or inside is not None or blscfg_after is not None:
                raise Undecided(f"grub.cfg line {number}: a blscfg command this reader does not know")
            blscfg_after = len(top)
    if stack:
        raise Undecided("grub.cfg: a block is not closed at the end of the file")
    return Config(default, tuple(corrections), tuple(top), blscfg_after, cmostest)


def inside_of(stack: list[_Builder | str]) -> _Builder | None:
    builders = [item for item in stack if isinstance(item, _Builder)]
    return builders[-1] if builders else None


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
