"""`gpudrv matrix impact --base REF`: what the working tree changes, row by row and node by node.

The nodes (live, or the manifests with --from) are the same on both sides. With --from the driver
contract is compared too: the base side is the folder, its Helm values, chart version and gpudrv.yaml
as they were at REF. Exit 1 when a node that had its image at REF would lose it, when a node's new
image is not in the matrix, or when the change's driver resources would be refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.adapters import desired, git
from reconciler.adapters.ci import github
from reconciler.adapters.files import schemas
from reconciler.adapters.git import contract_at
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.audit.impact import Impact, Side, impact_sides, impact_wants
from reconciler.core.contract.driver_images import Wants
from reconciler.core.images import matrix
from reconciler.core.images.tags import ImageKey
from reconciler.render import document, impact

RENDER: dict[Output, Callable[[Impact, str, str], str]] = {
    Output.TEXT: impact.as_text,
    Output.MARKDOWN: impact.as_markdown,
}


def run(
    base: str, matrix_path: Path, source: NodeSource, output: Output, config_path: Path | None = None
) -> int:
    rows = valid_matrix(matrix_path).rows
    repo, repo_path = git.locate(matrix_path)
    text = git.read_at(repo, base, repo_path)
    # The base is history: take the rows it had, even if it also had problems.
    before = [] if text is None else [row.key for row in matrix.parse(text, schemas.load("matrix-row")).rows]
    found = source.wants()
    source.require(len(found.wants))
    after = [row.key for row in rows]
    result = impact_wants(before, after, found.wants, found.next_wants)
    if source.from_dir is not None:
        result = _whole_contract(base, (before, after), source, found, config_path) or result
    if output is Output.GITHUB:
        context = impact.Context(base, matrix_path, {row.key: row.line for row in rows})
        github.publish(
            impact.annotate(result, context), impact.summary(result, base, repo_path), impact.closing(result)
        )
    elif output.structured:
        data = impact.as_json(result, base, repo_path)
        print(document.text({**data, "desired": source.desired.as_json()}, output))
    else:
        print(RENDER[output](result, base, repo_path))
    return FINDINGS if result.failed else OK


def _whole_contract(
    base: str,
    rows: tuple[list[ImageKey], list[ImageKey]],
    source: NodeSource,
    found: Wants,
    config_path: Path | None,
) -> Impact | None:
    """Both sides with their own contract (`rows`: the base's and these); the matrix's impact alone,
    with this side's problems, when the folder did not exist at the base."""
    before, after = rows
    assert source.from_dir is not None
    flag = None if source.version_from_config else source.operator_version
    earlier = contract_at.desired_at(base, source.from_dir, config_path, flag)
    head = source.desired
    problems = [note.message for note in head.problems]
    if earlier is None:
        rows_only = impact_wants(before, after, found.wants, found.next_wants)
        return Impact(rows_only.added, rows_only.removed, rows_only.nodes, tuple(problems))
    nodes = [want.node for want in found.wants]
    was = desired.wants(earlier, nodes)
    sides = (
        Side(earlier.contract, was.wants, earlier.rule_from, was.next_wants),
        Side(head.contract, found.wants, head.rule_from, found.next_wants),
    )
    return impact_sides(before, after, *sides, problems)
