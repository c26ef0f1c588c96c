"""Issue 22, item 5: the command line's conventions. No prefix abbreviations, "did you mean" for a
mistyped command, verb, choice or flag, `gpudrv` alone lists the commands, every subcommand has a
summary, details and examples (each example parses), live-only commands say they read the cluster,
and gpudrv.yaml is found up to the repository root."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import parsing
from reconciler.cli import build_parser
from tests.conftest import run_gpudrv, run_main

NO_CLUSTER = {"KUBECONFIG": ""}
ACTION = "acme/gpudrv@" + "a" * 40


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    return line


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every subcommand's path: ("audit",), ("matrix",), ("matrix", "add"), ..."""
    action = parsing.subcommands(parser)
    for name, child in (action.choices if action else {}).items():
        yield (*path, name)
        yield from parsers(child, (*path, name))


def parser_of(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = parsing.subcommands(parser)
        assert action is not None
        parser = action.choices[name]
    return parser


SUBCOMMANDS = list(parsers(build_parser()))


def test_every_command_is_walked() -> None:
    assert {("audit",), ("matrix", "impact"), ("manifests", "validate"), ("reconcile",)} <= set(SUBCOMMANDS)
    assert len(SUBCOMMANDS) == 22


@pytest.mark.parametrize("path", [(), *SUBCOMMANDS], ids=lambda path: " ".join(path) or "gpudrv")
def test_no_parser_takes_abbreviations(path: tuple[str, ...]) -> None:
    assert parser_of(path).allow_abbrev is False


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["audit", "--fro", "clusters/lab"], "--from"),
        (["audit", "--from", "clusters/lab", "--matri", "m.csv"], "--matrix"),
        (["matrix", "validate", "--matri", "m.csv"], "--matrix"),
        (["apply", "--from", "clusters/lab", "--dry"], "--dry-run"),
        (["audit", "--frm", "clusters/lab"], "--from"),  # a typo, not a prefix
        (["init", "--from"], "--from-cluster"),
    ],
)
def test_a_prefix_or_a_typo_is_an_error_that_names_the_flag(lab: Path, argv: list[str], meant: str) -> None:
    line = one_line_error(run_main(*argv, cwd=lab))
    assert line.startswith(f"gpudrv: {argv[0]}")
    assert "unrecognized arguments: " in line and f"did you mean {meant}?" in line, line


def test_two_mistyped_flags_are_both_named(lab: Path) -> None:
    line = one_line_error(run_main("audit", "--fro", "clusters/lab", "--matrx", "m.csv", cwd=lab))
    assert "did you mean --from for --fro, --matrix for --matrx?" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["audti"], "gpudrv: unknown command 'audti'; did you mean audit? (see gpudrv --help)"),
        (["matrix", "valdate"], "gpudrv: matrix: unknown verb 'valdate'; did you mean validate?"),
        (
            ["audit", "-o", "jsn"],
            "invalid choice: 'jsn' (choose from text, json, yaml, github); did you mean json?",
        ),
        (["frobnicate"], "gpudrv: unknown command 'frobnicate' (see gpudrv --help)"),
    ],
)
def test_a_mistyped_command_or_choice_names_the_nearest(argv: list[str], expected: str) -> None:
    assert expected in one_line_error(run_main(*argv))


def test_gpudrv_alone_lists_the_commands_and_exits_2() -> None:
    result = run_gpudrv()
    assert result.returncode == 2
    assert result.stderr == "gpudrv: no command given (listed above; gpudrv COMMAND --help for one)\n"
    assert set(re.findall(r"^ {4}(\S+)", result.stdout, re.MULTILINE)) == {path[0] for path in SUBCOMMANDS}


def test_a_group_alone_lists_its_verbs() -> None:
    result = run_main("matrix")
    assert result.returncode == 2
    assert (
        result.stderr == "gpudrv: matrix: no verb given (listed above; gpudrv matrix VERB --help for one)\n"
    )
    listed = set(re.findall(r"^ {4}(\S+)", result.stdout, re.MULTILINE))
    assert listed == {path[1] for path in SUBCOMMANDS if path[0] == "matrix" and len(path) == 2}


@pytest.mark.parametrize("path", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_has_a_summary_details_and_examples(path: tuple[str, ...]) -> None:
    result = run_main(*path, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    paragraphs = result.stdout.split("\n\n")
    summary = paragraphs[1]
    assert "\n" not in summary and summary.endswith("."), summary  # one line, under the usage
    examples = result.stdout.rpartition("\nexamples:\n")[2].splitlines()
    assert examples, result.stdout
    for example in examples:
        assert example.startswith(f"  gpudrv {' '.join(path)}"), example


def examples() -> Iterator[tuple[tuple[str, ...], str]]:
    for path in [(), *SUBCOMMANDS]:
        epilog = parser_of(path).epilog or ""
        for line in epilog.splitlines()[1:]:
            yield path, line


@pytest.mark.parametrize(("path", "line"), list(examples()), ids=str)
def test_every_example_parses(path: tuple[str, ...], line: str) -> None:
    words = shlex.split(line, comments=True)
    command = words[1 : words.index(">")] if ">" in words else words[1:]
    args, extras = build_parser().parse_known_args(command)
    assert extras == [] and "handler" in args, line


# --- live-only commands --------------------------------------------------------------------------


def test_drain_given_from_says_it_reads_the_cluster() -> None:
    line = one_line_error(run_main("drain", "lab-node-1", "--from", "clusters/lab"))
    assert line == (
        "gpudrv: drain: no --from here: drain reads the live cluster, not manifests (see gpudrv drain --help)"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["drain", "n"], "gpudrv: drain reads the live cluster: no cluster configured"),
        (["status"], "gpudrv: status reads the live cluster (--from DIR is the desired state in git): no"),
        (
            ["diff", "--from", "clusters/lab"],
            "gpudrv: diff reads the live cluster (--from DIR is the desired",
        ),
        (
            ["init", "fleet", "--from-cluster", "--action", ACTION],
            "gpudrv: init --from-cluster reads the live cluster: no cluster",
        ),
        (["audit"], "gpudrv: no cluster configured: pass --kubeconfig or --context, set KUBECONFIG, or use"),
    ],
)
def test_without_a_cluster_a_live_command_says_it_reads_the_cluster(
    lab: Path, argv: list[str], expected: str
) -> None:
    line = one_line_error(run_main(*argv, cwd=lab, env={**NO_CLUSTER, "HOME": str(lab)}))
    assert line.startswith(expected), line
    assert ("--from DIR" in line.rpartition(":")[2]) == (argv == ["audit"]), line


# --- gpudrv.yaml, up to the repository root ------------------------------------------------------


def git_repository(root: Path) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fleet", "--allow-empty"]):
        subprocess.run(["git", *identity, *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def fleet_repo(lab: Path) -> Path:
    """The lab as a fleet repository: gpudrv.yaml at its root names the fleet (no matrix: the default)."""
    (lab / "gpudrv.yaml").write_text("fleet: clusters/lab\n")
    git_repository(lab)
    return lab


def test_gpudrv_yaml_is_found_from_a_subdirectory(fleet_repo: Path) -> None:
    inside = fleet_repo / "clusters/lab/nodes"
    manifests = run_main("manifests", "validate", cwd=inside)
    assert (manifests.returncode, manifests.stdout) == (0, "../../../clusters/lab: 3 Node manifests, valid\n")
    # gpudrv's default matrix is read from the repository root too, where gpudrv.yaml is.
    matrix = run_main("matrix", "validate", cwd=inside)
    assert (matrix.returncode, matrix.stdout) == (0, "../../../matrix/support-matrix.csv: 3 rows, valid\n")


def test_the_search_stops_at_the_repository_root(
    fleet_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outer = tmp_path_factory.mktemp("outer")
    (outer / "repo/sub").mkdir(parents=True)
    (outer / "gpudrv.yaml").write_text("not: a known key\n")  # would be an error if it were read
    git_repository(outer / "repo")
    result = run_main(
        "manifests", "validate", "--from", str(fleet_repo / "clusters/lab"), cwd=outer / "repo/sub"
    )
    assert result.returncode == 0, result.stderr
    # Outside any repository only the current directory counts.
    loose = tmp_path_factory.mktemp("loose")  # not inside the lab's repository
    (loose / "sub").mkdir()
    (loose / "gpudrv.yaml").write_text("not: a known key\n")
    elsewhere = run_main(
        "matrix", "validate", str(fleet_repo / "matrix/support-matrix.csv"), cwd=loose / "sub"
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    here = run_main("matrix", "validate", str(fleet_repo / "matrix/support-matrix.csv"), cwd=loose)
    assert "unknown key 'not'" in one_line_error(here)


def test_the_desired_state_commands_say_where_gpudrv_yaml_was_looked_for(lab: Path) -> None:
    line = one_line_error(run_main("diff", cwd=lab))
    assert line == (
        "gpudrv: gpudrv diff needs --from DIR (or fleet: in gpudrv.yaml): the desired state in git; "
        f"no gpudrv.yaml in {lab}"
    )
    (lab / "gpudrv.yaml").write_text("matrix: matrix/support-matrix.csv\n")
    assert one_line_error(run_main("plan", cwd=lab)).endswith("; gpudrv.yaml has no fleet:")


def test_matrix_impact_reads_gpudrv_yaml_fleet(fleet_repo: Path) -> None:
    env = {**NO_CLUSTER, "HOME": str(fleet_repo)}
    result = run_main("matrix", "impact", "--base", "main", cwd=fleet_repo / "clusters", env=env)
    assert result.returncode == 0, result.stderr
    nodes = re.findall(r"^(lab-node-\d): OK → OK ", result.stdout, re.MULTILINE)
    assert nodes == ["lab-node-0", "lab-node-1", "lab-node-2"]
    # Naming a cluster reads it instead (here: there is none to read).
    live = run_main("matrix", "impact", "--base", "main", "--context", "x", cwd=fleet_repo, env=env)
    assert "--context x: no kubeconfig" in one_line_error(live)
