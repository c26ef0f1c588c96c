"""Inside GitHub Actions every line gpudrv writes is read by the runner for workflow commands.

The runner takes a line of stdout or stderr as a command in two forms: `##[name]...` ANYWHERE in the
line, and `::name ...::...` when the line starts with `::` after leading whitespace (it trims it). It
splits lines at LF, CR and CRLF. gpudrv quotes untrusted text (matrix cells, label keys and values,
node and file names, git refs, commit authors) in every output mode, so when GITHUB_ACTIONS=true
`guarded()` wraps sys.stdout and sys.stderr in a Guard that rewrites what passes through it:

- `##[` becomes `##\\[` (not a command any more, and still readable);
- a line whose first non-blank characters are `::` gets a `\\` before them: `\\::warning::x`;
- a CR not followed by LF becomes the two characters `\\r`, so it cannot start a line of its own.

gpudrv's own workflow commands (the annotations of github.publish) go round the guard with
`command()`; their values are escaped by github.escape_data instead. JSON output must stay JSON:
see github.json_text, which spells `##[` as `##\\u005b` (the same string) before the guard sees it.
Outside GitHub Actions nothing is wrapped and nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, cast

# Characters the runner's TrimStart() may remove before it looks for `::` (`\s` is str.isspace, which
# covers .NET's whitespace; the rest are invisible characters taken as blank too: escaping more is harmless).
_BLANKS = r"[\s\u180e\u200b\ufeff]*"
_LEADING = re.compile(_BLANKS)
_LONE_CR = re.compile(r"\r(?!\n)")
_LEADING_COLON = re.compile(_BLANKS + ":")


class Guard:
    """A text stream that neutralises workflow commands in what is written through it.

    It keeps state across writes (a `print` writes its arguments and its end separately): whether the
    current line is still blank and its last two characters, and it holds back at most one character
    whose meaning depends on the next one: a CR (a line break only when no LF follows) or a `:` that
    starts a line. `flush` writes that character the safe way, so nothing is held across a flush."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._lock = threading.RLock()  # apply reports from worker threads
        self._blank_line = True  # nothing but blanks written on the current line yet
        self._last2 = ""  # the last two characters written on the current line
        self._held = ""  # "\r" or ":" awaiting the next character

    # --- the stream interface --------------------------------------------------------------------

    def write(self, text: str) -> int:
        with self._lock:
            pending, self._held = self._held + text, ""
            if pending.endswith("\r"):
                pending, self._held = pending[:-1], "\r"
            pending = _LONE_CR.sub(r"\\r", pending)  # now every CR is part of a CRLF
            last = pending[pending.rfind("\n") + 1 :]
            if not self._held and _LEADING_COLON.fullmatch(last) and ("\n" in pending or self._blank_line):
                pending, self._held = pending[:-1], ":"
            self._put(pending)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            self._release()
            self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:  # encoding, errors, buffer, line_buffering, ...
        return getattr(self.raw, name)

    # --- gpudrv's own workflow commands ------------------------------------------------------------

    def command(self, line: str) -> None:
        """Write one workflow command line of gpudrv's own, unguarded, at the start of a line."""
        with self._lock:
            self._release()
            if self._last2:
                self.raw.write("\n")
            self.raw.write(line + "\n")
            self._blank_line, self._last2 = True, ""

    # --- the rewriting -------------------------------------------------------------------------------

    def _put(self, text: str) -> None:
        """Write `text` (no lone CR in it) with `::` escaped at the start of a line and `##[` anywhere."""
        if not text:
            return
        lines = text.split("\n")
        for number, line in enumerate(lines):
            if number == 0 and not self._blank_line:
                continue
            blanks = _LEADING.match(line)
            at = blanks.end() if blanks else 0
            if line.startswith("::", at):
                lines[number] = f"{line[:at]}\\{line[at:]}"
        context = self._last2  # already written: a `##[` may straddle two writes
        text = (context + "\n".join(lines)).replace("##[", "##\\[")[len(context) :]
        self.raw.write(text)
        last = text[text.rfind("\n") + 1 :]
        if "\n" in text:
            self._blank_line, self._last2 = _LEADING.fullmatch(last) is not None, last[-2:]
        else:
            self._blank_line = self._blank_line and _LEADING.fullmatch(last) is not None
            self._last2 = (self._last2 + last)[-2:]

    def _release(self) -> None:
        """Write a held character without knowing the next one: the safe spelling of each."""
        held, self._held = self._held, ""
        if held:
            # A CR stays on its line; a leading ':' is escaped, as the next write might start with ':'.
            self._put("\\r" if held == "\r" else "\\:")


def active() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Inside GitHub Actions, sys.stdout and sys.stderr guarded for the duration; else unchanged."""
    if not active() or isinstance(sys.stdout, Guard):
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = cast(TextIO, Guard(out)), cast(TextIO, Guard(err))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = out, err


def command(line: str) -> None:
    """Print one of gpudrv's own workflow commands on stdout, round the guard if there is one."""
    stream: Any = sys.stdout
    if isinstance(stream, Guard):
        stream.command(line)
    else:
        print(line)


def json_safe(text: str) -> str:
    """JSON text with `##[` spelled `##\\u005b`: the same JSON value, and no workflow command (the
    guard's `##\\[` would not be valid JSON)."""
    return text.replace("##[", "##\\u005b")
