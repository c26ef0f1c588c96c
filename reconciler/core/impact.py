"""What a change to the support matrix does to the fleet: rows added and removed, and each GPU node's
audit status before and after. The nodes are the same on both sides; only the matrix changes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.audit import check_want
from reconciler.core.operator import Want
from reconciler.core.tags import ImageKey, Node, TagError, tag

OK = "OK"


@dataclass(frozen=True)
class NodeImpact:
    node: str
    tag: str | None  # None when the labels give no tag; `reason` says why
    reason: str | None
    before: str  # OK, MISSING or INVALID
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def broken(self) -> bool:
        """The change leaves this node without the image it had."""
        return self.before == OK and self.after != OK


@dataclass(frozen=True)
class Impact:
    added: tuple[ImageKey, ...]
    removed: tuple[ImageKey, ...]
    nodes: tuple[NodeImpact, ...]

    @property
    def broken(self) -> tuple[NodeImpact, ...]:
        return tuple(node for node in self.nodes if node.broken)


def impact(before: Sequence[ImageKey], after: Sequence[ImageKey], nodes: Iterable[Node]) -> Impact:
    """The lab's impact: each GPU node's image from its own labels."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    return impact_wants(before, after, [_lab_want(node) for node in gpu_nodes])


def impact_wants(before: Sequence[ImageKey], after: Sequence[ImageKey], wants: Iterable[Want]) -> Impact:
    """Rows only after (added) and only before (removed), each in file order; GPU nodes in name order,
    each with the image the driver contract gives it."""
    old, new = frozenset(before), frozenset(after)
    old_tags, new_tags = frozenset(key.tag for key in old), frozenset(key.tag for key in new)
    ordered = sorted(wants, key=lambda want: want.node.name)
    return Impact(
        tuple(key for key in after if key not in old),
        tuple(key for key in before if key not in new),
        tuple(_node(want, old_tags, new_tags) for want in ordered),
    )


def _lab_want(node: Node) -> Want:
    try:
        return Want(node, tag=tag(node))
    except TagError as exc:
        return Want(node, reason=exc.reason)


def _node(want: Want, before: frozenset[str], after: frozenset[str]) -> NodeImpact:
    return NodeImpact(want.node.name, want.tag, want.reason, _status(want, before), _status(want, after))


def _status(want: Want, tags: frozenset[str]) -> str:
    finding = check_want(want, tags)
    return OK if finding is None else str(finding.status)
