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
    MARKDOWN = "markdown"
    GITHUB = "github"
    HTML = "html"


class Installer(StrEnum):
    """How `apply` gets the driver installed (here, so the CLI builds its parser without apply)."""

    LABELS = "labels"  # gpudrv sets the driver labels itself (the lab's stand-in for the operator)
    WAIT = "wait"  # the GPU Operator installs; gpudrv waits for its driver pod and GFD's labels
