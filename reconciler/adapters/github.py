"""GitHub Actions workflow commands: annotations on a file and line, with untrusted text escaped.

Messages and properties come from manifests (names, label values), so they are escaped as the
runner expects: `%` first, then CR and LF; in properties also `:` and `,`, which separate them.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["error", "warning", "notice"]


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Level, message: str, file: str | None = None, line: int | None = None, title: str | None = None
) -> str:
    """`::warning file=F,line=L,title=T::message`; properties that are None are left out."""
    properties = {"file": file, "line": None if line is None else str(line), "title": title}
    given = ",".join(
        f"{key}={escape_property(value)}" for key, value in properties.items() if value is not None
    )
    return f"::{level}{' ' + given if given else ''}::{escape_data(message)}"
