"""`gpudrv matrix fill`: every image the fleet lacks, copied from an upstream registry when it has it,
else listed as a build; the rows added for what is verified in the target registry.

The order keeps the matrix honest: the audit, then the target registry (HEAD of each missing tag),
then upstream (each remaining tag's digest), then the copies (adapters/registry/transfer.py verifies
each by digest in the target), and last one locked, atomic append of the rows of the images that are
in the target now. An interrupted fill leaves the matrix as it was; the rerun finds the finished
copies in the target (ADD) and resumes the others, sending only the blobs the target lacks.

Exit 0 everything filled, 1 an image still needs a build or a copy failed, 2 an error (a registry
that is down or refuses, before anything is written).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.adapters.ci import github
from reconciler.adapters.files import matrix_file, schemas
from reconciler.adapters.registry import oci, transfer
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.audit.audit import Status, audit_wants
from reconciler.core.audit.fill import Action, Done, Fill, lacking, needs, plan
from reconciler.core.contract.driver_images import Wants
from reconciler.core.images.registry import Repository
from reconciler.errors import GpudrvError
from reconciler.render import document, fill


def run(
    source: NodeSource,
    matrix_path: Path,
    upstream: Repository,
    target: Repository,
    output: Output,
    *,
    dry_run: bool = False,
    concurrency: int = oci.CONCURRENCY,
) -> int:
    if upstream == target:
        raise GpudrvError(f"--upstream and --registry are the same repository ({target}): nothing to copy")
    row_schema = schemas.load("matrix-row")
    result = audit_wants(_wants(source), valid_matrix(matrix_path).tags())
    wanted, unfillable = needs(result, row_schema)
    unknown = sum(1 for finding in result.findings if finding.status is Status.INVALID)
    # A dry run only reads the target; a fill asks for a token to push there from the start.
    to_target = (
        oci.connect(target, concurrency)
        if dry_run
        else transfer.connect_target(target, upstream, concurrency)
    )
    with to_target as to, oci.connect(upstream, concurrency) as up:
        in_target = to.exists_all([need.tag for need in wanted])
        digests = transfer.resolve_all(up, lacking(wanted, in_target))
        steps = plan(wanted, in_target, digests)
        planned = Fill(
            upstream, target, str(matrix_path), len(result.audited), tuple(steps), tuple(unfillable),
            dry_run=dry_run, unknown=unknown,
        )  # fmt: skip
        if not dry_run:
            planned = _carry_out(planned, up, to, matrix_path, concurrency)
    _print(planned, output, source.desired.as_json())
    return OK if planned.ok else FINDINGS


def _wants(source: NodeSource) -> Wants:
    found = source.wants()
    source.require(len(found.wants))
    return found


def _carry_out(planned: Fill, up: oci.Client, to: oci.Client, matrix_path: Path, concurrency: int) -> Fill:
    """The copies, then the rows of every image now verified in the target, in one locked append."""
    copies = planned.of(Action.COPY)
    outcomes = transfer.copy_all(up, to, [(step.need.tag, step.digest or "") for step in copies], concurrency)
    done: dict[str, Done] = {}
    for step, outcome in zip(copies, outcomes, strict=True):
        if isinstance(outcome, GpudrvError):
            done[step.need.tag] = Done(step, error=str(outcome))
            continue
        done[step.need.tag] = Done(step, sent=outcome.sent)
    for step in planned.of(Action.ADD):
        done[step.need.tag] = Done(step)
    verified = [item.step.need.key for item in done.values() if item.ok]
    rows = {row.key: row for row in matrix_file.append(matrix_path, verified)} if verified else {}
    finished = []
    for step in planned.steps:
        item = done.get(step.need.tag)
        if item is None:
            continue
        row = rows.get(step.need.key)
        finished.append(replace(item, line=row.line, added=row.added) if row else item)
    return replace(planned, done=tuple(finished))


def _build_matrix(result: Fill) -> dict[str, list[dict[str, str]]]:
    """What is left to build as a workflow's strategy.matrix, with NVIDIA's precompiled recipes."""
    from reconciler.adapters.files import precompiled  # the recipes' table, read only for this output
    from reconciler.core.images import build_plan

    keys = [step.need.key for step in result.builds]
    try:
        return build_plan.github_matrix(
            build_plan.build_entries(keys, str(result.target), precompiled.recipes())
        )
    except build_plan.BuildPlanError as exc:
        raise GpudrvError(f"the build plan: {exc}") from None


def _print(result: Fill, output: Output, desired: dict[str, Any]) -> None:
    if output is Output.GITHUB_MATRIX:  # stdout is the workflow's JSON; the lines for people go to stderr
        build_matrix = _build_matrix(result)
        print(fill.as_text(result), file=sys.stderr)
        print(document.json_text(build_matrix, indent=None))
    elif output is Output.GITHUB:
        github.publish(fill.notes(result), fill.summary(result), fill.closing(result))
    elif output.structured:
        print(document.text({**fill.as_json(result), "desired": desired}, output))
    else:
        print(fill.as_text(result))
