"""The one error type the CLI turns into a single line on stderr and exit code 2."""

from __future__ import annotations


class GpudrvError(Exception):
    """Bad input, bad configuration or an unreachable cluster: the user must act.

    `file` and `line` say where the problem is, when it is in a file: the text still reads
    `file:line: message`, and GitHub output places its annotation there without parsing the text.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        self.message, self.file, self.line = message, file, line
        super().__init__(_located(message, file, line))


def _located(message: str, file: str | None, line: int | None) -> str:
    if file is None:
        return message
    return f"{file}:{line}: {message}" if line is not None else f"{file}: {message}"
