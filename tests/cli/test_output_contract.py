"""Issue 22, item 6: one JSON contract. Every command that prints results takes -o json and -o yaml and
prints ONE object, `kind` and `ok` first, valid against schemas/output/<kind>.schema.json, and the YAML
is the same data. Offline commands run on the bundled files; live-only ones against a fake API server
that serves the lab's nodes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reconciler import cli
from tests.conftest import REPO, git, run_main
from tests.hostile.fake_api import Answer, FakeApi, Request
from tests.schemas import SCHEMAS, output_schema

# Commands that print no results to read: init writes a repository, reconcile runs a loop (its
# --check-access has -o json, checked below); probe's output is NFD's feature-file format, which is
# the data. Anything else without -o json fails this file.
NO_DATA = {"init", "reconcile", "probe"}


def schema(kind: str) -> dict[str, Any]:
    return output_schema(kind)


@pytest.fixture
def fleet(lab: Path) -> Path:
    """The bundled lab in a git repository (history, impact and the image gate read git)."""
    git(lab, "init", "-q")
    git(lab, "add", "-A")
    git(lab, "commit", "-qm", "lab")
    return lab


def data(kind: str, *args: str, cwd: Path, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """The command's -o json object, checked against its schema, and its -o yaml: the same data."""
    as_json = run_main(*args, "-o", "json", cwd=cwd)
    assert as_json.returncode in codes, (as_json.stdout, as_json.stderr)
    document: dict[str, Any] = json.loads(as_json.stdout)
    assert list(document)[:2] == ["kind", "ok"]
    assert (document["kind"], document["ok"]) == (kind, as_json.returncode == 0)
    jsonschema.validate(document, schema(kind))
    as_yaml = run_main(*args, "-o", "yaml", cwd=cwd)
    assert (as_yaml.returncode, as_yaml.stderr) == (as_json.returncode, as_json.stderr)
    assert yaml.safe_load(as_yaml.stdout) == document
    return document


# --- every command, and every schema -------------------------------------------------------------


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield (*path, name)
                yield from commands(sub, (*path, name))


def output_choices(words: tuple[str, ...]) -> set[str]:
    parser: argparse.ArgumentParser = cli.build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {
        str(choice) for a in parser._actions if "--output" in a.option_strings for choice in a.choices or ()
    }


def test_every_command_that_prints_results_offers_json_and_yaml_and_has_a_schema() -> None:
    found = list(commands(cli.build_parser()))
    assert len(found) >= 17, found  # the walk found the verbs (matrix's and manifests' included)
    for words in found:
        if words[0] in NO_DATA:
            continue
        assert {"json", "yaml"} <= output_choices(words), words
        assert (SCHEMAS / f"{'-'.join(words)}.schema.json").is_file(), words
    assert {"json", "yaml"} <= output_choices(("reconcile",))  # --check-access


def test_every_schema_is_a_valid_schema_for_its_kind() -> None:
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        loaded = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(loaded)
        kind = path.name.removesuffix(".schema.json")
        assert loaded["properties"]["kind"] == {"const": kind, "description": "the command"}
        assert loaded["required"][:2] == ["kind", "ok"], path


# --- offline, on the bundled files ---------------------------------------------------------------


def test_audit_lists_every_node_and_counts_them(fleet: Path) -> None:
    document = data("audit", "audit", "--from", "clusters/lab", cwd=fleet)
    assert (document["node_count"], document["missing_count"], document["findings"]) == (3, 0, [])
    assert [n["node"] for n in document["nodes"]] == ["lab-node-0", "lab-node-1", "lab-node-2"]
    assert {n["status"] for n in document["nodes"]} == {"OK"}


def test_audit_findings_and_the_node_list_agree(fleet: Path) -> None:
    (fleet / "matrix/support-matrix.csv").write_text(
        "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n"
    )
    document = data("audit", "audit", "--from", "clusters/lab", cwd=fleet, codes=(1,))
    assert [f["node"] for f in document["findings"]] == ["lab-node-1", "lab-node-2"]
    assert [n["status"] for n in document["nodes"]] == ["OK", "MISSING", "MISSING"]
    assert document["missing_count"] == 2


def test_report_counts_under_count_keys_and_lists_nodes(fleet: Path) -> None:
    document = data("report", "report", "--from", "clusters/lab", cwd=fleet)
    assert (document["node_count"], document["missing_count"], document["row_count"]) == (3, 0, 3)
    assert document["nodes"][1] == {
        "node": "lab-node-1",
        "tag": "535-5.15.0-107-generic-ubuntu22.04",
        "upgrade_state": None,
        "next_kernel": None,
        "next_tag": None,
        "next_status": None,
    }


def test_tag(fleet: Path) -> None:
    document = data("tag", "tag", "lab-node-2", "--from", "clusters/lab", cwd=fleet)
    assert document["tag"] == "550-6.8.0-45-generic-ubuntu24.04"


def test_explain_is_an_object_with_every_node_weighed(fleet: Path) -> None:
    document = data("explain", "explain", "--from", "clusters/lab", cwd=fleet, codes=(1,))
    by_name = {item["name"]: item for item in document["workloads"]}
    assert document["workload_count"] == len(by_name) == 3
    cuda12 = by_name["cuda12-job"]
    assert [(n["node"], n["fits"]) for n in cuda12["nodes"]] == [
        ("lab-node-0", True),
        ("lab-node-1", False),
        ("lab-node-2", False),
    ]
    assert by_name["cuda13-job"]["fits"] is False


def test_the_validators(fleet: Path) -> None:
    valid = data("matrix-validate", "matrix", "validate", cwd=fleet)
    assert (valid["row_count"], valid["findings"]) == (3, [])
    assert valid["rows"][0]["tag"] == "550-5.15.0-119-generic-ubuntu22.04"
    (fleet / "matrix/support-matrix.csv").write_text("driver_branch,kernel,os_tag\n550,x y,ubuntu22.04\n")
    invalid = data("matrix-validate", "matrix", "validate", cwd=fleet, codes=(2,))
    [finding] = invalid["findings"]
    assert (
        finding["origin"] == f"matrix/support-matrix.csv:{finding['line']}" == "matrix/support-matrix.csv:2"
    )

    manifests = data("manifests-validate", "manifests", "validate", "--from", "clusters/lab", cwd=fleet)
    assert (manifests["manifest_count"], manifests["findings"]) == (3, [])
    (fleet / "clusters/lab/nodes/lab-node-0.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {}\n")
    broken = data(
        "manifests-validate", "manifests", "validate", "--from", "clusters/lab", cwd=fleet, codes=(2,)
    )
    assert broken["findings"] and broken["findings"][0]["file"].endswith("lab-node-0.yaml")


def test_matrix_add_history_and_impact(fleet: Path) -> None:
    history = data("matrix-history", "matrix", "history", cwd=fleet)
    assert history["rows"][0]["tag"] == "550-5.15.0-119-generic-ubuntu22.04"
    added = run_main("matrix", "add", "550", "6.8.0-52-generic", "ubuntu24.04", "-o", "json", cwd=fleet)
    document = json.loads(added.stdout)
    jsonschema.validate(document, schema("matrix-add"))
    assert (document["added"], document["row"]["line"]) == (True, 5)
    again = data("matrix-add", "matrix", "add", "550", "6.8.0-52-generic", "ubuntu24.04", cwd=fleet)
    assert again["added"] is False
    impact = data("matrix-impact", "matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", cwd=fleet)
    assert [row["tag"] for row in impact["added"]] == ["550-6.8.0-52-generic-ubuntu24.04"]
    assert (impact["node_count"], impact["findings"]) == (3, [])
    (fleet / "matrix/support-matrix.csv").write_text("driver_branch,kernel,os_tag\n")
    lost = data(
        "matrix-impact", "matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", cwd=fleet, codes=(1,)
    )
    assert [node["node"] for node in lost["findings"]] == ["lab-node-0", "lab-node-1", "lab-node-2"]


# --- live-only commands, against a fake API server serving the lab's nodes -------------------------


class Lab:
    """Answers as an API server with the lab's three nodes, no pods, no budgets, no GPU Operator."""

    def __init__(self) -> None:
        self.nodes = {
            node["metadata"]["name"]: node
            for path in sorted((REPO / "clusters/lab/nodes").glob("*.yaml"))
            for node in [yaml.safe_load(path.read_text())]
        }
        self.fake = FakeApi(self.answer)

    def answer(self, request: Request) -> Answer:
        if request.method == "PATCH":
            return Answer(body=b"{}")
        if request.path == "/api/v1/nodes":
            return Answer(body=json.dumps({"items": list(self.nodes.values()), "metadata": {}}).encode())
        if request.path.startswith("/api/v1/nodes/"):
            found = self.nodes.get(request.path.rsplit("/", 1)[1])
            return Answer(body=json.dumps(found).encode()) if found else Answer(404, b'{"kind": "Status"}')
        if "/apis/nvidia.com/" in request.path:
            return Answer(404, b'{"kind": "Status", "code": 404}')
        return Answer(body=b'{"items": [], "metadata": {}}')


@pytest.fixture
def live(fleet: Path) -> Iterator[Path]:
    server = Lab()
    with server.fake:
        yield server.fake.kubeconfig(fleet / "kubeconfig")


def upgrade_lab_node_1(fleet: Path) -> None:
    """lab-node-1 is to run 550.90.07, whose image for its kernel is not in the matrix: blocked."""
    path = fleet / "clusters/lab/nodes/lab-node-1.yaml"
    text = path.read_text().replace('major: "535"', 'major: "550"').replace('minor: "183"', 'minor: "90"')
    path.write_text(text.replace('rev: "06"', 'rev: "07"'))


def test_status_and_drain(fleet: Path, live: Path) -> None:
    status = data("status", "status", "--kubeconfig", str(live), cwd=fleet)
    assert status["node_count"] == 3
    assert status["nodes"][0]["tag"] == "550-5.15.0-119-generic-ubuntu22.04"
    drain = data("drain", "drain", "lab-node-0", "--kubeconfig", str(live), cwd=fleet)
    assert drain["nodes"] == [{"node": "lab-node-0", "outcome": "drained", "detail": None}]
    assert drain["summary"] == "node/lab-node-0 drained"


def test_plan_and_apply(fleet: Path, live: Path) -> None:
    upgrade_lab_node_1(fleet)
    plan = data("plan", "plan", "--from", "clusters/lab", "--kubeconfig", str(live), cwd=fleet, codes=(1,))
    [node] = plan["nodes"]
    assert (node["node"], node["target_driver"], node["blocked"]) == ("lab-node-1", "550.90.07", True)
    dry = data(
        "apply",
        "apply",
        "--from",
        "clusters/lab",
        "--dry-run",
        "--kubeconfig",
        str(live),
        cwd=fleet,
        codes=(1,),
    )
    assert (dry["dry_run"], dry["mode"], dry["audited"]) == (True, "lab", False)
    assert [(n["node"], n["outcome"]) for n in dry["nodes"]] == [("lab-node-1", "blocked")]
    assert dry["summary"] == "dry run: nothing was changed"
    applied = data(
        "apply", "apply", "--from", "clusters/lab", "--kubeconfig", str(live), cwd=fleet, codes=(1,)
    )
    assert [(n["node"], n["outcome"]) for n in applied["nodes"]] == [("lab-node-1", "blocked")]
    assert (applied["dry_run"], applied["audited"]) == (False, True)


def test_apply_keeps_its_progress_on_stderr(fleet: Path, live: Path) -> None:
    text = run_main("apply", "--from", "clusters/lab", "--kubeconfig", str(live), cwd=fleet)
    as_json = run_main("apply", "--from", "clusters/lab", "--kubeconfig", str(live), "-o", "json", cwd=fleet)
    assert as_json.returncode == text.returncode == 0, text.stdout + text.stderr
    assert as_json.stderr == text.stdout  # the text mode's lines, unchanged, on the other stream
    document = json.loads(as_json.stdout)
    jsonschema.validate(document, schema("apply"))
    assert (document["audited"], document["findings"]) == (True, [])
    assert document["summary"] == text.stdout.splitlines()[-1]
