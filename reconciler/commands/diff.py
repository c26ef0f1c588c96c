"""`gpudrv diff --from DIR`: the desired state in git against the live cluster, like `kubectl diff`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from reconciler.adapters import cluster, desired, kube
from reconciler.adapters.ci import github
from reconciler.adapters.cluster import gpu_operator
from reconciler.adapters.files import manifests
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.views import reads
from reconciler.core.views.diff import drift
from reconciler.render import diff, document


def run(
    desired_dir: Path,
    options: kube.Options,
    output: Output,
    selector: LabelSelector | None = None,
    pins: desired.Pins | None = None,
) -> int:
    # Read git first: a broken manifest is reported without touching the cluster.
    nodes, budgets = manifests.load_nodes(desired_dir), manifests.load_budget_specs(desired_dir)
    if selector is not None:  # like kubectl diff -l: the manifests selected by the labels they declare
        nodes = [node for node in nodes if selector.matches(node.labels)]
    state = desired.from_git(desired_dir, pins or desired.Pins())
    live = cluster.connect(options)
    state = desired.on_cluster(state, live.gateway)
    resources = [*state.declared, *state.rendered]
    namespaces = sorted({budget.namespace for budget in budgets})
    live_budgets = [found for ns in namespaces for found in live.budget_specs(ns)]
    live_resources = gpu_operator.live_resources(live.gateway)
    # Each live node keeps the labels a manifest declares, and those the selector reads.
    keys = reads.for_declared(nodes) | (selector.keys() if selector is not None else frozenset())
    live_nodes = live.nodes(labels=keys)
    if selector is not None:  # a declared node is compared by name; an undeclared one only if selected
        declared = {node.name for node in nodes}
        live_nodes = [node for node in live_nodes if node.name in declared or selector.matches(node.labels)]
    result = drift(nodes, live_nodes, budgets, live_budgets, (resources, live_resources))
    if output is Output.GITHUB:
        github.publish(
            diff.annotate(result, desired_dir), diff.summary(result, desired_dir), diff.closing(result)
        )
    elif output.structured:
        print(document.text({**diff.as_json(result), "desired": state.as_json()}, output))
    else:
        print(diff.as_text(result, desired_dir, diff.paint(terminal_colour())))
    return FINDINGS if result.found else OK


def terminal_colour() -> bool:
    """Colour on a terminal, unless NO_COLOR is set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
