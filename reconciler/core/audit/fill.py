"""`gpudrv matrix fill`: from the images the fleet lacks to what fills each one.

The audit says which images the GPU nodes need and the matrix lacks (MISSING on the running kernel,
NEXT-MISSING on the kernel each node boots next). For each distinct image:

- ADD: the target registry (the one `matrix verify` checks) already has it; only the row is missing;
- COPY: the upstream registry has it (at the digest planned here); copy it, verify it, add the row;
- BUILD: neither has it; it needs a build (core/images/build_plan.py gives the recipe).

Pure: the registries' answers come in as mappings, the copies' outcomes as `Done` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.core.audit.audit import AuditResult, Finding, Status
from reconciler.core.images import matrix
from reconciler.core.images.oci_image import Transfer
from reconciler.core.images.registry import Repository
from reconciler.core.images.tags import ImageKey


class Action(StrEnum):
    ADD = "ADD"
    COPY = "COPY"
    BUILD = "BUILD"


@dataclass(frozen=True)
class Need:
    """One image some GPU nodes lack: which nodes, and whether only at their next reboot."""

    key: ImageKey
    nodes: tuple[str, ...]
    next_only: bool  # every node needs it only on the kernel it boots next
    kernels: tuple[str, ...] = ()  # the next kernels, for next_only
    pulled_from: tuple[str, ...] = ()  # the repositories the nodes pull it from (GPU Operator fleets)

    @property
    def tag(self) -> str:
        return self.key.tag


@dataclass(frozen=True)
class Unfillable:
    """A tag the fleet needs that is no matrix row (the schema refuses it): nothing can fill it."""

    tag: str
    nodes: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Step:
    need: Need
    action: Action
    digest: str | None = None  # COPY: upstream's manifest digest when planned; the copy must match it


@dataclass(frozen=True)
class Done:
    """A step that was carried out (ADD or COPY): its row, or why it failed."""

    step: Step
    line: int | None = None  # the row's line in the matrix (added now, or already there)
    added: bool = False
    error: str | None = None  # the copy failed (nothing added)
    sent: Transfer | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Fill:
    upstream: Repository
    target: Repository
    matrix: str  # the matrix file, as given
    audited: int  # GPU nodes audited
    steps: tuple[Step, ...]
    unfillable: tuple[Unfillable, ...] = ()
    done: tuple[Done, ...] = ()  # empty on a dry run
    dry_run: bool = False
    unknown: int = 0  # GPU nodes without a tag to fill (INVALID findings: the audit says why)

    def of(self, action: Action) -> list[Step]:
        return [step for step in self.steps if step.action is action]

    @property
    def builds(self) -> list[Step]:
        return self.of(Action.BUILD)

    @property
    def failed(self) -> list[Done]:
        return [item for item in self.done if not item.ok]

    @property
    def filled(self) -> list[Done]:
        return [item for item in self.done if item.ok]

    @property
    def ok(self) -> bool:
        """Exit 0: every image the fleet lacks is filled (a dry run: would be, without a build)."""
        return not self.builds and not self.unfillable and not self.failed

    def elsewhere(self) -> list[str]:
        """Repositories the nodes pull from that are not the target: filling the target does not help
        them until the driver resource names it."""
        pulled = {repository for step in self.steps for repository in step.need.pulled_from}
        return sorted(pulled - {str(self.target)})

    def sent(self) -> Transfer:
        sent = [item.sent for item in self.done if item.sent is not None]
        return Transfer(
            *(sum(getattr(item, name) for item in sent) for name in Transfer.__dataclass_fields__)
        )


def needs(
    result: AuditResult, row_schema: Mapping[str, Any] | None = None
) -> tuple[list[Need], list[Unfillable]]:
    """The distinct images the audit found missing, in tag order, each with the nodes that lack it."""
    groups: dict[str, list[Finding]] = {}
    for finding in result.findings:
        if finding.lacks_image:
            groups.setdefault(finding.detail, []).append(finding)
    found: list[Need] = []
    refused: list[Unfillable] = []
    for tag in sorted(groups):
        group = groups[tag]
        nodes = tuple(sorted({finding.node for finding in group}))
        key, reason = _key(tag, row_schema)
        if key is None:
            refused.append(Unfillable(tag, nodes, reason))
            continue
        later = all(finding.status is Status.NEXT_MISSING for finding in group)
        kernels = tuple(sorted({f.kernel for f in group if f.kernel})) if later else ()
        pulled = tuple(sorted({f.image.rsplit(":", 1)[0] for f in group if f.image and ":" in f.image}))
        found.append(Need(key, nodes, later, kernels, pulled))
    return found, refused


def _key(tag: str, row_schema: Mapping[str, Any] | None) -> tuple[ImageKey | None, str]:
    try:
        key = matrix.key_from_tag(tag)
    except ValueError as exc:
        return None, str(exc)
    problems = matrix.row_problems(key, row_schema) if row_schema is not None else []
    if problems or key.tag != tag:
        return None, "; ".join(problems) or f"{tag} does not split into a matrix row"
    return key, ""


def plan(
    wanted: Iterable[Need], in_target: Mapping[str, bool], upstream: Mapping[str, str | None]
) -> list[Step]:
    """ADD what the target has; COPY what upstream has (at its digest); BUILD the rest. `upstream`
    answers for every tag the target lacks."""
    steps = []
    for need in wanted:
        if in_target.get(need.tag):
            steps.append(Step(need, Action.ADD))
        elif (digest := upstream.get(need.tag)) is not None:
            steps.append(Step(need, Action.COPY, digest))
        else:
            steps.append(Step(need, Action.BUILD))
    return steps


def lacking(wanted: Sequence[Need], in_target: Mapping[str, bool]) -> list[str]:
    """The tags to ask upstream about: those the target registry does not have."""
    return [need.tag for need in wanted if not in_target.get(need.tag)]
