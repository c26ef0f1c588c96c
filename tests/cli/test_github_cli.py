"""`-o github` through main(): annotations at the file and line responsible, the step
summary, the default inside GitHub Actions, errors as annotations, and injection attempts through
node names, label values and matrix cells."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_offline_lab import NODE_3
from tests.conftest import run_main
from tests.git.conftest import Script

MATRIX = "matrix/support-matrix.csv"
TAG_3 = "550-6.8.0-52-generic-ubuntu24.04"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
# What the runner accepts as an annotation: properties escaped, so no raw ',' or ':' inside them.
INTENDED = re.compile(
    r"::(error|warning|notice)( (file|line|title)=[^,:\r\n]*(,(file|line|title)=[^,:\r\n]*)*)?::"
)


def in_actions(lab: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """gpudrv as a workflow step runs it: GITHUB_ACTIONS set, a step summary file, the workspace."""
    actions = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(lab / "summary.md"),
        "GITHUB_WORKSPACE": str(lab),
    }
    return run_main(*args, cwd=lab, env={**actions, **env})


def outside_actions(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_main(*args, cwd=lab, env={"GITHUB_ACTIONS": "", "GITHUB_STEP_SUMMARY": ""})


def commands(output: str) -> list[str]:
    """Every line the runner would read as a workflow command, each checked to be an annotation."""
    found = [line for line in output.splitlines() if line.startswith("::")]  # splitlines: every break
    for line in found:
        assert INTENDED.match(line), f"not an intended workflow command: {line!r}"
    return found


def unescape(text: str) -> str:
    return (
        text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def summary(lab: Path) -> str:
    return (lab / "summary.md").read_text()


def node_manifest(name: str, kernel: str = "6.8.0-99-generic") -> str:
    return NODE_3.replace("name: lab-node-3", f"name: {name}").replace("6.8.0-52-generic", kernel)


# --- audit --------------------------------------------------------------------------------------------


def test_audit_annotates_the_node_manifest_and_summarises(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    result = in_actions(lab, "audit", "--from", "clusters/lab")
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines() == [
        "::error file=clusters/lab/nodes/lab-node-3.yaml,line=1,"
        "title=lab-node-3%3A driver image not in the support matrix::"
        f"node lab-node-3 needs the driver image {TAG_3}, which is not in {MATRIX}: its driver pod would be "
        f"stuck in ImagePullBackOff. Build the image, then add the row with gpudrv matrix add --tag {TAG_3}",
        "gpudrv audit: 4 GPU nodes, 1 MISSING, 0 INVALID",
    ]
    assert summary(lab) == (
        "### gpudrv audit: 1 of 4 GPU nodes without a driver image\n\n"
        f"Not in `{MATRIX}`, or no tag to look for: a driver pod there is stuck in ImagePullBackOff.\n\n"
        "| Node | Status | Image tag or reason | Manifest |\n"
        "|---|---|---|---|\n"
        f"| `lab-node-3` | **MISSING** | `{TAG_3}` | `clusters/lab/nodes/lab-node-3.yaml:1` |\n\n"
    )


def test_github_is_the_default_only_inside_actions(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    assert outside_actions(lab, "audit", "--from", "clusters/lab").stdout == f"lab-node-3 MISSING {TAG_3}\n"
    assert (
        in_actions(lab, "audit", "--from", "clusters/lab", "-o", "text").stdout
        == f"lab-node-3 MISSING {TAG_3}\n"
    )
    assert in_actions(lab, "audit", "--from", "clusters/lab", "-o", "json").stdout.startswith("{")
    assert not (lab / "summary.md").exists()  # only github output writes the summary
    explained = in_actions(lab, "explain", "--from", "clusters/lab")
    assert explained.stdout.startswith("::warning file=clusters/lab/workloads/cuda-jobs.yaml,")


def test_paths_are_relative_to_the_workspace(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    result = run_main(
        "audit",
        "--from",
        "lab/nodes",
        "--matrix",
        f"../{MATRIX}",
        cwd=lab / "clusters",
        env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(lab), "GITHUB_STEP_SUMMARY": ""},
    )
    assert result.stdout.startswith("::error file=clusters/lab/nodes/lab-node-3.yaml,line=1,")


def test_audit_ok(lab: Path) -> None:
    result = in_actions(lab, "audit", "--from", "clusters/lab")
    assert (result.returncode, result.stdout) == (0, "gpudrv audit: 3 GPU nodes, 0 MISSING, 0 INVALID\n")
    assert summary(lab) == (
        f"### gpudrv audit: OK\n\n3 GPU nodes, each with its driver image in `{MATRIX}`.\n\n"
    )


def test_past_what_github_shows_one_annotation_counts_the_rest(lab: Path) -> None:
    for index in range(30):
        (lab / f"clusters/lab/nodes/gap-{index:02d}.yaml").write_text(node_manifest(f"gap-{index:02d}"))
    result = in_actions(lab, "audit", "--from", "clusters/lab")
    errors = commands(result.stdout)
    assert len(errors) == 10
    assert all(f"title=gap-{index:02d}%3A" in errors[index] for index in range(9))
    assert errors[9] == "::error title=gpudrv::21 more errors: see the job summary"
    assert sum(line.startswith("| `gap-") for line in summary(lab).splitlines()) == 30


# --- injection ----------------------------------------------------------------------------------------

PAYLOADS = {
    "newline": "a\n::warning::pwned",
    "carriage-return": "b\r::warning::pwned",
    "stop-commands": "c\r\n::stop-commands::gpudrv-token",
    "escaped-newline": "d%0A::set-output name=x::y",
}


def yaml_string(text: str) -> str:
    return (
        '"' + text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace('"', '\\"') + '"'
    )


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_node_names_and_label_values_cannot_inject_commands(lab: Path, payload: str) -> None:
    # The node name reaches the annotation raw (a manifest may name a node anything); the label value
    # reaches it inside the INVALID reason.
    named = node_manifest("x").replace("name: x", f"name: {yaml_string(payload)}")
    (lab / "clusters/lab/nodes/named.yaml").write_text(named)
    labelled = node_manifest("labelled").replace('"6.8.0-99-generic"', yaml_string(payload))
    (lab / "clusters/lab/nodes/labelled.yaml").write_text(labelled)

    result = in_actions(lab, "audit", "--from", "clusters/lab")
    assert result.returncode == 1
    found = commands(result.stdout + result.stderr)
    assert len(found) == 2
    assert any(payload in unescape(line) for line in found)  # the value survives, as data
    rows = [line for line in summary(lab).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2  # the header and one row per node: no value split a row or a cell
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 5 for row in rows)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_manifest_errors_cannot_inject_commands(lab: Path, payload: str) -> None:
    # A GpudrvError that names the node: one stderr line, one escaped annotation.
    broken = f"kind: Node\nmetadata:\n  name: {yaml_string(payload)}\n  labels: [a, b]\n"
    (lab / "clusters/lab/nodes/broken.yaml").write_text(broken)
    result = in_actions(lab, "audit", "--from", "clusters/lab")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("gpudrv: clusters/lab/nodes/broken.yaml:1: node ")
    [annotation] = commands(result.stdout + result.stderr)
    assert annotation.startswith("::error file=clusters/lab/nodes/broken.yaml,line=1,title=gpudrv::node ")
    assert payload in unescape(annotation)
    assert summary(lab).startswith("### gpudrv audit: error\n")


CELLS = [
    "5.15%0A::set-output name=x::y",
    "::warning::pwned",
    "::stop-commands::gpudrv-token",
    'x"\n::warning::pwned',
]


@pytest.mark.parametrize("cell", CELLS)
def test_matrix_cells_cannot_inject_commands(lab: Path, cell: str) -> None:
    with (lab / MATRIX).open("a") as handle:
        handle.write(f"550,{cell},ubuntu22.04\n")
    result = in_actions(lab, "matrix", "validate")
    assert result.returncode == 2
    found = commands(result.stdout + result.stderr)
    # A quoted newline splits the row: the line after it is a problem too, never a command.
    assert found and all(
        re.match(f"::error file={MATRIX},line=[56],title=support matrix::", line) for line in found
    )
    # The same matrix breaks every command that reads it: an error annotation at the row.
    audit = in_actions(lab, "audit", "--from", "clusters/lab")
    [error] = commands(audit.stdout + audit.stderr)
    assert error.startswith(f"::error file={MATRIX},line=5,title=gpudrv::")


# --- matrix validate and manifests validate -----------------------------------------------------------


def test_matrix_validate_annotates_each_row(lab: Path) -> None:
    with (lab / MATRIX).open("a") as handle:
        handle.write("535,5.15.0-107-generic,ubuntu22.04\nr550,5.15.0-1-generic,ubuntu22.04\n")
    result = in_actions(lab, "matrix", "validate")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"::error file={MATRIX},line=5,title=support matrix::"
        "duplicate row 535,5.15.0-107-generic,ubuntu22.04 (first at line 3)",
        f"::error file={MATRIX},line=6,title=support matrix::driver_branch 'r550': a driver branch is digits "
        "only, like 550",
        f"{MATRIX}: 2 problems",
    ]
    assert summary(lab).splitlines()[:7] == [
        "### gpudrv matrix validate: invalid",
        "",
        f"`{MATRIX}` has 2 problems; gpudrv refuses to read it until they are fixed.",
        "",
        "| Line | Problem |",
        "|---|---|",
        "| 5 | duplicate row 535,5.15.0-107-generic,ubuntu22.04 (first at line 3) |",
    ]


def test_matrix_validate_valid(lab: Path) -> None:
    result = in_actions(lab, "matrix", "validate")
    assert (result.returncode, result.stdout) == (0, f"{MATRIX}: 3 rows, valid\n")
    assert summary(lab) == f"### gpudrv matrix validate: valid\n\n`{MATRIX}`: 3 rows, valid.\n\n"


BAD_NODE = """apiVersion: v1
kind: Node
metadata:
  name: lab-node-9
  labels:
    nvidia.com/gpu.present: "true"
    nvidia.com/cuda.driver.major: 550
    feature.node.kubernetes.io/kernel-version.full: "6.8.0-52-generic"
    feature.node.kubernetes.io/system-os_release.ID: "Ubuntu"
"""


def test_manifests_validate_points_at_the_label(lab: Path) -> None:
    (lab / "clusters/lab/nodes/lab-node-9.yaml").write_text(BAD_NODE)
    text = outside_actions(lab, "manifests", "validate")
    assert text.returncode == 2
    file = "clusters/lab/nodes/lab-node-9.yaml"
    assert [line.split(": ", 1)[0] + ": " + line.split(": ", 2)[1] for line in text.stdout.splitlines()] == [
        f"{file}:5: label feature.node.kubernetes.io/system-os_release.VERSION_ID is missing",
        f"{file}:7: label nvidia.com/cuda.driver.major must be a string; quote it",
        f"{file}:9: label feature.node.kubernetes.io/system-os_release.ID='Ubuntu'",
    ]
    github = in_actions(lab, "manifests", "validate", "--from", "clusters/lab")
    assert github.returncode == 2
    lines = commands(github.stdout)
    assert [line.split("::")[1] for line in lines] == [
        f"error file={file},line={line},title=Node manifest" for line in (5, 7, 9)
    ]
    assert github.stdout.splitlines()[-1] == "clusters/lab: 3 problems in 4 Node manifests"
    assert summary(lab).startswith("### gpudrv manifests validate: invalid\n")


def test_manifests_validate_valid_and_broken_yaml(lab: Path) -> None:
    assert outside_actions(lab, "manifests", "validate").stdout == "clusters: 10 Node manifests, valid\n"
    (lab / "clusters/lab/nodes/zz.yaml").write_text("kind: Node\nmetadata: {name: [\n")
    result = in_actions(lab, "manifests", "validate")
    assert result.returncode == 2
    [line] = commands(result.stdout)
    assert line.startswith("::error file=clusters/lab/nodes/zz.yaml,line=3,title=Node manifest::invalid YAML")


# --- matrix impact --------------------------------------------------------------------------------------


@pytest.fixture
def fleet(lab: Path) -> Script:
    return Script.committed(lab, "The lab fleet (#1)")


def test_impact_annotates_the_matrix_for_a_row_still_needed(fleet: Script) -> None:
    lab = fleet.root
    matrix = lab / MATRIX
    matrix.write_text(matrix.read_text().replace("535,5.15.0-107-generic,ubuntu22.04\n", ""))
    (lab / "clusters/lab/nodes/lab-node-3.yaml").write_text(NODE_3)
    assert outside_actions(lab, "matrix", "add", "--tag", TAG_3).returncode == 0
    result = in_actions(lab, "matrix", "impact", "--base", "main", "--from", "clusters/lab")
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines() == [
        f"::error file={MATRIX},title=removing 535%2C5.15.0-107-generic%2Cubuntu22.04 breaks 1 GPU node::"
        "535,5.15.0-107-generic,ubuntu22.04 was in main and is removed here, but the image "
        "535-5.15.0-107-generic-ubuntu22.04 is still needed by lab-node-1: a driver pod there would be stuck "
        "in ImagePullBackOff",
        f"::notice file={MATRIX},line=4,title=550%2C6.8.0-52-generic%2Cubuntu24.04 is needed::"
        f"550,6.8.0-52-generic,ubuntu24.04 adds the driver image {TAG_3}, needed by lab-node-3",
        "gpudrv matrix impact: 1 row added, 1 removed, 1 GPU node would lose the image",
    ]
    lines = summary(lab).splitlines()
    assert lines[0] == "### gpudrv matrix impact: 1 GPU node would lose the driver image"
    assert "| `lab-node-1` | `535-5.15.0-107-generic-ubuntu22.04` | OK | **MISSING** |" in lines
    # Broken nodes first: the summary may be cut short.
    assert [line.split("`")[1] for line in lines if line.startswith("| `lab-node")] == [
        "lab-node-1",
        "lab-node-3",
        "lab-node-0",
        "lab-node-2",
    ]


def test_impact_markdown_is_still_for_a_summary_by_hand(fleet: Script) -> None:
    result = in_actions(
        fleet.root, "matrix", "impact", "--base", "main", "--from", "clusters/lab", "-o", "markdown"
    )
    assert result.returncode == 0
    assert result.stdout.startswith("### Support matrix impact:")
    assert not (fleet.root / "summary.md").exists()
