"""`gpudrv init`: the fleet repository it writes passes gpudrv's own checks, pins one gpudrv commit
everywhere, and nothing already there is ever overwritten (exit 2 naming the file, nothing written)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler import __version__
from reconciler.adapters.files import scaffold
from tests.conftest import REPO, run_main

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ACTION = f"example/gpudrv@{COMMIT}"
FILES = [
    "gpudrv.yaml",
    "matrix/support-matrix.csv",
    "clusters/prod/cluster-policy.yaml",
    "clusters/prod/nodes/gpu-node-0.yaml",
    "clusters/prod/nvidiadriver-ubuntu22.04.yaml",
    ".github/workflows/apply.yml",
    ".github/workflows/audit.yml",
    ".github/workflows/build.yml",
    ".github/workflows/pr.yml",
    ".pre-commit-config.yaml",
]


def files_under(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_init_writes_a_fleet_repository_that_passes_its_checks(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    result = run_main("init", str(fleet), "--action", ACTION)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[:12] == [
        f"gpudrv init: a fleet repository in {fleet}, checked by gpudrv {__version__} ({ACTION})",
        *(f"  {name}" for name in FILES),
        "1 GPU node (an example), 1 matrix row",
    ]
    # The secrets the workflows need, build.yml's too, among the next steps.
    assert (
        "  environment registry-push, secret REGISTRY_AUTH: for build.yml, a docker config.json"
        in result.stdout
    )
    assert files_under(fleet) == set(FILES)
    assert (fleet / "matrix/support-matrix.csv").read_text() == (
        "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n"
    )
    # The checks of the PR check, from the fleet repository's root (its gpudrv.yaml is read there).
    for command in (("matrix", "validate"), ("manifests", "validate"), ("audit", "--from", "clusters/prod")):
        check = run_main(*command, cwd=fleet)
        assert (check.returncode, check.stderr) == (0, ""), command
    audited = run_main("audit", "--from", "clusters/prod", cwd=fleet).stdout
    assert audited == "OK: 1 GPU node, 1 image in matrix/support-matrix.csv\n"
    assert run_main("manifests", "validate", cwd=fleet).stdout == "clusters/prod: 1 Node manifest, valid\n"


def test_one_gpudrv_commit_everywhere(tmp_path: Path) -> None:
    assert run_main("init", str(tmp_path), "--action", ACTION).returncode == 0
    yaml = YAML(typ="safe")
    for name in ("pr.yml", "audit.yml", "apply.yml", "build.yml"):
        text = (tmp_path / ".github/workflows" / name).read_text()
        flow = yaml.load(text)
        uses = [step["uses"] for job in flow["jobs"].values() for step in job["steps"] if "uses" in step]
        assert {use for use in uses if not use.startswith("actions/")} == {ACTION}
        assert f"uses: {ACTION} # v{__version__}\n" in text
        assert flow["permissions"] == {"contents": "read"}
    # The hooks are local: the gpudrv on PATH, the version the workflows pin (named in the comment).
    text = (tmp_path / ".pre-commit-config.yaml").read_text()
    assert f"gpudrv v{__version__}, the one the workflows pin: {ACTION}" in text
    [hooks] = yaml.load(text)["repos"]
    assert hooks["repo"] == "local"
    published = yaml.load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [hook["id"] for hook in hooks["hooks"]] == [hook["id"] for hook in published]
    for hook in hooks["hooks"]:
        assert (hook["language"], hook["pass_filenames"]) == ("system", False)
        assert hook["entry"].split()[0] == "gpudrv"
    config = yaml.load((tmp_path / "gpudrv.yaml").read_text())
    assert config == {"fleet": "clusters/prod", "matrix": "matrix/support-matrix.csv"}


def test_the_scaffold_pins_the_same_actions_as_this_repository(tmp_path: Path) -> None:
    """One checkout pin for this repository's workflows and the ones init writes: bumped together."""
    assert run_main("init", str(tmp_path), "--action", ACTION).returncode == 0

    def pins(folder: Path) -> set[str]:
        return {
            line.split("uses: ", 1)[1]
            for path in folder.glob("*.yml")
            for line in path.read_text().splitlines()
            if "uses: actions/" in line
        }

    # Every action both use is pinned alike (this repository also uploads its fleet page; only the
    # scaffold's build.yml downloads artifacts).
    ours = {pin.split("@", 1)[0]: pin for pin in pins(REPO / ".github/workflows")}
    theirs = pins(tmp_path / ".github/workflows")
    assert {pin for pin in theirs if pin.split("@", 1)[0] in ours} <= set(ours.values())
    assert {pin.split("@", 1)[0] for pin in theirs} - set(ours) == {"actions/download-artifact"}
    assert any("actions/checkout@" in pin for pin in pins(tmp_path / ".github/workflows"))


def test_name_and_folder(tmp_path: Path) -> None:
    result = run_main("init", "--name", "gpu-east", "--action", ACTION, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "clusters/gpu-east/nodes/gpu-node-0.yaml" in files_under(tmp_path)
    assert "args: --from clusters/gpu-east\n" in (tmp_path / ".github/workflows/pr.yml").read_text()


@pytest.mark.parametrize(
    "taken", ["gpudrv.yaml", ".github/workflows/audit.yml", "clusters/prod/nodes/gpu-node-0.yaml"]
)
def test_nothing_is_overwritten_and_nothing_is_written(tmp_path: Path, taken: str) -> None:
    (tmp_path / taken).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / taken).write_text("mine\n")
    before = files_under(tmp_path)
    result = run_main("init", str(tmp_path), "--action", ACTION)
    assert result.returncode == 2
    assert result.stderr == (
        f"gpudrv: {tmp_path / taken}: already exists; gpudrv init never overwrites, it wrote nothing\n"
    )
    assert files_under(tmp_path) == before
    assert (tmp_path / taken).read_text() == "mine\n"


def test_a_second_init_names_the_first_file_and_how_many_more(tmp_path: Path) -> None:
    assert run_main("init", str(tmp_path), "--action", ACTION).returncode == 0
    result = run_main("init", str(tmp_path), "--action", ACTION)
    assert result.returncode == 2
    assert result.stderr == (
        f"gpudrv: {tmp_path / 'gpudrv.yaml'}: already exists (and 9 more); gpudrv init never overwrites, "
        "it wrote nothing\n"
    )


def test_a_file_where_a_folder_must_go(tmp_path: Path) -> None:
    (tmp_path / "matrix").write_text("not a folder\n")
    result = run_main("init", str(tmp_path), "--action", ACTION)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"gpudrv: {tmp_path / 'matrix'}: exists and is not a directory; gpudrv init wrote nothing\n"
    )
    assert files_under(tmp_path) == {"matrix"}


def test_a_write_that_fails_midway_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = Path.open

    def failing_open(self: Path, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if mode == "x" and self.name == "pr.yml":
            raise OSError(28, "No space left on device", str(self))
        return real_open(self, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", failing_open)
    result = run_main("init", str(tmp_path / "fleet"), "--action", ACTION)
    assert result.returncode == 2
    assert result.stderr == (
        f"gpudrv: {tmp_path / 'fleet/.github/workflows/pr.yml'}: cannot write: No space left on device; "
        "gpudrv init wrote nothing\n"
    )
    assert not (tmp_path / "fleet").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--action", "example/gpudrv@v0.1.0"], "--action 'example/gpudrv@v0.1.0': give OWNER/NAME@COMMIT"),
        (["--action", ACTION, "--name", "Prod_1"], "--name 'Prod_1': a cluster's folder name is a DNS label"),
        (
            ["--action", ACTION, "--context", "kind"],
            "--kubeconfig and --context read a cluster: add --from-cluster",
        ),
        (["--action", ""], "--action: empty OWNER/NAME@COMMIT (is a variable unset?)"),
    ],
)
def test_bad_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_main("init", str(tmp_path), *args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"gpudrv: {message}")
    assert files_under(tmp_path) == set()


def test_the_pin_comes_from_the_build_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "_build.json"
    monkeypatch.setattr(scaffold, "BUILD_RECORD", record)
    monkeypatch.setattr(scaffold.build_record, "__defaults__", (record,))
    fleet = tmp_path / "fleet"

    missing = run_main("init", str(fleet))
    assert missing.returncode == 2
    assert "carries no record of the commit it was built from" in missing.stderr
    assert "pass --action OWNER/NAME@COMMIT" in missing.stderr

    record.write_text(json.dumps({"repository": None, "commit": COMMIT, "dirty": False}))
    unknown = run_main("init", str(fleet))
    assert unknown.returncode == 2
    assert unknown.stderr.endswith(f"pass --action OWNER/NAME@{COMMIT}\n")

    record.write_text(json.dumps({"repository": "acme/gpudrv", "commit": COMMIT, "dirty": True}))
    made = run_main("init", str(fleet))
    assert made.returncode == 0
    assert made.stderr == (
        f"gpudrv init: warning: this gpudrv was built with uncommitted changes on top of {COMMIT}; "
        "the workflows run that commit, without them\n"
    )
    assert f"uses: acme/gpudrv@{COMMIT} # v{__version__}" in (fleet / ".github/workflows/pr.yml").read_text()


def test_init_is_listed_in_help() -> None:
    result = run_main("--help")
    assert re.search(r"^    init ", result.stdout, re.MULTILINE)
