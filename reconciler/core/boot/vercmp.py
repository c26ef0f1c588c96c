"""blscfg's rpm-style version compare and its NVR split, as RHEL's GRUB sorts BLS entries.

rhboot/grub2 rhel-9-main (7878971) grub-core/commands/blscfg.c: vercmp 140-272, split_package_string
277-319, split_cmp 321-349. RHEL 8 (rhel-8-main, ca8b1d2) has the same vercmp without the '+' rule.
"""

from __future__ import annotations


def _isalnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _at(text: str, index: int) -> str:
    return text[index] if index < len(text) else ""


def _separator(c1: str, c2: str, plus: bool) -> int | None:
    """The tilde and plus rules at this point: a result, 2 to step over both, None when neither applies."""
    if c1 == "~" or c2 == "~":  # the tilde sorts before everything else
        return 2 if c1 == c2 else 1 if c1 != "~" else -1
    if plus and (c1 == "+" or c2 == "+"):  # like the tilde, but a string that ended is older
        if not c1 or not c2:
            return -1 if not c1 else 1
        return 2 if c1 == c2 else 1 if c1 != "+" else -1
    return None


def _segment(text: str, start: int, digits: bool) -> int:
    """Where the all-digit (or all-letter) segment starting at `start` ends."""
    end = start
    while _at(text, end) and (_at(text, end).isdigit() if digits else _at(text, end).isalpha()):
        if not _at(text, end).isascii():
            break
        end += 1
    return end


def _compare_segments(seg1: str, seg2: str, isnum: bool) -> int:
    if isnum:
        seg1, seg2 = seg1.lstrip("0"), seg2.lstrip("0")
        if len(seg1) != len(seg2):  # whichever number has more digits wins
            return 1 if len(seg1) > len(seg2) else -1
    if seg1 == seg2:
        return 0
    return -1 if _strcmp(seg1, seg2) < 1 else 1


def vercmp(a: str, b: str, *, plus: bool = True) -> int:
    """1: a is newer, -1: b is newer, 0: the same (blscfg.c 140-272, byte for byte)."""
    if a == b:
        return 0
    one, two = 0, 0
    skip = "~+" if plus else "~"
    while _at(a, one) or _at(b, two):
        while _at(a, one) and not _isalnum(_at(a, one)) and _at(a, one) not in skip:
            one += 1
        while _at(b, two) and not _isalnum(_at(b, two)) and _at(b, two) not in skip:
            two += 1
        step = _separator(_at(a, one), _at(b, two), plus)
        if step == 2:
            one, two = one + 1, two + 1
            continue
        if step is not None:
            return step
        if not (_at(a, one) and _at(b, two)):
            break
        isnum = _at(a, one).isdigit()
        end1, end2 = _segment(a, one, isnum), _segment(b, two, isnum)
        if two == end2:  # a numeric segment is newer than an alpha one ("one == end1" cannot happen)
            return 1 if isnum else -1
        result = _compare_segments(a[one:end1], b[two:end2], isnum)
        if result:
            return result
        one, two = end1, end2
    if not _at(a, one) and not _at(b, two):
        return 0
    return -1 if not _at(a, one) else 1


def _strcmp(a: str, b: str) -> int:
    # grub_strcmp compares bytes
    x, y = a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape")
    return (x > y) - (x < y)


def split(package: str, *, has_name: bool) -> tuple[str, str, str]:
    """(name, version, release) as split_package_string leaves them, None as ""."""
    release: str | None
    head, dash, tail = package.rpartition("-")
    if dash:
        package, release = head, tail
    else:
        release = None
    name: str | None = None
    version: str | None
    if not has_name:
        version = package
    else:
        head, dash, tail = package.rpartition("-")
        if dash:
            name, version = head, tail
        else:
            name, version = package, None
    if version is None:
        version, release = release, None
    return name or "", version or "", release or ""


def split_cmp(a: str, b: str, *, has_name: bool, plus: bool = True) -> int:
    (n0, v0, r0), (n1, v1, r1) = split(a, has_name=has_name), split(b, has_name=has_name)
    if has_name:
        result = vercmp(n0, n1, plus=plus)
        if result:
            return result
    return vercmp(v0, v1, plus=plus) or vercmp(r0, r1, plus=plus)
