"""Output of `gpudrv matrix verify` and of `gpudrv audit --registry`: text, JSON, GitHub.

Tags listed by the registry are untrusted text like matrix cells: in GitHub output they go through
github_text.annotation (escaped) and github_text.code (a code span); the closing line carries counts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.core.audit.audit import AuditResult, Finding, Status
from reconciler.core.base import github_text
from reconciler.core.contract.operator import Mode
from reconciler.core.images.matrix import Appended
from reconciler.core.images.registry import Repository, Verification
from reconciler.render import audit, document, words

SHOWN_NODES = audit.SHOWN_NODES

# --- matrix verify ---------------------------------------------------------------------------------


def verify_text(result: Verification, path: Path, added: Sequence[Appended] = ()) -> str:
    repository = result.repository
    lines = [f"{path}:{row.line}: MISSING {repository.reference(row.key.tag)}" for row in result.missing]
    written = {item.key for item in added if item.added}
    for extra in result.extra or ():
        what = "added to the matrix" if extra.key in written else "not in the matrix"
        lines.append(f"note: {repository.reference(extra.tag)} is in the registry, {what}")
    lines += [f"added {item.key.as_csv()} at {path}:{item.line}" for item in added if item.added]
    lines.append(verdict(result))
    return "\n".join(lines)


def verdict(result: Verification) -> str:
    """The closing line: counts and the repository (checked by parse_repository), nothing else."""
    text = f"{result.repository}: {result.checked} rows, {result.present} with an image, "
    text += f"{len(result.missing)} MISSING"
    if result.extra is not None:
        text += f"; in the registry, not in the matrix: {words.count(len(result.extra), 'driver image tag')}"
        text += f" and {words.count(result.other_tags, 'other tag')}" if result.other_tags else ""
    return text


def verify_json(result: Verification, path: Path, added: Sequence[Appended] = ()) -> dict[str, Any]:
    repository = result.repository
    return document.document(
        "matrix-verify",
        result.ok,
        registry=str(repository),
        matrix=str(path),
        row_count=result.checked,
        present_count=result.present,
        findings=[
            {
                "status": "MISSING",
                "tag": row.key.tag,
                "image": repository.reference(row.key.tag),
                "origin": f"{path}:{row.line}",
                "line": row.line,
            }
            for row in result.missing
        ],
        extra=None
        if result.extra is None
        else [{"tag": extra.tag, "image": repository.reference(extra.tag)} for extra in result.extra],
        other_tag_count=result.other_tags if result.extra is not None else None,
        added=[{"tag": item.key.tag, "line": item.line} for item in added if item.added],
    )


def verify_annotations(
    result: Verification, path: Path, added: Sequence[Appended] = ()
) -> list[github_text.Annotation]:
    file = str(path)
    repository = result.repository
    notes = [
        github_text.Annotation(
            "error",
            f"{repository.reference(row.key.tag)} is not in the registry: a node that needs it would be "
            f"stuck in ImagePullBackOff. Push the image, or remove the row",
            file,
            row.line,
            "driver image missing from the registry",
        )
        for row in result.missing
    ]
    lines = {item.key: item.line for item in added if item.added}
    for extra in result.extra or ():
        line = lines.get(extra.key) if extra.key else None
        message = (
            f"{repository.reference(extra.tag)} is in the registry and now in the matrix"
            if line
            else f"{repository.reference(extra.tag)} is in the registry, not in the matrix: "
            f"gpudrv matrix add --tag {extra.tag}"
        )
        notes.append(github_text.Annotation("notice", message, file, line, "registry tag not in the matrix"))
    return notes


def verify_summary(result: Verification, path: Path) -> github_text.Summary:
    where, repository = github_text.code(str(path)), github_text.code(str(result.repository))
    tables = []
    if result.missing:
        rows = [
            (github_text.code(f"{path}:{row.line}"), github_text.code(row.key.tag)) for row in result.missing
        ]
        tables.append(github_text.Table(("Row", "Missing image tag"), rows))
    if result.extra:
        extra = [(github_text.code(item.tag),) for item in result.extra]
        tables.append(github_text.Table(("Tag in the registry, not in the matrix",), extra))
    lead = f"{result.checked} rows of {where} checked against {repository}: {result.present} with an image"
    if result.missing:
        lead += f", {len(result.missing)} without (a node that needs one is stuck in ImagePullBackOff)"
    lead += "."
    heading = "gpudrv matrix verify: " + (f"{len(result.missing)} MISSING" if result.missing else "OK")
    return github_text.Summary(heading, lead, tuple(tables))


# --- audit --registry --------------------------------------------------------------------------------


def with_references(result: AuditResult, repository: Repository) -> AuditResult:
    """Each MISSING and NEXT-MISSING finding names the reference that was looked up in the registry."""
    findings = tuple(
        replace(f, image=repository.reference(f.detail)) if f.lacks_image else f for f in result.findings
    )
    return replace(result, findings=findings)


def audit_json(result: AuditResult, repository: Repository) -> dict[str, Any]:
    return audit.as_json(result, registry=str(repository))


def audit_annotations(result: AuditResult, repository: Repository) -> list[github_text.Annotation]:
    missing = [f for f in result.findings if f.lacks_image]
    notes = [_missing(group, repository, result.mode) for group in _by_tag(missing)]
    notes += [
        github_text.at("error", f"node {f.node}: {f.detail}", f.origin, f"{f.node}: no driver image tag")
        for f in result.findings
        if f.status is Status.INVALID
    ]
    title = "GPU Operator: one os tag for every OS"
    notes += [github_text.at("error", note.message, note.origin, title) for note in result.notes]
    return notes


def _by_tag(findings: Sequence[Finding]) -> list[list[Finding]]:
    groups: dict[tuple[Status, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.status, finding.detail), []).append(finding)
    return list(groups.values())


def _missing(group: Sequence[Finding], repository: Repository, mode: Mode) -> github_text.Annotation:
    first, names = group[0], [f.node for f in group]
    shown = ", ".join(names[:SHOWN_NODES])
    shown += f" and {len(names) - SHOWN_NODES} more" if len(names) > SHOWN_NODES else ""
    who = f"{words.count(len(names), 'node')} ({shown})"
    if first.status is Status.NEXT_MISSING:
        who += (
            f" {words.verb(len(names), 'boots', 'boot')} kernel {first.kernel} at "
            f"{words.verb(len(names), 'its', 'their')} next reboot and then"
        )
    message = (
        f"{repository.reference(first.detail)} is not in the registry: "
        f"{who} would be stuck in ImagePullBackOff. Build and push it"
    )
    resource = first.resource
    origin = resource.version_origin if resource and mode is not Mode.LAB else first.origin
    title = f"driver image {first.detail} is not in the registry"
    title += " (needed at the next reboot)" if first.status is Status.NEXT_MISSING else ""
    return github_text.at("error", message, origin, title)


def audit_summary(result: AuditResult, repository: Repository) -> github_text.Summary:
    where = github_text.code(str(repository))
    audited = words.count(len(result.audited), "GPU node")
    if result.ok:
        return github_text.Summary("gpudrv audit: OK", f"{audited}, each with its driver image in {where}.")
    heading = f"gpudrv audit: {audit.headline(result)}"
    lead = f"Not in {where}, or no tag to look for: a driver pod there is stuck in ImagePullBackOff."
    lead += audit.NEXT_LEAD if audit.count(result, Status.NEXT_MISSING) else ""
    lead += "".join(f"\n\n**Fleet:** {github_text.text(note.message)}" for note in result.notes)
    rows = [
        (
            github_text.code(f.node),
            f"**{f.status}**",
            github_text.code(f.image or f.detail),
            github_text.code(f.origin or "-"),
        )
        for f in result.findings
    ]
    table = github_text.Table(("Node", "Status", "Image or reason", "Where"), rows)
    return github_text.Summary(heading, lead, (table,))


def audit_closing(result: AuditResult) -> str:
    return audit.closing(result) + " (registry)"


def audit_text(result: AuditResult, present: int, repository: Repository) -> str:
    """`audit --registry` as text: the audit's, against the `present` tags found in the registry."""
    return audit.as_text(result, audit.images_in(present, str(repository)))
