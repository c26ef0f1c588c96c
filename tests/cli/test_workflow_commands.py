"""Issue 18, item 2 and issue 30, item 0: no untrusted value becomes a workflow command, in either
form (`::name::` at the start of a line, `##[name]` anywhere in one), on stdout or stderr, in every
output mode, with GITHUB_ACTIONS=true or without it (a container step does not pass it). Values are
generated (hypothesis) and put in matrix cells, node names, label keys and values, and file names;
gpudrv runs in-process (reconciler.cli.main) to keep this fast, plus a few runs of the real entry
point."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import cli
from reconciler.core.base import github_text
from tests.conftest import REPO, run_gpudrv

BOUNDED = settings(max_examples=40, deadline=None, database=None)
HEADER = "driver_branch,kernel,os_tag"
PIECES = ("::", ":", "##[", "#", "[", "]", "%", "\r", "\n", "\r\n", "\u2028", "\u2029", " ", "  ", "\t",
          "warning", "stop-commands]t", "error::x", "add-mask]", "x", ",", "%0A", "'", '"', "\\",
          "\u00ad", "\u200b")  # fmt: skip
untrusted = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)
# A file name: no slash or NUL, and short enough for any file system.
file_names = untrusted.map(lambda text: text.replace("/", "_")[:100])

OWN_ANNOTATION = re.compile(r"::(error|warning|notice)( [^:]*)?::")
LEADING_COMMAND = re.compile(r"^\s*::")
INVISIBLE = re.compile(f"[{github_text.IGNORABLE}]")  # what the runner's comparison may skip
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
HOSTILE_OUTPUT = "x\n::warning::argparse ##[error]y"


def assert_no_injected_command(out: str, err: str) -> None:
    """The runner splits lines at LF, CR and CRLF: no such line holds `##[`, and none starts with `::`
    after blanks, except gpudrv's own annotations on stdout, each a whole LF-terminated line."""
    for stream, text in (("stdout", out), ("stderr", err)):
        for line in text.split("\n"):
            if stream == "stdout" and line.startswith("::"):
                assert OWN_ANNOTATION.match(line), line
                assert "\r" not in line, line
                assert "##[" not in line, line
                continue
            for piece in line.split("\r"):
                visible = INVISIBLE.sub("", piece)
                assert "##[" not in visible, (stream, piece)
                assert LEADING_COMMAND.match(visible) is None, (stream, piece)


def assert_outcome(
    code: int, out: str, err: str, json_output: bool = False, yaml_output: bool = False
) -> None:
    assert code in (0, 1, 2), (code, out, err)
    assert_no_injected_command(out, err)
    assert "Traceback" not in err
    if err:  # an error: one line (exit 2 alone may also be findings on stdout, as in validate)
        assert code == 2, (code, err)
        lines = re.split(r"\r\n|\r|\n", err.rstrip("\n"))
        assert len(lines) == 1, err
        assert lines[0].startswith("gpudrv: "), err
    elif json_output and code != 2:
        json.loads(out)
    elif yaml_output and code != 2:
        assert isinstance(yaml.safe_load(out), dict), out


@contextlib.contextmanager
def in_actions(actions: bool = True) -> Iterator[tuple[Path, pytest.MonkeyPatch]]:
    """A fresh workspace, the current directory, with GitHub Actions' variables set (`actions`) or
    none of them (a container step, or another CI)."""
    with tempfile.TemporaryDirectory() as name, pytest.MonkeyPatch.context() as patch:
        root = Path(name)
        if actions:
            patch.setenv("GITHUB_ACTIONS", "true")
            patch.setenv("GITHUB_STEP_SUMMARY", str(root / "summary.md"))
            patch.setenv("GITHUB_WORKSPACE", str(root))
        else:
            for variable in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
                patch.delenv(variable, raising=False)
        patch.delenv("KUBECONFIG", raising=False)
        patch.chdir(root)
        shutil.copytree(REPO / "matrix", root / "matrix")
        yield root, patch


def gpudrv(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def write_node(folder: Path, file_name: str, name: str, key: str, value: str) -> None:
    """A GPU node whose name, one label key and value, kernel label and file name are untrusted, and
    a Pod that selects the untrusted label (explain quotes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        KERNEL: value,
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        key: value,
    }
    # JSON's string escapes are YAML's double-quoted ones: any value, written exactly.
    lines = ["apiVersion: v1", "kind: Node", "metadata:", f"  name: {json.dumps(name)}", "  labels:"]
    lines += [f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in labels.items()]
    pod = ["---", "apiVersion: v1", "kind: Pod", "metadata:", f"  name: {json.dumps(name)}", "spec:"]
    pod += ["  containers: [{name: c, image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04'}]"]
    pod += [f"  nodeSelector: {{{json.dumps(key)}: {json.dumps(value)}}}"]
    (folder / f"{file_name}.yaml").write_text("\n".join(lines + pod) + "\n")


@BOUNDED
@given(cell=untrusted, actions=st.booleans())
def test_matrix_cells(cell: str, actions: bool) -> None:
    with in_actions(actions) as (root, _):
        bad = root / "bad.csv"
        bad.write_text(f"{HEADER}\n550,{cell},ubuntu22.04\n{cell}\n")
        for output in ("text", "github"):
            assert_outcome(*gpudrv("matrix", "validate", str(bad), "-o", output))
        assert_outcome(*gpudrv("audit", "--from", str(root / "none"), "--matrix", str(bad)))
        assert_outcome(*gpudrv("matrix", "add", "--matrix", "matrix/support-matrix.csv", f"--tag={cell}"))
        assert_outcome(*gpudrv("matrix", "add", "--matrix", str(bad), "--", "550", cell, "ubuntu22.04"))
        assert_outcome(*gpudrv("matrix", "add", "--", "550", cell, "ubuntu22.04"))


@BOUNDED
@given(file_name=file_names, name=untrusted, key=untrusted, value=untrusted, actions=st.booleans())
def test_manifest_values(file_name: str, name: str, key: str, value: str, actions: bool) -> None:
    with in_actions(actions) as (root, _):
        fleet = root / "fleet"
        write_node(fleet, file_name, name, key, value)
        for output in ("text", "json", "yaml", "github"):
            data = {"json_output": output == "json", "yaml_output": output == "yaml"}
            assert_outcome(*gpudrv("audit", "--from", str(fleet), "-o", output), **data)
            assert_outcome(*gpudrv("explain", "--from", str(fleet), "-o", output), **data)
            assert_outcome(*gpudrv("manifests", "validate", "--from", str(fleet), "-o", output), **data)
        assert_outcome(*gpudrv("tag", "--from", str(fleet), "--", name))
        assert_outcome(*gpudrv("tag", "--from", str(fleet), "-o", "yaml", "--", name), yaml_output=True)


@BOUNDED
@given(file_name=file_names, value=untrusted, actions=st.booleans())
def test_broken_manifests(file_name: str, value: str, actions: bool) -> None:
    """Errors that quote a file name or a YAML problem: one line on stderr, an annotation on stdout."""
    with in_actions(actions) as (root, _):
        fleet = root / "fleet"
        fleet.mkdir()
        (fleet / f"{file_name}.yaml").write_text(f"kind: Node\nmetadata: {{name: {value}\n")
        for output in ("text", "json", "github"):
            assert_outcome(*gpudrv("audit", "--from", str(fleet), "-o", output), json_output=output == "json")
        for output in ("text", "github"):
            assert_outcome(*gpudrv("manifests", "validate", "--from", str(fleet), "-o", output))
        assert_outcome(*gpudrv("tag", "--from", str(fleet / value), "--", value))


def test_stop_commands_in_a_matrix_cell_through_the_real_entry_point(lab: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(lab / "s.md"), "GITHUB_WORKSPACE": str(lab)}
    matrix = lab / "matrix/support-matrix.csv"
    matrix.write_text(f"{HEADER}\n550,##[stop-commands]tok,ubuntu22.04\n  ::warning::x\n")
    for output in ("text", "github"):
        result = run_gpudrv("matrix", "validate", "-o", output, cwd=lab, env=env)
        assert result.returncode == 2
        assert "##\\[stop-commands]tok" in result.stdout
        assert_no_injected_command(result.stdout, result.stderr)
    result = run_gpudrv("audit", "--from", "clusters/lab", cwd=lab, env=env)
    assert_outcome(result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith("gpudrv: matrix/support-matrix.csv:2: ")
    assert "##\\[stop-commands]tok" in result.stderr
    assert result.stdout.startswith("::error file=matrix/support-matrix.csv,line=2,title=gpudrv::")
    result = run_gpudrv("matrix", "add", "--tag=550-##[add-mask]-ubuntu22.04", cwd=lab, env=env)
    assert_outcome(result.returncode, result.stdout, result.stderr)
    assert "##\\[add-mask]" in result.stderr


def test_json_output_in_actions_is_json_with_the_same_values(lab: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(lab)}
    node = lab / "clusters/lab/nodes/lab-node-0.yaml"
    node.write_text(node.read_text().replace('"5.15.0-119-generic"', '"##[stop-commands]t"'))
    result = run_gpudrv("audit", "--from", "clusters/lab", "-o", "json", cwd=lab, env=env)
    assert result.returncode == 1, result.stderr
    assert "##\\u005bstop-commands]t" in result.stdout
    assert "##[stop-commands]t" in json.dumps(json.loads(result.stdout))
    assert_no_injected_command(result.stdout, result.stderr)


@pytest.mark.parametrize("actions", ["", None])
def test_outside_actions_the_same_guard(lab: Path, actions: str | None) -> None:
    # A container step does not pass GITHUB_ACTIONS (None: unset), yet the runner reads its lines.
    env = {} if actions is None else {"GITHUB_ACTIONS": actions}
    matrix = lab / "matrix/support-matrix.csv"
    matrix.write_text(f"{HEADER}\n550,##[stop-commands]tok,ubuntu22.04\n  ::warning::x\n")
    result = run_gpudrv("matrix", "validate", "-o", "text", cwd=lab, env=env)
    assert "kernel '##\\[stop-commands]tok'" in result.stdout
    assert_no_injected_command(result.stdout, result.stderr)
    result = run_gpudrv("matrix", "add", "--tag=550-##[x]-ubuntu22.04", cwd=lab, env=env)
    assert result.stderr.startswith("gpudrv: refused 550,##\\[x],ubuntu22.04: ")
    result = run_gpudrv("matrix", "validate", "-o", "json", cwd=lab, env=env)
    assert "##\\u005bstop-commands]tok" in result.stdout  # JSON stays JSON
    assert "##[stop-commands]tok" in json.dumps(json.loads(result.stdout))
    assert_no_injected_command(result.stdout, result.stderr)
    result = run_gpudrv("audit", "--from", "clusters/lab", "-o", HOSTILE_OUTPUT, cwd=lab, env=env)
    assert result.returncode == 2  # argparse's own usage error quotes the value: guarded too
    assert_no_injected_command(result.stdout, result.stderr)
