"""Output of `gpudrv matrix fill`: a line per image (COPY, ADD, BUILD; copied, added, FAILED), JSON,
or GitHub annotations and a step summary.

Tags are checked matrix rows and repositories are parsed ones; node names and registry messages are
outside text: flat (one line) in text, escaped in GitHub output (github_text), plain strings in JSON.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.audit.fill import Action, Done, Fill, Need, Step, Unfillable
from reconciler.core.base import github_text
from reconciler.core.images.oci_image import Transfer
from reconciler.render import document, words
from reconciler.render.audit import SHOWN_NODES, flat

SHOWN = 3  # nodes named on a text line before "and N more"
PAST = {Action.COPY: "COPIED", Action.ADD: "ADDED", Action.BUILD: "BUILD"}


def nodes_text(need: Need | Unfillable, limit: int = SHOWN) -> str:
    names = list(need.nodes)
    shown = ", ".join(flat(name) for name in names[:limit])
    shown += f" and {len(names) - limit} more" if len(names) > limit else ""
    text = f"{words.count(len(names), 'node')} ({shown})"
    if isinstance(need, Need) and need.next_only:
        text += (
            f", at {words.verb(len(names), 'its', 'their')} next reboot (kernel {', '.join(need.kernels)})"
        )
    return text


def short(digest: str | None) -> str:
    return (digest or "")[:19]  # sha256: and 12 hex digits, as crane and docker shorten


def size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return words.count(count, "byte")


def sent_text(sent: Transfer) -> str:
    parts = [f"{words.count(sent.blobs_sent, 'blob')} sent ({size(sent.bytes_sent)})"]
    parts += [f"{sent.blobs_mounted} mounted"] if sent.blobs_mounted else []
    parts += [f"{sent.blobs_present} already there"] if sent.blobs_present else []
    return ", ".join(parts)


def plan_line(step: Step, result: Fill) -> str:
    need = step.need
    if step.action is Action.COPY:
        return (
            f"COPY {need.tag} from {result.upstream} ({short(step.digest)}) to {result.target}, "
            f"for {nodes_text(need)}"
        )
    if step.action is Action.ADD:
        return f"ADD {need.tag}: {result.target} has it, the matrix lacks the row; for {nodes_text(need)}"
    return f"BUILD {need.tag}: not in {result.upstream} nor {result.target}; for {nodes_text(need)}"


def done_line(item: Done, result: Fill) -> str:
    need = item.step.need
    if item.error is not None:
        return f"FAILED {need.tag}: {flat(item.error)}"
    where = f"{flat(result.matrix)}:{item.line}"
    row = f"added the row at {where}" if item.added else f"the row is at {where}"
    if item.step.action is Action.COPY:
        sent = f"; {sent_text(item.sent)}" if item.sent else ""
        return f"copied {need.tag} to {result.target} ({short(item.step.digest)}{sent}); {row}"
    return f"{result.target} has {need.tag}; {row}"


def as_text(result: Fill) -> str:
    if result.dry_run:
        lines = [plan_line(step, result) for step in result.steps]
    else:
        lines = [done_line(item, result) for item in result.done]
        lines += [plan_line(step, result) for step in result.builds]
    lines += [
        f"REFUSED {flat(item.tag)}: {flat(item.reason)}; for {nodes_text(item)}" for item in result.unfillable
    ]
    lines += [
        f"note: nodes pull from {flat(repository)}, not {result.target}: the driver resource must name "
        f"{result.target} for the filled images to reach them"
        for repository in result.elsewhere()
    ]
    if result.unknown:
        lines.append(
            f"note: {words.count(result.unknown, 'GPU node')} without an image tag to fill "
            "(gpudrv audit says why)"
        )
    lines.append(closing(result))
    return "\n".join(lines)


def closing(result: Fill) -> str:
    """Counts only (it closes the GitHub output too: no outside text)."""
    copies, adds, builds = (len(result.of(action)) for action in (Action.COPY, Action.ADD, Action.BUILD))
    total = len(result.steps) + len(result.unfillable)
    if not total:
        audited = words.count(result.audited, "GPU node")
        return f"nothing to fill: {audited}, each with its image in the matrix"
    if result.dry_run:
        text = f"dry run: {copies} to copy, {words.count(adds, 'row')} to add, {builds} to build"
        return (
            text + (f", {len(result.unfillable)} refused" if result.unfillable else "") + "; nothing written"
        )
    filled = len(result.filled)
    text = f"filled {filled} of {words.count(total, 'image')}"
    rest = [f"{len(result.failed)} failed"] if result.failed else []
    rest += [f"{builds} to build"] if builds else []
    rest += [f"{len(result.unfillable)} refused"] if result.unfillable else []
    text += f"; {', '.join(rest)}" if rest else ""
    if result.done:
        text += f"; {size(result.sent().bytes_sent)} sent"
    return text + (" (gpudrv matrix fill -o github-matrix: the build plan)" if builds else "")


# --- JSON ----------------------------------------------------------------------------------------


def as_json(result: Fill) -> dict[str, Any]:
    done = {item.step.need.tag: item for item in result.done}
    sent = result.sent()
    findings = [_finding(step, done.get(step.need.tag), result) for step in result.steps if _open(step, done)]
    findings += [
        {"status": "REFUSED", "tag": item.tag, "reason": item.reason, "nodes": list(item.nodes)}
        for item in result.unfillable
    ]
    return document.document(
        "matrix-fill",
        result.ok,
        upstream=str(result.upstream),
        registry=str(result.target),
        matrix=result.matrix,
        dry_run=result.dry_run,
        node_count=result.audited,
        images=[_image(step, done.get(step.need.tag), result) for step in result.steps],
        findings=findings,
        bytes_sent=sent.bytes_sent,
        blobs_sent=sent.blobs_sent,
    )


def _open(step: Step, done: dict[str, Done]) -> bool:
    item = done.get(step.need.tag)
    return step.action is Action.BUILD or (item is not None and not item.ok)


def _finding(step: Step, item: Done | None, result: Fill) -> dict[str, Any]:
    status = "FAILED" if item is not None and not item.ok else "BUILD"
    found = {"status": status, "tag": step.need.tag, "image": result.target.reference(step.need.tag)}
    return found | ({"reason": item.error} if item is not None and item.error else {})


def _image(step: Step, item: Done | None, result: Fill) -> dict[str, Any]:
    need = step.need
    value: dict[str, Any] = {
        "action": str(step.action),
        "tag": need.tag,
        "image": result.target.reference(need.tag),
        "driver_branch": need.key.driver_branch,
        "kernel": need.key.kernel,
        "os_tag": need.key.os_tag,
        "digest": step.digest,
        "nodes": list(need.nodes),
        "next_reboot_only": need.next_only,
    }
    if item is not None:
        value["done"] = item.ok
        value["line"] = item.line
        value["added"] = item.added
        value["error"] = item.error
        if item.sent is not None:
            value["sent"] = {
                "manifests": item.sent.manifests,
                "blobs": item.sent.blobs_sent,
                "mounted": item.sent.blobs_mounted,
                "present": item.sent.blobs_present,
                "bytes": item.sent.bytes_sent,
            }
    return value


# --- GitHub ----------------------------------------------------------------------------------------


def notes(result: Fill) -> list[github_text.Annotation]:
    """Errors for what is still open (a failed copy, a build, a tag that is no row), notices at the rows
    that were filled."""
    file = result.matrix
    found: list[github_text.Annotation] = []
    for failed in result.failed:
        tag = failed.step.need.tag
        message = f"copying {tag} to {result.target} failed: {failed.error}"
        found.append(github_text.Annotation("error", message, file, None, f"{tag}: copy failed"))
    for step in result.builds:
        message = (
            f"{step.need.tag} is in neither {result.upstream} nor {result.target}: build it "
            f"(needed by {nodes_text(step.need, SHOWN_NODES)})"
        )
        found.append(github_text.Annotation("error", message, file, None, f"{step.need.tag}: needs a build"))
    for refused in result.unfillable:
        message = f"{refused.tag}: {refused.reason}"
        found.append(github_text.Annotation("error", message, file, None, "image tag is no matrix row"))
    for filled in result.filled:
        verb = "copied from upstream, row" if filled.step.action is Action.COPY else "row"
        message = (
            f"{filled.step.need.tag}: {verb} {'added' if filled.added else 'present'} at line {filled.line}"
        )
        found.append(github_text.Annotation("notice", message, file, filled.line, "matrix row filled"))
    return found


def summary(result: Fill) -> github_text.Summary:
    rows = []
    done = {item.step.need.tag: item for item in result.done}
    for step in result.steps:
        item = done.get(step.need.tag)
        state = str(step.action) if item is None else PAST[step.action] if item.ok else "FAILED"
        rows.append(
            (
                github_text.code(step.need.tag),
                f"**{state}**",
                github_text.text(nodes_text(step.need, SHOWN_NODES)),
                github_text.code(f"{result.matrix}:{item.line}") if item and item.line else "-",
            )
        )
    table = github_text.Table(("Image tag", "Action", "Needed by", "Row"), rows)
    lead = f"Images the fleet lacks, from {github_text.code(str(result.upstream))} into "
    lead += f"{github_text.code(str(result.target))}."
    heading = "gpudrv matrix fill: " + ("OK" if result.ok else github_text.text(closing(result)))
    return github_text.Summary(heading, lead, (table,) if rows else ())
