"""GitHub output on plain values: escaping, which annotations are shown, the step summary and its size,
and the node manifest schema (its patterns are the core's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.adapters.ci import github
from reconciler.core.base import github_text
from reconciler.core.images import matrix, node_schema, tags
from reconciler.errors import GpudrvError
from reconciler.render import words

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas/node-manifest.schema.json").read_text())
CHECKER = node_schema.validator(SCHEMA)
# What the runner would take for a workflow command: `::` at the start of any line.
COMMAND_LINE = re.compile(r"^::", re.MULTILINE)
PAYLOADS = [
    "x\n::warning::pwned",
    "x\r::warning::pwned",
    "x\r\n::stop-commands::token",
    "%0A::set-output name=a::b",
    "a:b,c=d::error::e",
]


def lines_as_the_runner_reads(text: str) -> list[str]:
    # The runner splits on CR, LF and CRLF; splitlines() splits on those and more, so it is stricter.
    return text.splitlines()


def unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


# --- workflow commands ------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_value_can_start_a_workflow_command(payload: str) -> None:
    line = github_text.Annotation("error", f"m {payload}", f"dir/{payload}.yaml", 3, f"t {payload}").command()
    assert lines_as_the_runner_reads(line) == [line]
    assert line.startswith("::error file=dir/")
    message = line.split("::", 2)[2]
    assert unescape_data(message) == f"m {payload}"  # the value survives as data


def test_properties_cannot_add_properties() -> None:
    line = github_text.annotation("error", "m", file="a.yaml,line=99", line=3, title="t,file=x.yaml")
    assert line == "::error file=a.yaml%2Cline=99,line=3,title=t%2Cfile=x.yaml::m"


def test_percent_is_escaped_first() -> None:
    assert github_text.escape_data("%0A") == "%250A"
    assert github_text.escape_property("%3A:") == "%253A%3A"


def test_shown_puts_errors_first_and_says_how_many_more() -> None:
    notes = [github_text.Annotation("notice", f"n{i}") for i in range(3)]
    notes += [github_text.Annotation("error", f"e{i}") for i in range(25)]
    notes += [github_text.Annotation("warning", f"w{i}") for i in range(10)]
    shown = github_text.shown(notes)
    assert [note.message for note in shown[:9]] == [f"e{i}" for i in range(9)]
    assert shown[9] == github_text.Annotation("error", "16 more errors: see the job summary", title="gpudrv")
    assert [note.message for note in shown[10:20]] == [f"w{i}" for i in range(10)]  # exactly 10: all
    assert [note.message for note in shown[20:]] == ["n0", "n1", "n2"]


def test_origins_and_paths_relative_to_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    assert github_text.split_origin("clusters/a b.yaml:12") == ("clusters/a b.yaml", 12)
    assert github_text.split_origin(str(tmp_path / "x.yaml")) == (str(tmp_path / "x.yaml"), None)  # as given
    assert github_text.split_origin(None) == (None, None)
    located = github_text.at("error", "m", str(tmp_path / "x.yaml:4"), "t")
    assert github.placed(located) == github_text.Annotation("error", "m", "x.yaml", 4, "t")  # from the root
    assert github.placed(github_text.Annotation("error", "m")) == github_text.Annotation("error", "m")
    (tmp_path / "sub").mkdir()
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.chdir(tmp_path / "sub")
    assert github.workspace_path("n.yaml") == "sub/n.yaml"
    assert github.workspace_path("/elsewhere/n.yaml") == "/elsewhere/n.yaml"


def test_error_annotation_takes_the_errors_file_and_line() -> None:
    error = GpudrvError("duplicate row x (first at line 3)", file="matrix/m.csv", line=5)
    assert str(error) == "matrix/m.csv:5: duplicate row x (first at line 3)"
    located = github.error_annotation(error)
    assert (located.file, located.line, located.message) == (
        "matrix/m.csv",
        5,
        "duplicate row x (first at line 3)",
    )
    plain = github.error_annotation(
        GpudrvError("cannot reach the cluster at https://127.0.0.1:6443: refused")
    )
    assert (plain.file, plain.line) == (None, None)
    assert plain.message == "cannot reach the cluster at https://127.0.0.1:6443: refused"


def test_a_path_with_a_space_keeps_its_annotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once parsed back from the message, `my matrix/m.csv:3: ...` lost its file: no path had a space."""
    folder = tmp_path / "my matrix"
    folder.mkdir()
    (folder / "m.csv").write_text(f"{matrix.HEADER}\n550,5.15.0-1-generic,ubuntu22.04\nnot,a row\n")
    (tmp_path / "nodes").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = cli.main(["audit", "--from", "nodes", "--matrix", "my matrix/m.csv", "-o", "github"])
    out = capsys.readouterr()
    assert code == 2
    assert out.err.startswith("gpudrv: my matrix/m.csv:3: ")
    assert out.out.startswith("::error file=my matrix/m.csv,line=3,title=gpudrv::")


def test_count() -> None:
    assert (words.count(1, "row"), words.count(0, "row"), words.count(2, "row")) == (
        "1 row",
        "0 rows",
        "2 rows",
    )


# --- Markdown ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("lab-node-1", "`lab-node-1`"),
        ("a|b\nc", "`a\\|b c`"),
        ("`x`", "`` `x` ``"),
        ("<img src=x>", "`<img src=x>`"),
        ("", ""),
    ],
)
def test_code_spans(value: str, cell: str) -> None:
    assert github_text.code(value) == cell


def test_text_is_literal() -> None:
    assert github_text.text("a_b *c* [l](u) <b> | x\r\ny & z") == r"a\_b \*c\* \[l\](u) \<b\> \| x y \& z"


def test_summary_is_cut_to_its_budget_with_the_count_of_rows_left_out() -> None:
    rows = [(github_text.code(f"node-{i:05d}"), "x" * 100) for i in range(5000)]
    summary = github_text.Summary("gpudrv audit", "lead", (github_text.Table(("Node", "Why"), rows),))
    markdown = summary.markdown(budget=20_000)
    assert len(markdown.encode()) <= 20_000
    shown = [line for line in markdown.splitlines() if line.startswith("| `node-")]
    assert shown[0] == f"| `node-00000` | {'x' * 100} |"
    assert (
        markdown.splitlines()[-1]
        == f"_... and {5000 - len(shown)} more; run the command locally for the full list._"
    )
    # And never more than MAX_ROWS, however large the budget.
    big = summary.markdown(budget=10_000_000)
    assert sum(line.startswith("| `node-") for line in big.splitlines()) == github_text.MAX_ROWS


def test_append_summary_appends_once_and_respects_the_steps_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    rows = [(github_text.code(f"n{i}"), "y" * 200) for i in range(10_000)]
    summary = github_text.Summary("big", "", (github_text.Table(("N", "Y"), rows),))
    github.append_summary(summary)
    first = target.stat().st_size
    assert first <= github_text.SECTION_BUDGET
    target.write_text("z" * (github_text.SUMMARY_LIMIT - 10_000))  # a step that already wrote a lot
    github.append_summary(summary)
    assert target.stat().st_size <= github_text.SUMMARY_LIMIT
    assert "_... and " in target.read_text()[-300:]


def test_append_summary_outside_github_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    github.append_summary(github_text.Summary("x"))  # nothing to write to, nothing raised


# --- the node manifest schema ---------------------------------------------------------------------------


def test_schema_patterns_are_the_cores() -> None:
    labels = SCHEMA["$defs"]["labels"]["properties"]
    assert labels[tags.DRIVER_MAJOR]["pattern"] == tags.BRANCH_PATTERN
    assert (
        labels[tags.DRIVER_MINOR]["pattern"] == tags.BRANCH_PATTERN
    )  # digits, as core/cuda/cuda.py reads them
    assert labels[tags.DRIVER_REV]["pattern"] == tags.BRANCH_PATTERN
    assert labels[tags.KERNEL]["pattern"] == tags.KERNEL_PATTERN
    assert labels[tags.OS_ID]["pattern"] == tags.OS_RELEASE_PATTERN
    assert labels[tags.OS_VERSION_ID]["pattern"] == tags.OS_RELEASE_PATTERN
    assert labels[tags.GPU_PRESENT]["enum"] == ["true", "false"]
    required = SCHEMA["$defs"]["labels"]["then"]["required"]
    assert required == [tags.DRIVER_MAJOR, tags.KERNEL, tags.OS_ID, tags.OS_VERSION_ID]


def node(**labels: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1", "labels": labels}}


GPU = {
    tags.GPU_PRESENT: "true",
    tags.DRIVER_MAJOR: "550",
    tags.KERNEL: "5.15.0-119-generic",
    tags.OS_ID: "ubuntu",
    tags.OS_VERSION_ID: "22.04",
}


def messages(document: dict[str, object]) -> dict[tuple[str | int, ...], str]:
    return {v.path: v.message for v in node_schema.violations(document, CHECKER)}


def test_a_lab_node_is_valid() -> None:
    assert messages(node(**GPU, **{"kubernetes.io/hostname": "n-1", "type": "kwok"})) == {}


def test_a_cpu_node_needs_no_driver_labels() -> None:
    assert messages(node(**{tags.GPU_PRESENT: "false"})) == {}
    assert messages(node()) == {}


def test_each_value_at_fault_once_with_the_labels_own_rule() -> None:
    labels = {**GPU, tags.DRIVER_MAJOR: "55O", tags.DRIVER_REV: 7, tags.KERNEL: "5.15\n"}
    found = messages(node(**labels))
    path = ("metadata", "labels")
    assert found == {
        (*path, tags.DRIVER_MAJOR): f"label {tags.DRIVER_MAJOR}='55O': "
        'the driver branch is digits only, like "550" (quoted, so YAML keeps it a string)',
        (*path, tags.DRIVER_REV): f'label {tags.DRIVER_REV} must be a string; quote it: "7"',
        # '$' in Python would accept the final newline; JSON Schema's (ECMA's) does not.
        (*path, tags.KERNEL): f"label {tags.KERNEL}='5.15\\n': "
        + SCHEMA["$defs"]["labels"]["properties"][tags.KERNEL]["description"],
    }


def test_missing_labels_keys_and_names() -> None:
    labels = {key: value for key, value in GPU.items() if key != tags.KERNEL}
    document = node(**labels, **{"bad key!": "v"})
    document["metadata"]["name"] = "Bad_Name"  # type: ignore[index]
    found = messages(document)
    assert found[("metadata", "labels", tags.KERNEL)].startswith(
        f"label {tags.KERNEL} is missing: a GPU node"
    )
    assert found[("metadata", "labels", "bad key!")].startswith("label key 'bad key!': a label key is")
    assert found[("metadata", "name")].startswith("metadata.name 'Bad_Name': a node name is a DNS subdomain")


def test_label_values_as_the_api_server_takes_them() -> None:
    assert messages(node(team="a" * 63)) == {}
    assert ("metadata", "labels", "team") in messages(node(team="a" * 64))
    assert ("metadata", "labels", "team") in messages(node(team="-a"))
    assert ("metadata", "labels", "team") in messages(node(team=True))
