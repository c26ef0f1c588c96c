"""One module per verb, and upgrades.py for the steps plan, apply and status share.

A verb's function takes plain values from the CLI, reads through the adapters, computes with the
core, prints what a renderer (reconciler.render) makes of the result, and returns the exit code.
"""

from enum import StrEnum

OK, FINDINGS, ERROR = 0, 1, 2


class Output(StrEnum):
    """What -o asks for; a command offers some of these (the CLI's choices say which)."""

    TEXT = "text"
    JSON = "json"
    YAML = "yaml"
    MARKDOWN = "markdown"
    GITHUB = "github"
    HTML = "html"
    GITHUB_MATRIX = "github-matrix"  # matrix fill: the build plan as a workflow's strategy.matrix

    @property
    def structured(self) -> bool:
        """Data (one object, render/document.py's contract) rather than text for people."""
        return self in (Output.JSON, Output.YAML)
