"""Many clusters, one support matrix: the clusters gpudrv.yaml names (`clusters:`), read side by side.

`--cluster NAME` (repeatable) and `--all-clusters` pick them. Each cluster is read on a thread of its
own (at most CONCURRENCY at once), through its own connection with its own timeouts; a cluster that
cannot be read is one line on stderr and exit 2 at the end, while the others' results are printed in
full. Node names carry their cluster, `CLUSTER/NODE` (core/audit/cluster_names.py).

Each cluster read carries its own desired state (core/contract/desired.py) in -o json: the one its
result was computed under, read once as the single-cluster command reads it (`NodeSource.desired` for
audit, status and report; the command's own document's `desired` for the sections), never read again.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TextIO, TypeVar, cast

from reconciler.adapters import kube
from reconciler.adapters.sources import NodeSource
from reconciler.commands import ERROR, OK, Output
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract.desired import Desired
from reconciler.errors import GpudrvError
from reconciler.render import document
from reconciler.render.clusters import Read

CONCURRENCY = 4  # clusters read at once: each is mostly waiting on its API server

T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """One cluster as a command reads it: gpudrv.yaml's entry with the command line's flags applied."""

    name: str
    options: kube.Options
    fleet: Path | None = None  # its desired state (diff, plan): its own fleet, else gpudrv.yaml's or --from
    operator_version: str | None = None
    version_from_config: bool = False
    selector: LabelSelector | None = None
    allow_empty: bool = False
    version_origin: str = "gpudrv.yaml"  # where a gpudrv.yaml operatorVersion was written (file:line)

    def source(self, desired: bool = False) -> NodeSource:
        """The cluster's live nodes and driver resources; `desired`: with the desired state in git (its
        fleet), as single-cluster `status --from` reads it."""
        return NodeSource(
            None,
            self.options,
            self.operator_version,
            self.selector,
            self.allow_empty,
            version_from_config=self.version_from_config,
            desired_dir=self.fleet if desired else None,
            config_origin=self.version_origin,
        )


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """One cluster's result, or the one line that says why there is none; `desired`: the desired state
    the result was computed under (read_each), None where the cluster could not be read."""

    target: Target
    result: T | None = None
    error: str | None = None
    desired: Desired | None = None


def fan_out(targets: Sequence[Target], work: Callable[[Target], T]) -> list[Outcome[T]]:
    """`work` on every cluster at once (CONCURRENCY at most), in the targets' order. A GpudrvError (an
    unreachable cluster, refused credentials, a bad answer, no GPU node) becomes that cluster's error;
    anything else is a bug and propagates."""

    def one(target: Target) -> Outcome[T]:
        try:
            return Outcome(target, work(target))
        except GpudrvError as exc:
            return Outcome(target, error=str(exc))

    if len(targets) == 1:
        return [one(targets[0])]
    from concurrent.futures import ThreadPoolExecutor  # only when there are several

    kube.preload()  # the client's first import, once, before the threads race into it

    with ThreadPoolExecutor(max_workers=min(CONCURRENCY, len(targets)), thread_name_prefix="cluster") as pool:
        return list(pool.map(one, targets))


def read_each(
    targets: Sequence[Target], work: Callable[[Target, NodeSource], T], desired: bool = False
) -> list[Outcome[T]]:
    """fan_out on each cluster's live source (Target.source), each result kept with the desired state
    it was computed under: the source's own, read once by `work` as the single-cluster command reads
    it (NodeSource.desired caches it), so each cluster's -o json says what gpudrv read there."""

    def one(target: Target) -> tuple[T, Desired]:
        source = target.source(desired)
        result = work(target, source)
        return result, source.desired

    return [
        Outcome(outcome.target, outcome.result[0], desired=outcome.result[1])
        if outcome.result is not None
        else Outcome(outcome.target, error=outcome.error)
        for outcome in fan_out(targets, one)
    ]


def report_errors(outcomes: Sequence[Outcome[T]]) -> bool:
    """Each failed cluster's line on stderr (after the others' results); True when there was one."""
    failed = [outcome for outcome in outcomes if outcome.error is not None]
    for outcome in failed:
        flat = (outcome.error or "").replace("\r", "\\r").replace("\n", "\\n")
        print(f"gpudrv: cluster {outcome.target.name}: {flat}", file=sys.stderr)
    return bool(failed)


def listed(outcome: Outcome[T], facts: Callable[[T], tuple[bool | None, int]]) -> Read:
    """The cluster as the output lists it: its verdict and node count from `facts` and its desired
    state, or its error."""
    if outcome.result is None:
        return Read(outcome.target.name, error=outcome.error)
    ok, count = facts(outcome.result)
    return Read(outcome.target.name, ok, count, desired=outcome.desired)


# --- one section per cluster: plan, diff, explain, preflight --------------------------------------


class _PerThread(io.TextIOBase):
    """sys.stdout while sections run: each section's thread writes to its own buffer; any other
    thread to the stream it replaced."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback
        self.local = threading.local()

    def write(self, text: str) -> int:
        buffer: io.StringIO | None = getattr(self.local, "buffer", None)
        return (buffer or self.fallback).write(text)

    def flush(self) -> None:
        if getattr(self.local, "buffer", None) is None:
            self.fallback.flush()


@dataclass(frozen=True)
class Section:
    code: int
    text: str  # what the command printed on stdout for this cluster


def sections(
    targets: Sequence[Target], verb: str, run: Callable[[Target, Output], int], output: Output
) -> int:
    """A command that keeps its own output (a plan, a diff) run once per cluster: text under a
    `== cluster NAME ==` line per cluster; JSON and YAML as one document whose `clusters` hold each
    cluster's own document (kind `clusters`) and, beside it, that document's `desired`; GitHub output
    one cluster after another (their annotations and step-summary sections in cluster order, each
    section headed by its cluster). The exit code is the worst of the clusters'; one that could not be
    read is exit 2."""
    if output is Output.GITHUB:
        return _github_sections(targets, run)
    inner = Output.JSON if output.structured else output
    proxy = _PerThread(sys.stdout)

    def one(target: Target) -> Section:
        proxy.local.buffer = io.StringIO()
        try:
            code = run(target, inner)
            return Section(code, proxy.local.buffer.getvalue())
        finally:
            proxy.local.buffer = None

    replaced, sys.stdout = sys.stdout, cast(TextIO, proxy)
    try:
        outcomes = fan_out(targets, one)
    finally:
        sys.stdout = replaced
    codes = [outcome.result.code if outcome.result else ERROR for outcome in outcomes]
    if output.structured:
        print(document.text(_wrapped(verb, outcomes, codes), output))
    else:
        for outcome in outcomes:
            if outcome.result is not None:
                print(f"== cluster {outcome.target.name} ==")
                print(outcome.result.text, end="" if outcome.result.text.endswith("\n") else "\n")
    report_errors(outcomes)
    return max(codes, default=OK)


def _wrapped(verb: str, outcomes: Sequence[Outcome[Section]], codes: Sequence[int]) -> dict[str, Any]:
    found = []
    for outcome, code in zip(outcomes, codes, strict=True):
        result, error = None, outcome.error
        if outcome.result is not None and outcome.result.text.strip():
            try:
                result = json.loads(outcome.result.text)
            except ValueError:  # a command that printed no document: say so, never a traceback
                error = "the command printed no JSON document for this cluster"
        found.append(
            {
                "name": outcome.target.name,
                "exit_code": code,
                "result": result,
                "error": error,
                "desired": _desired_of(result),
            }
        )
    return document.document("clusters", all(code == OK for code in codes), command=verb, clusters=found)


def _desired_of(result: Any) -> Any:
    """The desired state the cluster's own document carries (the single-cluster command's, as it
    printed it): lifted beside the result, so every command's clusters say it in one place; None
    where there is no document."""
    return result.get("desired") if isinstance(result, dict) else None


def _github_sections(targets: Sequence[Target], run: Callable[[Target, Output], int]) -> int:
    """One cluster after another: the annotations and the step summary are the command's own."""
    from reconciler.adapters.ci import github
    from reconciler.core.base.github_text import Summary

    codes = []
    outcomes: list[Outcome[int]] = []
    for target in targets:
        print(f"== cluster {target.name} ==")
        github.append_summary(Summary(f"cluster {target.name}"))
        [outcome] = fan_out([target], lambda item: run(item, Output.GITHUB))
        outcomes.append(outcome)
        codes.append(outcome.result if outcome.result is not None else ERROR)
    report_errors(outcomes)
    return max(codes, default=OK)
