"""`gpudrv preflight` output: the pools that lack their image on the kernel, as text, JSON or GitHub
annotations and a step summary.

Node names, driver resources and image references come from manifests or the cluster: text gets them
on one line (flat), GitHub gets them escaped (github_text), JSON as data. The kernel was checked
against the kernel label's pattern before anything was read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.core.audit.audit import Finding
from reconciler.core.audit.preflight import Pool, Preflight
from reconciler.core.base import github_text
from reconciler.core.contract.driver_images import FleetNote
from reconciler.core.contract.operator import DriverResource, Mode
from reconciler.render import document, words
from reconciler.render.audit import flat

SHOWN_NODES = 10  # past this many, an annotation counts the nodes instead of naming them all


@dataclass(frozen=True)
class Against:
    """Where the images were looked up: the matrix file or the registry's repository."""

    where: str
    source: str  # "matrix" or "registry"


def heading(pool: Pool) -> str:
    """`ubuntu22.04, driver 535 (NVIDIADriver/ubuntu): 2 GPU nodes need IMAGE`."""
    resource = f" ({flat(pool.resource.ref)})" if pool.resource else ""
    need = words.verb(len(pool.nodes), "needs", "need")
    count = words.count(len(pool.nodes), "GPU node")
    return f"{pool.os_tag}, driver {flat(pool.driver)}{resource}: {count} {need} {flat(pool.wanted)}"


def as_text(result: Preflight, against: Against) -> str:
    """Per pool without its image: a heading, then `  NODE MISSING IMAGE` per node; INVALID nodes as
    audit prints them; the fleet's notes; a closing count. Or `OK: N GPU nodes ready for kernel K`,
    never with no node checked (--allow-empty)."""
    if result.ok and not result.checked:
        return f"NOTHING CHECKED: 0 GPU nodes for kernel {result.kernel}"
    if result.ok:
        return f"OK: {words.count(len(result.checked), 'GPU node')} ready for kernel {result.kernel}"
    lines: list[str] = []
    for pool in result.missing:
        lines.append(heading(pool))
        lines += [f"  {flat(node.name)} MISSING {flat(pool.wanted)}" for node in pool.nodes]
    lines += [flat(finding.line()) for finding in result.invalid]
    lines += [f"fleet: {flat(note.message)}" for note in result.notes]
    lines.append(verdict(result, against))
    return "\n".join(lines)


def verdict(result: Preflight, against: Against) -> str:
    missing = len(result.missing)
    text = (
        f"kernel {result.kernel}: {result.missing_nodes + len(result.invalid)} of "
        f"{words.count(len(result.checked), 'GPU node')} not ready"
    )
    if missing:
        text += f", {words.count(missing, 'image')} not in {flat(against.where)}"
    if result.invalid:
        text += f", {len(result.invalid)} INVALID"
    if result.notes:
        text += f", {words.count(len(result.notes), 'fleet problem')}"
    return text


# --- -o json / yaml --------------------------------------------------------------------------------


def as_json(result: Preflight, against: Against) -> dict[str, Any]:
    return document.document(
        "preflight",
        result.ok,
        kernel=result.kernel,
        mode=str(result.mode),
        **{against.source: against.where},
        node_count=len(result.checked),
        missing_count=result.missing_nodes,
        pools=[_pool(pool) for pool in result.pools],
        nodes=_nodes(result),
        findings=_findings(result),
        notes=[_note(note) for note in result.notes],
    )


def _pool(pool: Pool) -> dict[str, Any]:
    return {
        "os_tag": pool.os_tag,
        "driver": pool.driver,
        "resource": _resource(pool.resource),
        "tag": pool.tag,
        "image": pool.image,
        "ready": pool.ready,
        "node_count": len(pool.nodes),
        "node_names": list(pool.names),
    }


def _nodes(result: Preflight) -> list[dict[str, Any]]:
    """Every GPU node checked, in name order: OK, MISSING or INVALID, and the tag it needs on the kernel."""
    found: dict[str, dict[str, Any]] = {}
    for pool in result.pools:
        status = "OK" if pool.ready else "MISSING"
        for name in pool.names:
            found[name] = {"node": name, "status": status, "tag": pool.tag}
    for finding in result.invalid:
        found[finding.node] = {"node": finding.node, "status": "INVALID", "tag": None}
    return [found[name] for name in result.checked if name in found]


def _findings(result: Preflight) -> list[dict[str, Any]]:
    missing = [
        {
            "node": node.name,
            "status": "MISSING",
            "tag": pool.tag,
            "image": pool.image,
            "reason": None,
            "origin": node.origin,
            "resource": _resource(pool.resource),
        }
        for pool in result.missing
        for node in pool.nodes
    ]
    invalid = [
        {
            "node": finding.node,
            "status": "INVALID",
            "tag": None,
            "image": None,
            "reason": finding.detail,
            "origin": finding.origin,
            "resource": _resource(finding.resource),
        }
        for finding in result.invalid
    ]
    return sorted(missing + invalid, key=lambda item: str(item["node"]))


def _resource(item: DriverResource | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {"kind": str(item.kind), "name": item.name, "version": item.version, "origin": item.version_origin}


def _note(note: FleetNote) -> dict[str, Any]:
    return {"message": note.message, "resource": _resource(note.resource), "node_names": list(note.nodes)}


# --- -o github: an error where the fix goes, a table of pools in the step summary --------------------


def annotate(result: Preflight, against: Against) -> list[github_text.Annotation]:
    notes = [_missing(pool, result, against) for pool in result.missing]
    notes += [_invalid(finding, result.kernel) for finding in result.invalid]
    title = "GPU Operator fleet problem"
    return notes + [github_text.at("error", note.message, note.origin, title) for note in result.notes]


def _missing(pool: Pool, result: Preflight, against: Against) -> github_text.Annotation:
    names = list(pool.names)
    shown = ", ".join(names[:SHOWN_NODES])
    shown += f" and {len(names) - SHOWN_NODES} more" if len(names) > SHOWN_NODES else ""
    where = "the registry" if against.source == "registry" else against.where
    fix = (
        "Build and push it"
        if against.source == "registry"
        else f"Build the image, then add the row with gpudrv matrix add --tag {pool.tag}"
    )
    message = (
        f"On kernel {result.kernel}, {heading(pool)}, which is not in {where}: "
        f"{words.count(len(names), 'node')} ({shown}) would lose their driver at the reboot into it. {fix}"
    )
    resource = pool.resource
    origin = resource.version_origin if resource and result.mode is not Mode.LAB else pool.nodes[0].origin
    title = f"kernel {result.kernel}: driver image {pool.tag} is missing"
    return github_text.at("error", message, origin, title)


def _invalid(finding: Finding, kernel: str) -> github_text.Annotation:
    message = f"node {finding.node} on kernel {kernel}: {finding.detail}"
    return github_text.at("error", message, finding.origin, f"{finding.node}: no driver image tag")


def summary(result: Preflight, against: Against) -> github_text.Summary:
    kernel, where = github_text.code(result.kernel), github_text.code(against.where)
    checked = words.count(len(result.checked), "GPU node")
    if result.ok:
        return github_text.Summary(
            f"gpudrv preflight: OK for kernel {result.kernel}",
            f"{checked}, each with its driver image for kernel {kernel} in {where}.",
        )
    heading_text = f"gpudrv preflight: kernel {result.kernel}, {verdict_counts(result)}"
    lead = f"Checked {checked} against {where}: a pool without its image loses its driver at the reboot."
    lead += "".join(f"\n\n**Fleet:** {github_text.text(note.message)}" for note in result.notes)
    rows = [
        (
            github_text.code(pool.os_tag),
            github_text.code(pool.driver),
            github_text.code(pool.resource.ref if pool.resource else "lab"),
            str(len(pool.nodes)),
            github_text.code(pool.wanted),
            "ready" if pool.ready else "**MISSING**",
        )
        for pool in result.pools
    ]
    tables = [github_text.Table(("OS", "Driver", "Resource", "Nodes", "Image", "Status"), rows)]
    if result.invalid:
        invalid = [(github_text.code(f.node), github_text.code(f.detail)) for f in result.invalid]
        tables.append(github_text.Table(("Node", "INVALID: why no tag"), invalid))
    return github_text.Summary(heading_text, lead, tuple(tables))


def verdict_counts(result: Preflight) -> str:
    text = f"{result.missing_nodes} MISSING, {len(result.invalid)} INVALID of {len(result.checked)}"
    return text + (f", {words.count(len(result.notes), 'fleet problem')}" if result.notes else "")


def closing(result: Preflight) -> str:
    """Counts and the kernel (checked against the label's pattern) only."""
    if result.ok:
        ready = words.count(len(result.checked), "GPU node")
        return f"gpudrv preflight: OK, {ready} ready for kernel {result.kernel}"
    return f"gpudrv preflight {result.kernel}: {verdict_counts(result)}"
