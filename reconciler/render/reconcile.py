"""`gpudrv reconcile`'s words: log lines, Node event messages, and the access check."""

from __future__ import annotations

from typing import Any

from reconciler.core.audit.audit import Finding
from reconciler.core.incluster.access import Answer, Report
from reconciler.core.incluster.fleetwatch import Change, Kind
from reconciler.core.incluster.reconcile_ports import AVAILABLE, MISSING, Event
from reconciler.render import document

PULL_BACKOFF = "its driver pod would be stuck in ImagePullBackOff"


def change_line(change: Change) -> str:
    finding = change.finding
    if change.kind is Kind.MISSING and finding is not None:
        was = f" (was {change.before.detail})" if change.before is not None else ""
        return (
            f"node {change.node}: driver image {finding.image or finding.detail} MISSING from the matrix{was}"
        )
    if change.kind is Kind.INVALID and finding is not None:
        return f"node {change.node}: no driver image tag: {finding.detail}"
    if change.kind is Kind.CLEARED:
        return f"node {change.node}: driver image {change.tag or '?'} is in the matrix"
    return f"node {change.node}: no longer a GPU node"


def missing_message(finding: Finding, where: str) -> str:
    image = f" ({finding.image})" if finding.image else ""
    return (
        f"driver image {finding.detail}{image} is not in the support matrix ({where}): {PULL_BACKOFF}. "
        f"Build the image, then add it with gpudrv matrix add --tag {finding.detail}"
    )


def invalid_message(finding: Finding) -> str:
    return f"no driver image tag for this node: {finding.detail}"


def available_message(tag: str, where: str) -> str:
    return f"driver image {tag} is in the support matrix ({where})"


def event_message(event: Event) -> str:
    """A Node event's message, by its reason."""
    if event.reason == AVAILABLE or event.finding is None:
        return available_message(event.key, event.where)
    if event.reason == MISSING:
        return missing_message(event.finding, event.where)
    return invalid_message(event.finding)


# --- gpudrv reconcile --check-access ---------------------------------------------------------------


def access_text(report: Report) -> str:
    lines = [f"as {report.user or 'an unknown user'}:"]
    width = max((len(a.access.text()) for a in [*report.needed, *report.excessive]), default=0)
    for answer in report.needed:
        verdict = "allowed" if answer.allowed else "DENIED"
        lines.append(f"  needed   {verdict:<8} {answer.access.text():<{width}}  {answer.access.why}")
    for answer in report.excessive:
        verdict = "GRANTED" if answer.allowed else "denied"
        lines.append(f"  unneeded {verdict:<8} {answer.access.text():<{width}}  {answer.access.why}")
    missing, excess = len(report.missing), len(report.excess)
    if not missing and not excess:
        lines.append("every operation gpudrv needs is allowed, and nothing it does not need")
    else:
        parts = [f"{missing} needed operation(s) denied"] if missing else []
        parts += [f"{excess} unneeded operation(s) granted"] if excess else []
        lines.append("; ".join(parts))
    return "\n".join(lines)


def access_json(report: Report) -> dict[str, Any]:
    def item(answer: Answer) -> dict[str, object]:
        return {
            "operation": answer.access.text(),
            "attributes": answer.access.attributes(),
            "allowed": answer.allowed,
            "reason": answer.reason,
            "why": answer.access.why,
        }

    return document.document(
        "reconcile-check-access",
        not report.missing and not report.excess,
        user=report.user,
        needed=[item(answer) for answer in report.needed],
        unneeded=[item(answer) for answer in report.excessive],
    )
