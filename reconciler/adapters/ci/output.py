"""stdout and stderr as a Unix tool uses them: the edge between gpudrv and whatever reads its output.

- A reader that stops reading (`gpudrv audit | head -1`, `gpudrv --help | head -0`): gpudrv exits
  quietly, with status 141 (128 + SIGPIPE, what a shell shows for a tool killed by the closed pipe),
  and nothing on stderr.
- A write that fails otherwise (`> /dev/full`, a full disk, an I/O error): one line on stderr, exit 2.
- No stdout at all (`>&-`): one line, exit 2, before anything is done.
- Text that the stream's encoding cannot carry (a file name that is not UTF-8) is written with
  backslash escapes instead of ending the run.
- Libraries' own log records and warnings (urllib3's retries and header complaints, an insecure-TLS
  warning) never reach stderr: gpudrv says what matters in its own words, in one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO, cast

CLOSED_PIPE = 128 + signal.SIGPIPE
ERROR = 2


class PipeClosed(Exception):
    """The reader of stdout went away."""


class WriteFailed(Exception):
    """stdout could not be written (ENOSPC, EIO, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Out:
    """sys.stdout, with its write errors told apart from every other OSError of the run."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        written: int = self._do(lambda: self.raw.write(text))
        return written

    def flush(self) -> None:
        self._do(self.raw.flush)

    def _do(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except BrokenPipeError:
            raise PipeClosed from None
        except OSError as exc:
            raise WriteFailed(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer, ...
        return getattr(self.raw, name)


def run(main: Callable[[], int]) -> int:
    """main()'s exit status, argparse's SystemExit included, with stdout's failures handled as above."""
    if sys.stdout is None:
        _say("gpudrv: stdout is closed: nothing to write the result to")
        return ERROR
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    raw = sys.stdout
    sys.stdout = cast(TextIO, _Out(raw))
    try:
        with _quiet_libraries():
            try:
                code = main()
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = _status(exc.code)
            sys.stdout.flush()
        return code
    except PipeClosed:
        _discard(raw)
        return CLOSED_PIPE
    except WriteFailed as exc:
        _discard(raw)
        _say(f"gpudrv: cannot write to stdout: {exc.reason}")
        return ERROR
    finally:
        sys.stdout = raw


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    _say(str(code))
    return 1


def _discard(stream: TextIO) -> None:
    """Point stdout's descriptor at /dev/null: the interpreter flushes it once more at exit, and that
    must not print "Exception ignored" after gpudrv's one line."""
    with contextlib.suppress(AttributeError, ValueError, OSError):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def _say(line: str) -> None:
    """One line on stderr, if there is a stderr that takes it."""
    with contextlib.suppress(Exception):
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    root = logging.getLogger()
    sink = logging.NullHandler()  # with a handler on the root logger, logging's last resort stays quiet
    root.addHandler(sink)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeHandler(sink)
