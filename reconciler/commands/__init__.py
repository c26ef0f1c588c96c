"""One module per verb; each `run` takes plain values, prints, and returns the exit code."""

from enum import StrEnum

OK, FINDINGS, ERROR = 0, 1, 2


class Output(StrEnum):
    """What -o asks for; a command offers some of these (the CLI's choices say which)."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    GITHUB = "github"
