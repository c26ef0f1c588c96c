"""Issue 12, item 3: no untrusted string becomes a workflow command in GitHub Actions, whatever it holds
(`::`, `%`, CR, LF, unicode line and paragraph separators, NEL, `##[`), wherever it comes from:
a hostile API server (its URL, its error messages, node names, label keys, kernel values), git refs,
matrix path names. tests/cli/test_workflow_commands.py covers matrix cells and manifest values the same
way. Every run is in-process, with GITHUB_ACTIONS=true (-o github wherever a command has it)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import cli
from tests.cli.test_workflow_commands import PIECES, assert_outcome
from tests.conftest import REPO, git
from tests.hostile.fake_api import Answer, FakeApi, Request

BOUNDED = settings(max_examples=15, deadline=None, database=None)
MORE = ("\x85", "\u2028::warning::", "\u2029", "\x0b::", "\x0c", "%25", "%0D%0A::error::", "::add-mask::")
untrusted = st.lists(st.sampled_from((*PIECES, *MORE)), min_size=1, max_size=10).map("".join)
GPU = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.driver.rev": "07",
    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-119-generic",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}


@contextlib.contextmanager
def in_actions() -> Iterator[tuple[Path, pytest.MonkeyPatch]]:
    with tempfile.TemporaryDirectory() as name, pytest.MonkeyPatch.context() as patch:
        root = Path(name)
        patch.setenv("GITHUB_ACTIONS", "true")
        patch.setenv("GITHUB_STEP_SUMMARY", str(root / "summary.md"))
        patch.setenv("GITHUB_WORKSPACE", str(root))
        patch.setenv("HOME", str(root))
        patch.delenv("KUBECONFIG", raising=False)
        patch.chdir(root)
        shutil.copytree(REPO / "matrix", root / "matrix")
        shutil.copytree(REPO / "clusters" / "lab", root / "clusters" / "lab")
        yield root, patch


def gpudrv(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


class Hostile:
    """A fake API server whose answers the test changes between examples."""

    def __init__(self) -> None:
        self.answer: Any = lambda request: Answer(body=b"{}")
        self.fake = FakeApi(self.respond)

    def respond(self, request: Request) -> Answer:
        answer: Answer = self.answer(request)
        return answer

    def nodes(self, items: list[dict[str, Any]]) -> None:
        def answer(request: Request) -> Answer:
            if request.path.startswith("/api/v1/nodes"):
                if request.path != "/api/v1/nodes":  # one node by name
                    return Answer(body=json.dumps(items[0] if items else {}).encode())
                return Answer(body=json.dumps({"items": items, "metadata": {}}).encode())
            if "/apis/nvidia.com/" in request.path:
                return Answer(status=404, body=b'{"kind": "Status", "code": 404}')
            return Answer(body=b'{"items": [], "metadata": {}}')

        self.answer = answer


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    with server.fake:
        yield server


LIVE = [
    ["audit"],
    ["audit", "-o", "json"],
    ["audit", "-o", "yaml"],
    ["status"],
    ["status", "-o", "yaml"],
    ["report"],
    ["report", "-o", "yaml"],
    ["explain", "-n", "x"],
    ["explain", "-n", "x", "-o", "yaml"],
    ["tag", "n"],
    ["preflight", "--kernel", "6.8.0-60-generic"],
    ["preflight", "--kernel", "6.8.0-60-generic", "-o", "yaml"],
]


@BOUNDED
@given(name=untrusted, key=untrusted, kernel=untrusted)
def test_node_names_label_keys_and_kernels_from_a_hostile_server(
    hostile: Hostile, name: str, key: str, kernel: str
) -> None:
    hostile.nodes(
        [
            {"metadata": {"name": name, "labels": {**GPU, key: "v"}}},
            {
                "metadata": {
                    "name": "n",
                    "labels": {**GPU, "feature.node.kubernetes.io/kernel-version.full": kernel},
                }
            },
            {"metadata": {"name": "next", "labels": {**GPU, "gpudrv.dev/kernel-version.next": kernel}}},
        ]
    )
    with in_actions() as (root, _):
        config = hostile.fake.kubeconfig(root / "kubeconfig")
        for command in LIVE:
            outcome = gpudrv(*command, "--kubeconfig", str(config))
            assert_outcome(*outcome, json_output="json" in command, yaml_output="yaml" in command)
        assert_outcome(*gpudrv("diff", "--from", "clusters/lab", "--kubeconfig", str(config)))


@BOUNDED
@given(message=untrusted, status=st.sampled_from([401, 403, 404, 409, 500, 503]))
def test_the_servers_error_messages(hostile: Hostile, message: str, status: int) -> None:
    body = json.dumps({"kind": "Status", "message": message, "details": {"causes": [{"message": message}]}})
    hostile.answer = lambda request: Answer(status=status, body=body.encode())
    with in_actions() as (root, _):
        config = hostile.fake.kubeconfig(root / "kubeconfig")
        for command in [["audit"], ["status"], ["drain", "n"], ["explain", "pod/p", "-n", "x"]]:
            code, out, err = gpudrv(*command, "--kubeconfig", str(config), "--request-timeout", "2s")
            assert code == 2
            assert_outcome(code, out, err)


@BOUNDED
@given(server=untrusted)
def test_the_servers_url(server: str) -> None:
    with in_actions() as (root, _):
        config = root / "kubeconfig"
        # JSON's string escapes are YAML's double-quoted ones: the URL written exactly.
        config.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: c\n  cluster: {{server: {json.dumps('https://127.0.0.1:9/' + server)}}}\n"
            "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
            "users:\n- name: u\n  user: {token: t}\n"
        )
        for command in [["audit"], ["report"], ["diff", "--from", "clusters/lab"]]:
            code, out, err = gpudrv(*command, "--kubeconfig", str(config), "--request-timeout", "2s")
            assert code == 2
            assert_outcome(code, out, err)


@BOUNDED
@given(ref=untrusted)
def test_git_refs(ref: str) -> None:
    with in_actions() as (root, _):
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "lab")
        for output in ("github", "text", "json", "markdown"):
            assert_outcome(
                *gpudrv("matrix", "impact", "--base", ref, "--from", "clusters/lab", "-o", output),
                json_output=output == "json",
            )
        assert_outcome(*gpudrv("plan", "--from", "clusters/lab", "--merged-ref", ref))
        assert_outcome(*gpudrv("apply", "--from", "clusters/lab", "--merged-ref", ref, "--dry-run"))


@BOUNDED
@given(folder=untrusted.map(lambda text: text.replace("/", "_")[:80]))
def test_matrix_path_names(folder: str) -> None:
    with in_actions() as (root, _):
        place = root / folder
        place.mkdir(parents=True, exist_ok=True)
        bad = place / f"{folder}.csv"
        bad.write_text("driver_branch,kernel,os_tag\n550,x y,ubuntu22.04\n")
        good = place / "m.csv"
        shutil.copy(root / "matrix" / "support-matrix.csv", good)
        for path in (str(bad), str(good), str(place / "missing.csv")):
            assert_outcome(*gpudrv("matrix", "validate", path))
            assert_outcome(*gpudrv("audit", "--from", "clusters/lab", "--matrix", path))
            assert_outcome(
                *gpudrv("matrix", "add", "--matrix", path, "550", "5.15.0-1-generic", "ubuntu22.04")
            )
