"""What a change to the support matrix does to the fleet: rows added and removed, and each GPU node's
audit status before and after. The nodes are the same on both sides; only the matrix changes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.audit import check
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
    """Rows only after (added) and only before (removed), each in file order; GPU nodes in name order."""
    old, new = frozenset(before), frozenset(after)
    old_tags, new_tags = frozenset(key.tag for key in old), frozenset(key.tag for key in new)
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    return Impact(
        tuple(key for key in after if key not in old),
        tuple(key for key in before if key not in new),
        tuple(_node(node, old_tags, new_tags) for node in gpu_nodes),
    )


def _node(node: Node, before: frozenset[str], after: frozenset[str]) -> NodeImpact:
    try:
        wanted: str | None = tag(node)
        reason = None
    except TagError as exc:
        wanted, reason = None, exc.reason
    return NodeImpact(node.name, wanted, reason, _status(node, before), _status(node, after))


def _status(node: Node, tags: frozenset[str]) -> str:
    finding = check(node, tags)
    return OK if finding is None else str(finding.status)
