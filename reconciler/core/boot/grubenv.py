"""grubenv, read as GRUB reads it (rhboot/grub2 grub-2.12: include/grub/lib/envblk.h:22,
grub-core/lib/envblk.c:27-38 and 227-290), refusing where GRUB would load nothing."""

from __future__ import annotations

from reconciler.core.boot.port import Undecided

HEADER = b"# GRUB Environment Block\n"


def parse(data: bytes, where: str) -> dict[str, str]:
    """name -> value, as grub_envblk_iterate walks the block. A block GRUB calls invalid, or one it
    stops reading as "Broken", is refused: GRUB would boot on what it read so far, and a half-read
    environment is not something to label a node with (the conservative choice)."""
    # envblk.c:31-33: shorter than the signature and its NUL, or another start: "invalid environment block".
    if len(data) < len(HEADER) + 1 or not data.startswith(HEADER):
        raise Undecided(f"{where}: not a GRUB environment block (no '# GRUB Environment Block' header)")
    variables: dict[str, str] = {}
    at, end = len(HEADER), len(data)
    while at < end:
        if data[at : at + 1] != b"#":
            equals = data.find(b"=", at)
            if equals < 0:
                raise Undecided(f"{where}: a line with no '=': GRUB stops reading there (envblk.c:247-250)")
            value, cursor = bytearray(), equals + 1
            while cursor < end and data[cursor : cursor + 1] != b"\n":
                if data[cursor : cursor + 1] == b"\\":  # the escaped byte, whatever it is (newline too)
                    cursor += 1
                value += data[cursor : cursor + 1]
                cursor += 1
            if cursor >= end:
                raise Undecided(f"{where}: a value with no final newline: GRUB stops reading there")
            variables[_text(data[at:equals], where)] = _text(bytes(value), where)
            at = cursor
        newline = data.find(b"\n", at)  # find_next_line
        at = end if newline < 0 else newline + 1
    return variables


def _text(raw: bytes, where: str) -> str:
    if b"\0" in raw:
        raise Undecided(f"{where}: a NUL byte in a variable")
    return raw.decode("utf-8", "surrogateescape")
