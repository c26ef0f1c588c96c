"""GitHub Actions' channel: annotations printed on stdout, placed by path from $GITHUB_WORKSPACE, and
the job's Markdown step summary appended to $GITHUB_STEP_SUMMARY.

What they say, and its escaping, is the core's (core/base/github_text.py); here are only the environment
and the files. Everything else gpudrv prints in Actions goes through the guard of actions_guard.py; the
annotations, gpudrv's own commands, go round it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from reconciler.adapters import files
from reconciler.adapters.ci import actions_guard
from reconciler.core.base import github_text
from reconciler.core.base.github_text import SECTION_BUDGET, SUMMARY_LIMIT, Annotation, Summary
from reconciler.errors import GpudrvError


def workspace_path(file: str) -> str:
    """GitHub places annotations by path from the repository root: $GITHUB_WORKSPACE, where a
    workflow's steps start. Paths outside it are left as given."""
    try:
        root = files.absolute(Path(os.environ.get("GITHUB_WORKSPACE") or ".")).resolve()
        absolute = files.absolute(Path(file)).resolve()
    except (OSError, RuntimeError):  # a name too long, a symlink loop (3.11's resolve: RuntimeError)
        return Path(file).as_posix()
    return absolute.relative_to(root).as_posix() if absolute.is_relative_to(root) else Path(file).as_posix()


def placed(annotation: Annotation) -> Annotation:
    """The annotation at its file's path as GitHub places it (see workspace_path)."""
    if annotation.file is None:
        return annotation
    return dataclasses.replace(annotation, file=workspace_path(annotation.file))


def error_annotation(error: GpudrvError) -> Annotation:
    """A GpudrvError as an annotation, at its file and line when it has both."""
    if error.file is None or error.line is None:
        return Annotation("error", str(error), title="gpudrv")
    return Annotation("error", error.message, error.file, error.line, "gpudrv")


def append_summary(summary: Summary) -> None:
    """Append the section to $GITHUB_STEP_SUMMARY in one write (a no-op outside GitHub Actions),
    sized to what the step's 1 MiB still holds."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    path = Path(target)
    existing = path.stat().st_size if path.exists() else 0
    budget = min(SECTION_BUDGET, SUMMARY_LIMIT - existing - 1024)
    markdown = summary.markdown(budget) + "\n"
    if github_text.size(markdown) > SUMMARY_LIMIT - existing:
        return  # the step's summary is full: GitHub would reject all of it
    try:
        # backslashreplace: a file name that is not UTF-8 (surrogate escapes) must not end the run.
        with path.open("a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(markdown)
    except OSError as exc:
        raise GpudrvError(f"{path}: cannot write the step summary: {exc.strerror}") from None


def publish(annotations: Sequence[Annotation], summary: Summary | Sequence[Summary], closing: str) -> None:
    """Print the annotations GitHub will show, most important first, each placed from the workspace
    root, then a closing line of counts (fixed text only: it must not carry untrusted values), and
    append the summary (several: one section each, in order: one per cluster)."""
    for item in github_text.shown(annotations):
        actions_guard.command(placed(item).command())
    print(closing)
    for section in [summary] if isinstance(summary, Summary) else summary:
        append_summary(section)
