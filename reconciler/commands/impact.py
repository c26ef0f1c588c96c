"""`gpudrv matrix impact --base REF`: what the working tree's matrix changes, row by row and node by node.

The nodes (live, or the manifests with --from) are the same on both sides: this is the matrix's impact.
Exit 1 when a node that had its image at REF would lose it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.adapters import git, github, schemas
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core import matrix
from reconciler.core.impact import Impact, impact_wants
from reconciler.render import impact as show

RENDER: dict[Output, Callable[[Impact, str, str], str]] = {
    Output.TEXT: show.as_text,
    Output.MARKDOWN: show.as_markdown,
    Output.JSON: show.json_text,
    Output.YAML: show.yaml_text,
}


def run(base: str, matrix_path: Path, source: NodeSource, output: Output) -> int:
    rows = valid_matrix(matrix_path).rows
    repo, repo_path = git.locate(matrix_path)
    text = git.read_at(repo, base, repo_path)
    # The base is history: take the rows it had, even if it also had problems.
    before = [] if text is None else [row.key for row in matrix.parse(text, schemas.load("matrix-row")).rows]
    found = source.wants()
    source.require(len(found.wants))
    result = impact_wants(before, [row.key for row in rows], found.wants)
    if output is Output.GITHUB:
        context = show.Context(base, matrix_path, {row.key: row.line for row in rows})
        github.publish(
            show.annotate(result, context), show.summary(result, base, repo_path), show.closing(result)
        )
    else:
        print(RENDER[output](result, base, repo_path))
    return FINDINGS if result.broken else OK
