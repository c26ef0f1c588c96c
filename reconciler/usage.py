"""How `gpudrv COMMAND --help` is written. A Usage (each verb's module has its own: reconciler/verbs)
is a one-line summary (also the line in `gpudrv --help`), what the command reads and its exit codes,
and examples. tests/cli/test_conventions.py parses every example.

The examples use the bundled files (clusters/lab, matrix/) where they can, so they run as shown.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Any

WIDTH = 78
LIVE = "Reads the live cluster (--kubeconfig, --context, $KUBECONFIG, ~/.kube/config or in-cluster)."
DESIRED = "--from DIR is the desired state in git (default: gpudrv.yaml's fleet)."


@dataclass(frozen=True)
class Usage:
    summary: str  # one line, lower case, no full stop: argparse lists it under COMMAND
    details: str = ""
    examples: tuple[tuple[str, str], ...] = ()  # (command line, what it shows)


GPUDRV = Usage(
    "precompiled GPU driver images on Kubernetes: tags, matrix audits, safe upgrades",
    "Most commands read the live cluster, or the manifests in git with --from DIR. Exit codes: 0 ok, "
    "1 findings, 2 a usage, input or connection error. Defaults for the flags come from gpudrv.yaml, "
    "found in the current directory or above it, up to the repository root. gpudrv COMMAND --help: "
    "what one command reads, its exit codes, examples.",
    (
        ("gpudrv audit --from clusters/lab", "every GPU node's image is in the matrix"),
        ("gpudrv matrix validate", "the support matrix is well-formed"),
        ("gpudrv report --from clusters/lab", "NODES, SKEW, MATRIX_ROWS"),
    ),
)


def of(usage: Usage) -> dict[str, Any]:
    """add_parser's keyword arguments for a verb's help: help, description, epilog."""
    return {"help": usage.summary, **texts(usage)}


def texts(usage: Usage) -> dict[str, Any]:
    """description and epilog, kept as written (argparse would join the example lines)."""
    summary = usage.summary[0].upper() + usage.summary[1:] + "."
    details = textwrap.fill(usage.details, WIDTH) if usage.details else ""
    width = max(len(line) for line, _ in usage.examples)
    examples = [f"  {line:<{width}}  # {what}" for line, what in usage.examples]
    return {
        "description": summary + (f"\n\n{details}" if details else ""),
        "epilog": "examples:\n" + "\n".join(examples),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
