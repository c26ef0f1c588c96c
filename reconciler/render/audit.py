"""`gpudrv audit` output: a line per finding, JSON, or GitHub annotations and a step summary.

On a GPU Operator fleet a missing image is the driver resource's fault (its version), so GitHub gets
one annotation per missing image at that resource's version line, naming the nodes that lack it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconciler.core.audit.audit import AuditResult, Finding, Status
from reconciler.core.base import github_text
from reconciler.core.contract.driver_images import FleetNote
from reconciler.core.contract.operator import DriverResource, Mode
from reconciler.render import document, words

SHOWN_NODES = 10  # past this many, an annotation counts the nodes instead of naming them all


def as_text(result: AuditResult, against: str | None = None) -> str:
    """A line per finding and note; else OK, saying what was checked: `OK: 3 GPU nodes, 5 images in
    PATH` (`against`: the images' count and place). In lab mode, with nodes, the lab's one-word `OK`:
    the lab's drv-audit step is graded on that exact line (docs/lab.md, step 3). Never OK when no GPU
    node was checked (--allow-empty): `NOTHING CHECKED: 0 GPU nodes, ...`."""
    lines = [finding.line() for finding in result.findings]
    lines += [f"fleet: {note.message}" for note in result.notes]
    if lines:
        return "\n".join(lines)
    if not result.audited:
        return NOTHING_CHECKED + (f", {flat(against)}" if against else "")
    if against is None or (result.mode is Mode.LAB and result.audited):
        return "OK"
    return f"OK: {words.count(len(result.audited), 'GPU node')}, {flat(against)}"


NOTHING_CHECKED = "NOTHING CHECKED: 0 GPU nodes"


def flat(text: str) -> str:
    """One line, whatever a file name or repository carries."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def images_in(count: int, where: str) -> str:
    return f"{words.count(count, 'image')} in {where}"


def as_json(result: AuditResult, **source: str) -> dict[str, Any]:
    """The audit as render/document.py's contract; `source` names what was looked in: matrix= or registry=."""
    return document.document(
        "audit",
        result.ok,
        mode=str(result.mode),
        **source,
        node_count=len(result.audited),
        missing_count=count(result, Status.MISSING),
        next_missing_count=count(result, Status.NEXT_MISSING),
        nodes=nodes(result),
        findings=findings_json(result),
        notes=[note_json(note) for note in result.notes],
    )


def count(result: AuditResult, status: Status) -> int:
    return sum(finding.status is status for finding in result.findings)


def nodes(result: AuditResult) -> list[dict[str, Any]]:
    """Every audited node: OK, MISSING, INVALID or NEXT-MISSING (its first finding: the running
    kernel's comes first), the tag it needs (None when INVALID), and the kernel it boots next (None
    when it is the running one, or unknown)."""
    status: dict[str, str] = {}
    for finding in result.findings:
        status.setdefault(finding.node, str(finding.status))
    tags, upcoming = result.tags, result.next_kernels
    return [
        {
            "node": name,
            "status": status.get(name, "OK"),
            "tag": tags.get(name),
            "next_kernel": upcoming.get(name),
        }
        for name in result.audited
    ]


def findings_json(result: AuditResult) -> list[dict[str, Any]]:
    return [_finding(finding) for finding in result.findings]


def _finding(finding: Finding) -> dict[str, Any]:
    missing = finding.lacks_image
    return {
        "node": finding.node,
        "status": str(finding.status),
        "tag": finding.detail if missing else None,
        "image": finding.image,
        "reason": None if missing else finding.detail,
        "next_kernel": finding.kernel if finding.status is Status.NEXT_MISSING else None,
        "origin": finding.origin,
        "resource": _resource(finding.resource),
    }


def _resource(item: DriverResource | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {"kind": str(item.kind), "name": item.name, "version": item.version, "origin": item.version_origin}


def note_json(note: FleetNote) -> dict[str, Any]:
    return {"message": note.message, "resource": _resource(note.resource), "node_names": list(note.nodes)}


# --- GitHub: an error where the fix goes, a table in the step summary ------------------------------


def annotate(result: AuditResult, matrix_path: Path) -> list[github_text.Annotation]:
    if result.mode is Mode.LAB:
        return [
            github_text.at("error", _message(f, matrix_path), f.origin, _title(f)) for f in result.findings
        ]
    missing = [f for f in result.findings if f.lacks_image]
    notes = [_missing_image(group, matrix_path) for group in _by_image(missing)]
    invalid = [f for f in result.findings if f.status is Status.INVALID]
    notes += [github_text.at("error", _message(f, matrix_path), f.origin, _title(f)) for f in invalid]
    title = "GPU Operator fleet problem"
    return notes + [github_text.at("error", note.message, note.origin, title) for note in result.notes]


def _by_image(findings: Sequence[Finding]) -> list[list[Finding]]:
    """The findings for each missing image, MISSING and NEXT-MISSING apart, in the findings' order."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for finding in findings:
        ref = finding.resource.ref if finding.resource else ""
        key = (str(finding.status), ref, finding.image or finding.detail)
        groups.setdefault(key, []).append(finding)
    return list(groups.values())


def _missing_image(group: Sequence[Finding], matrix_path: Path) -> github_text.Annotation:
    first, names = group[0], [f.node for f in group]
    resource = first.resource
    shown = ", ".join(names[:SHOWN_NODES])
    shown += f" and {len(names) - SHOWN_NODES} more" if len(names) > SHOWN_NODES else ""
    who = f"{resource.ref} (version {resource.version})" if resource else "The driver resource"
    kernel = f" for kernel {first.kernel}" if first.kernel else ""
    if first.status is Status.NEXT_MISSING:
        stuck = (
            f"{words.count(len(names), 'node')} ({shown}) {words.verb(len(names), 'boots', 'boot')} "
            f"kernel {first.kernel} at {words.verb(len(names), 'its', 'their')} next reboot and would "
            "then be stuck in ImagePullBackOff"
        )
        title = f"driver image {first.detail} for the next kernel is not in the support matrix"
    else:
        stuck = f"{words.count(len(names), 'node')} ({shown}) would be stuck in ImagePullBackOff"
        title = f"driver image {first.detail} is not in the support matrix"
    message = (
        f"{who} needs {first.image or first.detail}{kernel}, which is not in {matrix_path}: {stuck}. "
        f"Build the image, then add the row with gpudrv matrix add --tag {first.detail}"
    )
    origin = resource.version_origin if resource else first.origin
    return github_text.at("error", message, origin, title)


def _title(finding: Finding) -> str:
    if finding.status is Status.MISSING:
        return f"{finding.node}: driver image not in the support matrix"
    if finding.status is Status.NEXT_MISSING:
        return f"{finding.node}: driver image for its next kernel not in the support matrix"
    return f"{finding.node}: no driver image tag"


def _message(finding: Finding, matrix_path: Path) -> str:
    if finding.status is Status.INVALID:
        return f"node {finding.node}: {finding.detail}"
    if finding.status is Status.NEXT_MISSING:
        return (
            f"node {finding.node} boots kernel {finding.kernel} at its next reboot and then needs the "
            f"driver image {finding.image or finding.detail}, which is not in {matrix_path}: its driver "
            f"pod would be stuck in ImagePullBackOff. Build the image before the reboot, then add the row "
            f"with gpudrv matrix add --tag {finding.detail}"
        )
    return (
        f"node {finding.node} needs the driver image {finding.image or finding.detail}, which is not in "
        f"{matrix_path}: its driver pod would be stuck in ImagePullBackOff. Build the image, then add the "
        f"row with gpudrv matrix add --tag {finding.detail}"
    )


def summary(result: AuditResult, matrix_path: Path, cluster: str | None = None) -> github_text.Summary:
    """The step summary's section; `cluster`: one of many clusters' (its name in the heading)."""
    matrix_file = github_text.code(str(matrix_path))
    audited = words.count(len(result.audited), "GPU node")
    command = f"gpudrv audit (cluster {cluster})" if cluster else "gpudrv audit"
    if result.ok:
        return github_text.Summary(
            f"{command}: OK", f"{audited}, each with its driver image in {matrix_file}."
        )
    heading = f"{command}: {headline(result)}"
    lead = f"Not in {matrix_file}, or no tag to look for: a driver pod there is stuck in ImagePullBackOff."
    lead += NEXT_LEAD if count(result, Status.NEXT_MISSING) else ""
    lead += "".join(f"\n\n**Fleet:** {github_text.text(note.message)}" for note in result.notes)
    if result.mode is Mode.LAB:
        columns = ("Node", "Status", "Image tag or reason", "Manifest")
        rows = [
            (
                github_text.code(f.node),
                f"**{f.status}**",
                github_text.code(f.detail),
                github_text.code(f.origin or "live"),
            )
            for f in result.findings
        ]
    else:
        columns = ("Node", "Status", "Image or reason", "Driver resource")
        rows = [
            (github_text.code(f.node), f"**{f.status}**", github_text.code(f.image or f.detail),
             github_text.code(f.resource.ref if f.resource else "none"))
            for f in result.findings
        ]  # fmt: skip
    return github_text.Summary(heading, lead, (github_text.Table(columns, rows),))


NEXT_LEAD = " NEXT-MISSING: the image for the kernel the node boots next; it is stuck after its next reboot."


def headline(result: AuditResult) -> str:
    """`2 of 5 GPU nodes without a driver image, 1 without the image of its next kernel, 1 fleet
    problem`: a node with both findings counts in both."""
    audited = words.count(len(result.audited), "GPU node")
    now = len({f.node for f in result.findings if f.status is not Status.NEXT_MISSING})
    later = count(result, Status.NEXT_MISSING)
    parts = [f"{now} of {audited} without a driver image"] if now or not later else [audited]
    parts += [f"{later} without the image of {'its' if later == 1 else 'their'} next kernel"] if later else []
    parts += [words.count(len(result.notes), "fleet problem")] if result.notes else []
    return ", ".join(parts)


def closing(result: AuditResult) -> str:
    audited = words.count(len(result.audited), "GPU node")
    missing, later = count(result, Status.MISSING), count(result, Status.NEXT_MISSING)
    closing = f"gpudrv audit: {audited}, {missing} MISSING, {count(result, Status.INVALID)} INVALID"
    closing += f", {later} NEXT-MISSING" if later else ""
    return closing + (f", {words.count(len(result.notes), 'fleet problem')}" if result.notes else "")
