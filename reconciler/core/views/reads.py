"""Which node labels each computation reads, so a live read keeps those and drops the rest.

A GPU node carries about 100 labels (NFD's CPU flags, GFD's GPU facts, the cloud's topology); the core
reads a dozen of them. Holding all of them for 10,000 nodes costs some 40 MiB, holding these about 5
(docs/scale.md). Each set below names every label its computation looks up; tests/unit/test_reads.py
runs each computation on nodes with and without the other labels and requires the same result.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.core.contract import driver_images, operator
from reconciler.core.contract.operator import Contract
from reconciler.core.cuda import cuda_gate
from reconciler.core.cuda.placement import Workload
from reconciler.core.images import tags
from reconciler.core.images.tags import Node
from reconciler.core.rollout import rollout, supervise
from reconciler.core.upgrades import upgrade

# Tags, audits, the operator's images and notes, upgrade states, running drivers: what audit, report,
# status and plan read of every GPU node.
FLEET = frozenset(
    {
        tags.GPU_PRESENT,
        tags.KERNEL,
        tags.NEXT_KERNEL,  # the kernel a node boots next (NEXT-MISSING findings)
        tags.OS_ID,
        tags.OS_VERSION_ID,
        tags.UPGRADE_STATE,
        upgrade.SKIP_LABEL,  # the operator's skip label: lab mode leaves such a node alone
        operator.OS_VERSION_MAJOR,
        "nvidia.com/cuda.driver-version.full",
        *(key for keys in driver_images.DRIVER_LABELS for key in keys),
        *rollout.RUNNING_BRANCH,
        *upgrade.DRIVER_KEYS,
        *cuda_gate.LABELS,  # the CUDA gate: the CUDA version GFD shows per branch, each node's platform
    }
)

# The annotations status and plan read (gpudrv's own bookkeeping on a node under upgrade).
ANNOTATIONS = frozenset(
    {
        upgrade.INITIAL_UNSCHEDULABLE,
        upgrade.LEGACY_INITIAL_UNSCHEDULABLE,
        upgrade.OWNER,
        upgrade.FAILURE,
        supervise.HELD,
    }
)


def for_contract(contract: Contract) -> frozenset[str]:
    """FLEET and every key an NVIDIADriver's nodeSelector matches on."""
    selected = (key for item in contract.resources for key in (item.node_selector or {}))
    return FLEET | frozenset(selected)


def for_workloads(workloads: Iterable[Workload]) -> frozenset[str]:
    """What explain reads: the keys the workloads' placements look at, and the driver labels."""
    placed = (key for item in workloads for key in item.placement.label_keys())
    return FLEET | frozenset(placed)


def for_declared(nodes: Iterable[Node]) -> frozenset[str]:
    """What diff reads: every label a manifest declares, and whether a live node is a GPU node."""
    return frozenset({tags.GPU_PRESENT, *(key for node in nodes for key in node.labels)})
