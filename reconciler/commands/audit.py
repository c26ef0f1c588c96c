"""`gpudrv audit`: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.ci import github
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.audit import audit_wants
from reconciler.render import audit, document


def run(source: NodeSource, matrix_path: Path, output: Output) -> int:
    tags = valid_matrix(matrix_path).tags()
    found = source.wants()
    source.require(len(found.wants))
    result = audit_wants(found, tags)
    if output is Output.GITHUB:
        github.publish(
            audit.annotate(result, matrix_path), audit.summary(result, matrix_path), audit.closing(result)
        )
    elif output.structured:
        print(document.text(audit.as_json(result, matrix=str(matrix_path)), output))
    else:
        against = audit.images_in(len(tags), str(matrix_path))
        print(audit.as_text(result, against))
    return OK if result.ok else FINDINGS
