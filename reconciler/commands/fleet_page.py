"""`gpudrv report -o html`: the fleet page, from what `report` has read (the nodes, their images, what
holds them) and the matrix's history in git.

A matrix outside git, or a shallow clone, is no error here: the page says there is no history, and why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reconciler import __version__
from reconciler.adapters import git
from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK
from reconciler.core.contract.driver_images import Wants
from reconciler.core.contract.operator import Mode
from reconciler.core.cuda.cuda_workloads import Judged
from reconciler.core.images.matrix import Matrix
from reconciler.core.images.os_tags import Release
from reconciler.core.images.tags import UPGRADE_STATE
from reconciler.core.upgrades.upgrade import LiveNode
from reconciler.core.views import fleet_page
from reconciler.core.views.fleet_page import Change, NodeState
from reconciler.errors import GpudrvError
from reconciler.render.fleet_page import Facts, html


@dataclass(frozen=True)
class Parts:
    """What the page shows of one place (a cluster, or manifests): the GPU nodes' images, the nodes,
    what holds each, and the CUDA workloads (None: the pods were not read, offline)."""

    found: Wants
    nodes: Sequence[LiveNode]
    reasons: Mapping[str, str]
    workloads: Sequence[Judged] | None = None


def run(matrix_path: Path, parsed: Matrix, parts: Parts, *, source: NodeSource) -> int:
    """The page of one place on stdout."""
    return show(matrix_path, parsed, parts, describe(source), describe_contract(parts.found))


def show(
    matrix_path: Path, parsed: Matrix, parts: Parts, source: str, mode: str, *, clusters: Sequence[str] = ()
) -> int:
    """The page on stdout: `source` and `mode` say what it describes; `clusters`: the names of the
    clusters whose nodes (named CLUSTER/NODE) it shows, side by side."""
    found = parts.found
    grid = fleet_page.coverage((row.key for row in parsed.rows), found.wants, found.next_wants)
    states = fleet_page.progress(
        NodeState(node.name, node.node.labels.get(UPGRADE_STATE), parts.reasons.get(node.name))
        for node in parts.nodes
    )
    history, history_note = matrix_changes(matrix_path)
    commit, commit_note = git.head_commit(matrix_path)
    facts = Facts(
        generated=generated_at(),
        source=source,
        matrix=str(matrix_path),
        matrix_rows=len(parsed.rows),
        mode=mode,
        version=__version__,
        commit=commit,
        commit_note=commit_note,
        history_note=history_note,
        notes=tuple(note.message for note in found.notes),
        clusters=tuple(clusters),
    )
    rows = fleet_page.node_rows(found.wants, parsed.tags(), states, found.next_wants)
    print(html(facts, grid, states, history, nodes=rows, workloads=parts.workloads))
    return OK


def matrix_changes(matrix_path: Path) -> tuple[tuple[Change, ...] | None, str | None]:
    """The matrix's changes commit by commit, or None and why there are none to show."""
    try:
        repo, repo_path = git.locate(matrix_path)
        return fleet_page.changes(git.matrix_history(repo, repo_path)), None
    except GpudrvError as exc:
        return None, str(exc)
    except ImportError as exc:  # GitPython refuses to load without a git executable
        return None, f"git is not available: {str(exc).splitlines()[0]}"


def generated_at() -> datetime:
    """Now, or SOURCE_DATE_EPOCH's time (the reproducible-builds convention) when it is set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC)
    return datetime.now(UTC).replace(microsecond=0)


def describe(source: NodeSource) -> str:
    if source.from_dir is not None:
        return f"manifests under {source.from_dir} (offline: the desired state, as declared)"
    context = f", context {source.cluster.context}" if source.cluster.context else ""
    return f"the cluster at {source.live.host}{context} (live)"


def describe_contract(found: Wants) -> str:
    contract = found.contract
    if contract.mode is Mode.LAB:
        text = "lab: each node's own driver branch label (nvidia.com/cuda.driver.major)"
    else:
        names = ", ".join(item.ref for item in contract.resources)
        text = f"GPU Operator {contract.mode}: {names}"
    return f"{text}; os tags by the rule of GPU Operator {_release(contract.release, contract.rule.releases)}"


def _release(release: Release | None, covered: str) -> str:
    return "v" + ".".join(str(part) for part in release) if release else f"{covered} (the newest known)"
