"""Every line gpudrv writes is safe in a CI log: no outside text can be read as a workflow command.

The GitHub Actions runner reads each line a step prints, on stdout and on stderr, for workflow
commands, whatever gpudrv's -o and whether or not GITHUB_ACTIONS=true reaches gpudrv (a container step
does not pass it, yet the runner reads its lines). Its rules (actions/runner at 258d6c8):

- lines are what .NET's StreamReader.ReadLine returns: split at LF, CR and CRLF
  (src/Runner.Sdk/ProcessInvoker.cs:513); both streams go to the same reader
  (src/Runner.Worker/Handlers/ScriptHandler.cs:335-336, ContainerActionHandler.cs:269), which passes
  every line holding `##[` or `::` on to the command parser
  (src/Runner.Worker/Handlers/OutputManager.cs:77-90), which tries both forms
  (src/Runner.Worker/ActionCommandManager.cs:70-71);
- `::name props::data`: the line is TrimStart()ed, then must start with `::`
  (src/Runner.Common/ActionCommand.cs:36, :62-63);
- `##[name props]data`: `##[` ANYWHERE in the line (src/Runner.Common/ActionCommand.cs:35, :132);
- `##[stop-commands]token` / `::stop-commands::token` stops the parsing until the token comes back
  (src/Runner.Worker/ActionCommandManager.cs:108-118).

Both tests are .NET's culture-sensitive String.StartsWith(String) and String.IndexOf(String) (no
StringComparison given), under which characters the collation ignores (the soft hyphen, zero-width
and other format characters, C0/C1 controls, variation selectors) may sit between the characters
without breaking the match: the guard treats them as absent (IGNORABLE), and escaping more is harmless.

So `guarded()` always wraps sys.stdout and sys.stderr in a Guard that rewrites what passes through it:

- `##[` (ignorable characters allowed between) becomes `##\\[`: not a command, still readable;
- a line whose first visible characters are `::` gets a `\\` before them: `\\::warning::x`;
- a CR not followed by LF becomes the two characters `\\r`, so it cannot start a line of its own.

gpudrv's own workflow commands (the annotations of github.publish) go round the guard with
`command()`; their values are escaped by github_text.escape_data instead. Data output must stay valid:
`github_text.json_safe` spells such a `[` as `\\u005b` (the same JSON string, the same YAML
double-quoted scalar) before the guard sees it, and the HTML page spells `[` and a leading `:` as
character references. The runner's characters and patterns are the core's (core/base/github_text.py).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, cast

from reconciler.core.base.github_text import IGNORABLE, IGNORED, neutral_legacy

# Before the `::` test the runner trims blanks (.NET's char.IsWhiteSpace: Python's \s covers it).
_BLANKS = re.compile(rf"[\s{IGNORABLE}]*")
_LEADING = re.compile(rf"^[\s{IGNORABLE}]*(?=:{IGNORED}:)")  # what precedes a line's leading `::`
_OPEN_COLON = re.compile(rf"[\s{IGNORABLE}]*(:{IGNORED})")  # a line that may yet start with `::`
_INVISIBLE = re.compile(f"[{IGNORABLE}]+")
_LONE_CR = re.compile(r"\r(?!\n)")


class Guard:
    """A text stream that neutralises workflow commands in what is written through it.

    It keeps state across writes (a `print` writes its arguments and its end separately): whether the
    current line is still blank and its last two visible characters, and it holds back what may yet
    change meaning with the next character: a CR (a line break only when no LF follows) or a `:` that
    starts a line. `flush` writes it the safe way, so nothing is held across a flush."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._lock = threading.RLock()  # apply reports from worker threads
        self._blank_line = True  # nothing but blanks written on the current line yet
        self._last2 = ""  # the last two characters written on the current line, ignorable ones left out
        self._held = ""  # "\r", or ":" and ignorable characters, awaiting the next character
        self._at_line_start = True  # nothing at all written on the current line (for command())

    # --- the stream interface --------------------------------------------------------------------

    def write(self, text: str) -> int:
        with self._lock:
            pending, self._held = self._held + text, ""
            if pending.endswith("\r"):
                pending, self._held = pending[:-1], "\r"
            pending = _LONE_CR.sub(r"\\r", pending)  # now every CR is part of a CRLF
            last = pending[pending.rfind("\n") + 1 :]
            opening = _OPEN_COLON.fullmatch(last)
            if not self._held and opening and ("\n" in pending or self._blank_line):
                self._held = opening[1]
                pending = pending[: len(pending) - len(self._held)]
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
            if not self._at_line_start:
                self.raw.write("\n")
            self.raw.write(line + "\n")
            self._blank_line, self._last2, self._at_line_start = True, "", True

    # --- the rewriting -------------------------------------------------------------------------------

    def _put(self, text: str) -> None:
        """Write `text` (no lone CR in it) with `::` escaped at the start of a line and `##[` anywhere."""
        if not text:
            return
        lines = text.split("\n")
        for number, line in enumerate(lines):
            if number > 0 or self._blank_line:
                lines[number] = _LEADING.sub(lambda blanks: blanks[0] + "\\", line, count=1)
        context = self._last2  # already written: a `##[` may straddle two writes
        text = neutral_legacy(context + "\n".join(lines), "\\[")[len(context) :]
        self.raw.write(text)
        last = text[text.rfind("\n") + 1 :]
        visible = _INVISIBLE.sub("", last)
        if "\n" in text:
            self._blank_line, self._last2 = _BLANKS.fullmatch(last) is not None, visible[-2:]
            self._at_line_start = not last
        else:
            self._blank_line = self._blank_line and _BLANKS.fullmatch(last) is not None
            self._last2 = (self._last2 + visible)[-2:]
            self._at_line_start = False

    def _release(self) -> None:
        """Write a held character without knowing the next one: the safe spelling of each."""
        held, self._held = self._held, ""
        if held:
            # A CR stays on its line; a leading ':' is escaped, as the next write might start with ':'.
            self._put("\\r" if held == "\r" else "\\" + held)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """sys.stdout and sys.stderr guarded for the duration (once: a nested call changes nothing)."""
    if isinstance(sys.stdout, Guard):
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
