"""`gpudrv audit`: every GPU node's image must be in the support matrix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.ci import github
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import ERROR, FINDINGS, OK, Output
from reconciler.core.audit.audit import AuditResult, audit_wants, combined, in_cluster
from reconciler.render import audit, document, words
from reconciler.render.clusters import counted, with_clusters

if TYPE_CHECKING:  # the shared step of many clusters is imported when there are several
    from reconciler.commands.clusters import Target


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
        data = audit.as_json(result, matrix=str(matrix_path))
        print(document.text({**data, "desired": source.desired.as_json()}, output))
    else:
        against = audit.images_in(len(tags), str(matrix_path))
        print(audit.as_text(result, against))
    return OK if result.ok else FINDINGS


def run_many(targets: Sequence[Target], matrix_path: Path, output: Output) -> int:
    """The audit of several clusters against the one matrix, read side by side: their findings as
    one audit, each node named `CLUSTER/NODE`, each cluster's desired state in its entry of `clusters`
    (-o json); a cluster that could not be read is one line on stderr and exit 2, after the others'
    results."""
    from reconciler.commands import clusters

    tags = valid_matrix(matrix_path).tags()

    def one(target: Target, source: NodeSource) -> AuditResult:
        found = source.wants()
        source.require(len(found.wants))
        return in_cluster(audit_wants(found, tags), target.name)

    outcomes = clusters.read_each(targets, one)  # each with its desired state, as run's -o json has it
    results = [outcome.result for outcome in outcomes if outcome.result is not None]
    merged = combined(results)
    read = [clusters.listed(o, lambda result: (result.ok, len(result.audited))) for o in outcomes]
    if output is Output.GITHUB:
        summaries = [
            audit.summary(o.result, matrix_path, cluster=o.target.name)
            for o in outcomes
            if o.result is not None
        ]
        github.publish(
            audit.annotate(merged, matrix_path), summaries, f"{audit.closing(merged)} {counted(read)}"
        )
    elif output.structured:
        data = with_clusters(audit.as_json(merged, matrix=str(matrix_path)), read, ("nodes", "findings"))
        print(document.text(data, output))
    else:
        print(_text(merged, f"{audit.images_in(len(tags), str(matrix_path))}, {counted(read)}"))
    if clusters.report_errors(outcomes):
        return ERROR
    return OK if merged.ok else FINDINGS


def _text(merged: AuditResult, against: str) -> str:
    """A line per finding and note; else OK with what was checked (never the lab's bare OK: it would
    not say which clusters were read), and never OK with no GPU node checked (none could be read)."""
    if merged.findings or merged.notes or not merged.audited:
        return audit.as_text(merged, against)
    return f"OK: {words.count(len(merged.audited), 'GPU node')}, {audit.flat(against)}"
