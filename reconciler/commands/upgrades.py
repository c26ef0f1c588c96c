"""What `plan`, `apply` and `status` share: the desired state from git, the image gate, the plans."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from reconciler.adapters import git, kube
from reconciler.adapters.ci import github
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.adapters.files import manifests, schemas
from reconciler.adapters.sources import require_gpu_nodes, valid_matrix
from reconciler.commands import OK, Output, cuda_gates
from reconciler.core.audit.audit import AuditResult
from reconciler.core.base import github_text
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.cuda.cuda_gate import READ_REGISTRY, Reading
from reconciler.core.images import matrix
from reconciler.core.images.tags import Node
from reconciler.core.upgrades import budget, upgrade
from reconciler.core.upgrades.upgrade import Images, LiveNode, NodePlan
from reconciler.core.views import reads
from reconciler.core.views.diff import Budget
from reconciler.errors import GpudrvError
from reconciler.render import document
from reconciler.render.upgrades import applied_json


@dataclass(frozen=True)
class Declared:
    nodes: list[Node]
    budgets: list[Budget]


def load_declared(from_dir: Path, selector: LabelSelector | None = None) -> Declared:
    """The declared nodes (those whose declared labels `selector` matches) and budgets."""
    nodes = manifests.load_nodes(from_dir)
    if selector is not None:
        nodes = [node for node in nodes if selector.matches(node.labels)]
    return Declared(nodes, manifests.load_budget_specs(from_dir))


def require_declared(
    desired: Declared, from_dir: Path, selector: LabelSelector | None, allow_empty: bool
) -> None:
    """Lab mode plans the declared GPU nodes: none (a wrong --from, a -l that matches none) is exit 2."""
    count = sum(node.gpu_present for node in desired.nodes)
    require_gpu_nodes(count, f"in {from_dir}", selector, allow_empty)


def load_images(matrix_path: Path, merged_ref: str | None) -> Images:
    """The matrix as it is on the merged ref (read with git), next to the working tree's."""
    working = valid_matrix(matrix_path).tags()
    repo, repo_path = git.locate(matrix_path)
    ref = merged_ref or git.default_merged_ref(repo)
    text = git.read_at(repo, ref, repo_path)
    merged = frozenset() if text is None else _tags_at(text, ref, repo_path)
    return Images(ref=ref, path=repo_path, merged=merged, working=working, since={})


def _tags_at(text: str, ref: str, path: str) -> frozenset[str]:
    parsed = matrix.parse(text, schemas.load("matrix-row"))
    if parsed.problems:
        first = parsed.problems[0]
        raise GpudrvError(f"{path}:{first.line} on {ref}: {first.message}")
    return parsed.tags()


def with_since(images: Images, plans: Sequence[NodePlan], matrix_path: Path) -> Images:
    """Add, for the few target tags that passed the gate, the commit that brought them to the ref."""
    repo, _ = git.locate(matrix_path)
    since: dict[str, str] = {}
    for plan in plans:
        if plan.target_tag and plan.target_tag in images.merged and plan.target_tag not in since:
            added = git.row_added_at(repo, images.ref, images.path, matrix.key_from_tag(plan.target_tag))
            if added is not None:
                since[plan.target_tag] = added.commit
    return Images(images.ref, images.path, images.merged, since, images.working)


@dataclass
class Live:
    """One consistent read of what the plans need from the cluster."""

    nodes: dict[str, LiveNode]
    pods: dict[str, list[budget.Pod]]
    budgets: list[budget.Budget]

    def node_list(self) -> list[Node]:
        return [live.node for live in self.nodes.values()]


def read_live(fleet: Fleet, desired: Declared) -> Live:
    """The GPU nodes, the declared nodes that are not (yet) GPU nodes, the pods on every node to
    upgrade and the budgets: a constant number of requests whatever the fleet's size."""
    nodes = {node.name: node for node in fleet.gpu_nodes(labels=reads.FLEET)}
    elsewhere = {d.name for d in desired.nodes if d.name not in nodes and upgrade.driver(d.labels)}
    if elsewhere:  # declared with a driver, not labelled a GPU node live: read every node once
        nodes.update((n.name, n) for n in fleet.live_nodes("", reads.FLEET) if n.name in elsewhere)
    pods = fleet.pods_on_nodes([d.name for d in desired.nodes if _may_upgrade(d, nodes.get(d.name))])
    return Live(nodes, pods, fleet.budgets())


def _may_upgrade(declared: Node, live: LiveNode | None) -> bool:
    return live is not None and upgrade.needs_upgrade(declared, live) is not None


def plans_with_history(
    desired: Declared,
    live: Live,
    images: Images,
    force: bool,
    matrix_path: Path,
    *,
    cuda: Reading = READ_REGISTRY,
) -> tuple[list[NodePlan], Images]:
    """The plans, with the image gate naming the commit each passing target tag arrived in."""
    images = with_since(images, make_plans(desired, live, images, force), matrix_path)
    return make_plans(desired, live, images, force, cuda_gates.Gates(cuda, live.node_list())), images


def make_plans(
    desired: Declared, live: Live, images: Images, force: bool, gates: cuda_gates.Gates | None = None
) -> list[NodePlan]:
    """Each declared node's plan; with `gates`, the CUDA gate of the pods on it (images read once)."""
    found = [
        upgrade.plan_node(
            d, live.nodes.get(d.name), images, live.pods.get(d.name, ()), live.budgets, force=force
        )
        for d in sorted(desired.nodes, key=lambda node: node.name)
    ]
    plans = [plan for plan in found if plan is not None]
    if gates is None:
        return plans
    gates.read(live.pods, [plan.node for plan in plans])
    return [
        cuda_gates.with_gate(plan, gates.gate(plan.node, plan.target.version, live.pods.get(plan.node, ())))
        for plan in plans
    ]


def connect(options: kube.Options) -> Fleet:
    return Fleet(kube.connect(options))


# --- apply and drain as data (-o json/yaml): progress on stderr, one object on stdout at the end ----


@dataclass
class Record:
    """What an apply (or a drain) did, filled in as it goes: each node's outcome, the final audit."""

    mode: str | None = None  # apply's: lab, or the GPU Operator's resource kind
    desired: dict[str, Any] | None = (
        None  # apply's: the desired state it read (core/contract/desired.py as_json)
    )
    nodes: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name: (outcome, detail)
    audit: AuditResult | None = None

    def note(self, name: str, outcome: str, detail: str | None = None) -> None:
        self.nodes[name] = (outcome, detail)


def as_data(output: Output, kind: str, run: Callable[[Record], int], **fields: Any) -> int:
    """Run `run` with what it prints sent to stderr, unchanged, then print one object on stdout: the
    record, the exit code's `ok`, and `summary`, the last line the run printed (its verdict)."""
    record = Record()
    last = _LastLine(sys.stderr)
    with contextlib.redirect_stdout(last):
        code = run(record)
    mode: dict[str, Any] = {"mode": record.mode} if record.mode is not None else {}
    if record.desired is not None:
        mode["desired"] = record.desired
    data = applied_json(kind, code == OK, last.line, record.nodes, record.audit, **mode, **fields)
    print(document.text(data, output))
    return code


def with_summary(kind: str, run: Callable[[Record], int]) -> int:
    """-o github: the run's lines as text, then a section of the job's step summary with each node's
    outcome (a node someone else holds among them)."""
    record = Record()
    code = run(record)
    rows = [
        (github_text.code(name), outcome, github_text.text(detail or ""))
        for name, (outcome, detail) in sorted(record.nodes.items())
    ]
    lead = "done" if code == OK else "not done: see the job log"
    mode = f" ({record.mode})" if record.mode else ""
    tables = (github_text.Table(("node", "outcome", "detail"), rows),) if rows else ()
    github.append_summary(github_text.Summary(f"gpudrv {kind}{mode}: {lead}", tables=tables))
    return code


class _LastLine:
    """A text stream that writes through to `raw` and keeps the last line written that is not blank."""

    def __init__(self, raw: TextIO) -> None:
        self.raw, self.line, self._partial = raw, "", ""

    def write(self, text: str) -> int:
        self.raw.write(text)
        *complete, self._partial = (self._partial + text).replace("\r", "\n").split("\n")
        for line in complete:
            if line.strip():
                self.line = line.strip()
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self.raw, name)
