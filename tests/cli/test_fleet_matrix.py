"""Issue 37: one fleet, one reading. Every offline command on every kind of fleet source agrees on the
mode, the operator release and its provenance (-o json's `desired`), and each node's desired image. The
commands that read a cluster are tests/e2e/test_fleet_matrix_live.py's; a new kind of source
(core/contract/desired.py SourceKind) or a new command that reads a fleet fails here until the matrix
has it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import cli
from reconciler.core.contract.desired import SourceKind
from tests import fleets
from tests.conftest import run_main

Tags = dict[str, str]


def _json(root: Path, *args: str) -> dict[str, Any]:
    result = run_main(*args, "-o", "json", cwd=root)
    assert result.returncode in (0, 1), (args, result.stdout, result.stderr)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _by_node(document: dict[str, Any]) -> Tags:
    return {node["node"]: node["tag"] for node in document["nodes"]}


def tag(root: Path) -> list[tuple[dict[str, Any], Tags]]:
    found = []
    for name in fleets.NODES:
        document = _json(root, "tag", name, "--from", fleets.FOLDER)
        found.append((document["desired"], {name: document["tag"]}))
    return found


def reading(*args: str, tags: Callable[[dict[str, Any]], Tags] | None = _by_node) -> Callable[[Path], Any]:
    def run(root: Path) -> list[tuple[dict[str, Any], Tags | None]]:
        document = _json(root, *args)
        return [(document["desired"], tags(document) if tags else None)]

    return run


def _on_next_kernel(document: dict[str, Any]) -> Tags:
    """preflight names each node's image on the kernel it checks: compared as the same image on its own."""
    kernels = dict(zip(fleets.NODES, fleets.KERNELS, strict=True))
    return {
        node["node"]: node["tag"].replace(fleets.NEXT_KERNEL, kernels[node["node"]])
        for node in document["nodes"]
    }


FROM = ("--from", fleets.FOLDER)
MATRIX = ("--matrix", fleets.MATRIX)
RUNS: dict[str, Callable[[Path], list[tuple[dict[str, Any], Tags | None]]]] = {
    "tag": tag,
    "audit": reading("audit", *FROM, *MATRIX),
    "report": reading("report", *FROM, *MATRIX),
    "matrix impact": reading("matrix", "impact", "--base", "main", *FROM, *MATRIX),
    "preflight": reading("preflight", *FROM, "--kernel", fleets.NEXT_KERNEL, *MATRIX, tags=_on_next_kernel),
    "explain": reading("explain", *FROM, tags=None),  # no workload: the desired state alone
}


@pytest.mark.parametrize("kind", list(fleets.WRITERS), ids=str)
@pytest.mark.parametrize("command", fleets.OFFLINE_COMMANDS)
def test_every_offline_command_reads_every_kind_of_fleet_alike(
    kind: SourceKind, command: str, tmp_path: Path
) -> None:
    expected = fleets.repository(tmp_path, kind)
    tags: Tags = {}
    for desired, found in RUNS[command](tmp_path):
        expected.check(desired, f"{command} on {kind}")
        assert kind in {source["kind"] for source in desired["sources"]}, desired
        tags.update(found or {})
    if command != "explain":
        assert tags == expected.tags(), f"{command} on {kind}"


def test_the_matrix_covers_every_kind_and_every_command_that_reads_a_fleet() -> None:
    assert set(fleets.WRITERS) | {SourceKind.LIVE} == set(SourceKind)
    assert set(RUNS) == set(fleets.OFFLINE_COMMANDS)
    covered = {command.split(" --")[0] for command in (*fleets.OFFLINE_COMMANDS, *fleets.LIVE_COMMANDS)}
    reading_fleet = {
        " ".join(words)
        for words, options in _commands(cli.build_parser())
        if options & {"--from", "--operator-version"}
    }
    assert reading_fleet == covered | set(fleets.NOT_A_FLEET_READING)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], set[str]]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield (*path, name), {o for a in sub._actions for o in a.option_strings}
                yield from _commands(sub, (*path, name))
