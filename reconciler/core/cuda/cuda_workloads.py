"""The fleet page's CUDA workloads: every GPU pod's image on the driver its node runs now and, where a
driver resource moves the node, on the driver it moves to; judged as the CUDA gate judges a move
(core/cuda/cuda_gate.py), one row per image, time and driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.cuda.cuda_gate import (
    ImageRead,
    State,
    checks,
    driver,
    observed,
    platform,
    pod_images,
)
from reconciler.core.cuda.on_nodes import Tables, node_driver
from reconciler.core.images.tags import Node
from reconciler.core.upgrades.budget import Pod

NOW = "now"
_RANK = {State.BREAKS: 0, State.UNKNOWN: 1, None: 2, State.OK: 3}


@dataclass(frozen=True)
class Judged:
    """One image on one driver, and the GPU pods and nodes that verdict stands for."""

    image: str
    when: str  # NOW (the driver the nodes run), or the driver version the driver resources move them to
    driver: str  # Driver.describe()
    state: State | None  # None: not checked (config not read, nor in the NGC table)
    message: str
    nodes: tuple[str, ...]
    pods: tuple[str, ...]
    fallback: bool = False  # judged by the NGC table, its config unread


def rows(
    nodes: Sequence[Node],
    pods: Mapping[str, Sequence[Pod]],
    reads: Mapping[tuple[str, str], ImageRead],
    moving: Mapping[str, str],
    tables: Tables,
) -> tuple[Judged, ...]:
    """Each GPU pod image (read per platform: `reads` by (image, platform)) against its node's driver
    now and, for a node in `moving`, the driver version it moves to; one row per image, time and
    driver, what breaks first. A node whose labels show no driver is judged only at its move."""
    branches, compat = tables
    seen = observed([(node.name, node.labels) for node in nodes])
    by_platform: dict[str, dict[str, ImageRead]] = {}
    for (image, where), read in reads.items():
        by_platform.setdefault(where, {})[image] = read
    groups: dict[tuple[str, str, str, State | None, str, bool], tuple[dict[str, None], dict[str, None]]] = {}
    for node in nodes:
        found = pod_images(pods.get(node.name, ()))
        if not found:
            continue
        targets = [(NOW, node_driver(node, branches))]
        if node.name in moving:
            targets.append((moving[node.name], driver(moving[node.name], branches, seen)))
        known = by_platform.get(platform(node.labels), {})
        for when, target in targets:
            if target is None:
                continue
            for check in checks(found, target, known, compat):
                key = (check.what.image, when, target.describe(), check.state, check.message, check.fallback)
                names, refs = groups.setdefault(key, ({}, {}))
                names[node.name] = None
                refs[check.what.pod] = None
    judged = [
        Judged(image, when, described, state, message, tuple(names), tuple(refs), fallback)
        for (image, when, described, state, message, fallback), (names, refs) in groups.items()
    ]
    return ordered(judged)


def ordered(rows: Iterable[Judged]) -> tuple[Judged, ...]:
    """What breaks first; an image's rows together, now before its move."""
    return tuple(sorted(rows, key=_order))


def _order(row: Judged) -> tuple[int, str, bool, str, str]:
    return (_RANK[row.state], row.image, row.when != NOW, row.when, row.driver)
