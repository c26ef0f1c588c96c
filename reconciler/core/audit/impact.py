"""What a change does to the fleet: rows added and removed, and each GPU node's image and audit status
before and after. The nodes are the same on both sides; the matrix changes, and so may the driver
contract (the driver resources, the Helm values, the chart version that picks the os-tag rule): then
a node's image may change too, and the change names why."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from reconciler.core.audit.audit import Status, check_next, check_want
from reconciler.core.contract import driver_images
from reconciler.core.contract.driver_images import Want, kernel_next
from reconciler.core.contract.operator import Contract
from reconciler.core.images.tags import (
    OS_ID,
    OS_VERSION_ID,
    ImageKey,
    Node,
    TagError,
    next_kernel,
    rebooted,
    tag,
)

OK = "OK"
NEXT_MISSING = str(Status.NEXT_MISSING)


@dataclass(frozen=True)
class NextImpact:
    """The image a node needs on the kernel it boots next, at the base and here: OK, NEXT-MISSING
    or INVALID (the next-kernel label gives no kernel: `kernel` None)."""

    kernel: str | None
    tag: str | None
    before: str
    after: str
    before_tag: str | None = None

    @property
    def broken(self) -> bool:
        """The change takes away the next kernel's image, or gives the node a new one the matrix lacks."""
        return self.after == NEXT_MISSING and (self.before == OK or self.before_tag != self.tag)


@dataclass(frozen=True)
class NodeImpact:
    node: str
    tag: str | None  # None when the labels give no tag; `reason` says why
    reason: str | None
    before: str  # the running kernel's image: OK, MISSING or INVALID
    after: str
    before_tag: str | None = None  # the image tag at the base (the same as `tag` unless it changed)
    cause: str | None = None  # why the tag changed, when it did
    next: NextImpact | None = None  # the next kernel's image, when the node boots another kernel next

    @property
    def retagged(self) -> bool:
        return self.before_tag != self.tag

    @property
    def shown_before(self) -> str:
        """The node's status at the base: the running kernel's, or when that is OK the next kernel's."""
        return self.before if self.before != OK or self.next is None else self.next.before

    @property
    def shown_after(self) -> str:
        return self.after if self.after != OK or self.next is None else self.next.after

    @property
    def changed(self) -> bool:
        return self.shown_before != self.shown_after or self.retagged

    @property
    def broken(self) -> bool:
        """The change leaves this node without the image it had (for the kernel it runs, or the one it
        boots next), or gives it a new one that is not in the matrix."""
        return (self.after != OK and (self.before == OK or self.retagged)) or self.next_broken

    @property
    def next_broken(self) -> bool:
        return self.next is not None and self.next.broken


@dataclass(frozen=True)
class Impact:
    added: tuple[ImageKey, ...]
    removed: tuple[ImageKey, ...]
    nodes: tuple[NodeImpact, ...]
    problems: tuple[str, ...] = ()  # what the API server would refuse of the change's driver resources

    @property
    def broken(self) -> tuple[NodeImpact, ...]:
        return tuple(node for node in self.nodes if node.broken)

    @property
    def failed(self) -> bool:
        return bool(self.broken or self.problems)

    @property
    def causes(self) -> tuple[str, ...]:
        """Each distinct reason an image tag changed, in node order."""
        return tuple(dict.fromkeys(node.cause for node in self.nodes if node.cause))


def impact(before: Sequence[ImageKey], after: Sequence[ImageKey], nodes: Iterable[Node]) -> Impact:
    """The lab's impact: each GPU node's image from its own labels."""
    gpu_nodes = sorted((node for node in nodes if node.gpu_present), key=lambda node: node.name)
    wants = [_lab_want(node) for node in gpu_nodes]
    later = [found for want in wants if want.tag is not None and (found := _lab_next(want.node))]
    return impact_wants(before, after, wants, later)


def impact_wants(
    before: Sequence[ImageKey],
    after: Sequence[ImageKey],
    wants: Iterable[Want],
    next_wants: Iterable[Want] = (),
) -> Impact:
    """Rows only after (added) and only before (removed), each in file order; GPU nodes in name order,
    each with the image the driver contract gives it, and the one it needs on its next kernel."""
    old, new = frozenset(before), frozenset(after)
    old_tags, new_tags = frozenset(key.tag for key in old), frozenset(key.tag for key in new)
    ordered = sorted(wants, key=lambda want: want.node.name)
    later = {want.node.name: want for want in next_wants}
    return Impact(
        tuple(key for key in after if key not in old),
        tuple(key for key in before if key not in new),
        tuple(_node(want, old_tags, new_tags, later.get(want.node.name)) for want in ordered),
    )


@dataclass(frozen=True)
class Side:
    """One side of the change: the contract in force, its GPU nodes' images, and what picked its
    os-tag rule (`chart v25.3.4`, `operatorVersion v26.3.3`, `the newest rule`)."""

    contract: Contract
    wants: tuple[Want, ...]
    rule_from: str
    next_wants: tuple[Want, ...] = ()


def impact_sides(
    before: Sequence[ImageKey],
    after: Sequence[ImageKey],
    base: Side,
    head: Side,
    problems: Sequence[str] = (),
) -> Impact:
    """Each node's image and status at the base (its matrix and contract) and here (this matrix and
    contract); a node whose tag changed says why."""
    old = {key.tag for key in before}
    new = {key.tag for key in after}
    earlier = {want.node.name: want for want in base.wants}
    earlier_next = {want.node.name: want for want in base.next_wants}
    later = {want.node.name: want for want in head.next_wants}
    nodes = []
    for want in sorted(head.wants, key=lambda item: item.node.name):
        name = want.node.name
        was = earlier.get(name, want)
        found = _node(want, frozenset(old), frozenset(new), later.get(name), earlier_next.get(name))
        if was.tag != want.tag:
            found = replace(
                found,
                before=_status(was, frozenset(old)),
                before_tag=was.tag,
                cause=_cause(want.node, was, want, base, head),
            )
        nodes.append(found)
    rows = impact_wants(before, after, ())
    return Impact(rows.added, rows.removed, tuple(nodes), tuple(problems))


def _cause(node: Node, was: Want, want: Want, base: Side, head: Side) -> str:
    """Why the node's tag changed: the os tag (the release's rule), the driver version, the image."""
    reasons = []
    old_os, new_os = _os_tag(node, base), _os_tag(node, head)
    if old_os and new_os and old_os != new_os:
        os_name = f"{node.labels.get(OS_ID, '?')} {node.labels.get(OS_VERSION_ID, '?')}"
        reasons.append(
            f"{_change(base.rule_from, head.rule_from)} changes the os tag of {os_name} nodes: "
            f"{old_os} {ARROW} {new_os}"
        )
    old, new = was.resource, want.resource
    old_version, new_version = (old.version if old else None), (new.version if new else None)
    if old_version != new_version:
        where = f" ({new.version_origin})" if new and new.version_origin else ""
        reasons.append(f"driver version {old_version or 'none'} {ARROW} {new_version or 'none'}{where}")
    if not reasons:
        reasons.append(f"the image {was.image or was.tag} {ARROW} {want.image or want.tag}")
    return "; ".join(reasons)


def _change(before: str, after: str) -> str:
    """`chart v25.3.4 → v26.7.0`; `operatorVersion v26.3.3 → chart v26.7.0` when the source changed."""
    old_what, _, old_version = before.rpartition(" ")
    new_what, _, new_version = after.rpartition(" ")
    if old_what == new_what and old_what:
        return f"{old_what} {old_version} {ARROW} {new_version}"
    return f"{before} {ARROW} {after}"


def _os_tag(node: Node, side: Side) -> str | None:
    try:
        return driver_images.own_os_tag(node, side.contract.rule)
    except TagError:
        return None


ARROW = "\u2192"


def _lab_next(node: Node) -> Want | None:
    try:
        kernel = next_kernel(node)
    except TagError as exc:
        return Want(node, reason=exc.reason)
    return _lab_want(rebooted(node, kernel)) if kernel else None


def _lab_want(node: Node) -> Want:
    try:
        return Want(node, tag=tag(node))
    except TagError as exc:
        return Want(node, reason=exc.reason)


def _node(
    want: Want,
    before: frozenset[str],
    after: frozenset[str],
    later: Want | None = None,
    was_later: Want | None = None,
) -> NodeImpact:
    """`later`: the node's want on its next kernel here; `was_later`: at the base (default: the same)."""
    status = _status(want, before), _status(want, after)
    upcoming = None
    if later is not None:
        was = was_later or later
        upcoming = NextImpact(
            kernel_next(later), later.tag, _next_status(was, before), _next_status(later, after), was.tag
        )
    return NodeImpact(want.node.name, want.tag, want.reason, *status, want.tag, next=upcoming)


def _next_status(want: Want, tags: frozenset[str]) -> str:
    finding = check_next(want, tags)
    return OK if finding is None else str(finding.status)


def _status(want: Want, tags: frozenset[str]) -> str:
    finding = check_want(want, tags)
    return OK if finding is None else str(finding.status)
