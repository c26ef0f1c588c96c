"""Every bad input: one clear line on stderr, exit 2, no traceback, files untouched.

In-process through main(); the unknown node (the console script) and the import check (`python -X
importtime -m reconciler`) run a real process."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_gpudrv, run_main

MATRIX = "matrix/support-matrix.csv"


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpudrv: ")
    for fragment in fragments:
        assert fragment in lines[0]


def edit_label(lab: Path, node: str, key: str, value: str | None) -> None:
    path = lab / f"clusters/lab/nodes/{node}.yaml"
    lines = [line for line in path.read_text().splitlines() if not line.strip().startswith(f"{key}:")]
    if value is not None:
        lines.insert(lines.index("  labels:") + 1, f'    {key}: "{value}"')
    path.write_text("\n".join(lines) + "\n")


def test_unknown_node(lab: Path) -> None:
    # The real entry point: a GpudrvError is one line and exit 2 from the console script too.
    assert_one_line_error(
        run_gpudrv("tag", "lab-node-9", "--from", "clusters/lab", cwd=lab), "node lab-node-9 not found"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "node lab-node-1: label nvidia.com/cuda.driver.major is missing"),
        ("", "node lab-node-1: label nvidia.com/cuda.driver.major is empty"),
        ("5x0", "node lab-node-1: label nvidia.com/cuda.driver.major='5x0' is not a driver branch"),
    ],
)
def test_tag_with_bad_driver_label(lab: Path, value: str | None, expected: str) -> None:
    edit_label(lab, "lab-node-1", "nvidia.com/cuda.driver.major", value)
    assert_one_line_error(run_main("tag", "lab-node-1", "--from", "clusters/lab", cwd=lab), expected)


def test_tag_with_whitespace_in_kernel(lab: Path) -> None:
    edit_label(lab, "lab-node-0", "feature.node.kubernetes.io/kernel-version.full", "5.15.0 119")
    result = run_main("tag", "lab-node-0", "--from", "clusters/lab", cwd=lab)
    assert_one_line_error(result, "lab-node-0", "feature.node.kubernetes.io/kernel-version.full='5.15.0 119'")


def test_audit_with_a_malformed_matrix(lab: Path) -> None:
    with (lab / MATRIX).open("a") as handle:
        handle.write("550,5.15.0-119-generic\nx,5.15.0-1-generic,ubuntu22.04\n")
    result = run_main("audit", "--from", "clusters/lab", cwd=lab)
    assert_one_line_error(
        result, f"{MATRIX}:5: expected 3 fields", "(and 1 more; run gpudrv matrix validate)"
    )
    assert result.stdout == ""


def test_audit_with_missing_matrix_and_missing_dir(lab: Path) -> None:
    assert_one_line_error(
        run_main("audit", "--from", "clusters/lab", "--matrix", "nope.csv", cwd=lab),
        "nope.csv: no such file",
    )
    assert_one_line_error(run_main("audit", "--from", "nowhere", cwd=lab), "nowhere: no such directory")


def test_audit_with_malformed_yaml(lab: Path) -> None:
    (lab / "clusters/lab/nodes/broken.yaml").write_text("kind: Node\nmetadata:\n  name: [oops\n")
    assert_one_line_error(
        run_main("audit", "--from", "clusters/lab", cwd=lab), "broken.yaml:", "invalid YAML"
    )


def test_matrix_validate_lists_every_problem(lab: Path) -> None:
    with (lab / MATRIX).open("a") as handle:
        handle.write("535,5.15.0-107-generic,ubuntu22.04\n\nr550,6.8.0-45-generic,ubuntu24.04\n")
    result = run_main("matrix", "validate", cwd=lab)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{MATRIX}:5: duplicate row 535,5.15.0-107-generic,ubuntu22.04 (first at line 3)",
        f"{MATRIX}:7: driver_branch 'r550': a driver branch is digits only, like 550",
    ]
    assert "Traceback" not in result.stderr


def test_matrix_validate_refuses_what_the_operator_and_nfd_never_make(lab: Path) -> None:
    with (lab / MATRIX).open("a") as handle:
        handle.write(
            "550,5.15.0-119-generic,ubuntu-22.04\n550,5.15,ubuntu22.04\n550,6.8.0-45-generic,24.04\n"
        )
    result = run_main("matrix", "validate", cwd=lab)
    assert result.returncode == 2
    assert [line.split(": ", 2)[:2] for line in result.stdout.splitlines()] == [
        [f"{MATRIX}:5", "os_tag 'ubuntu-22.04'"],
        [f"{MATRIX}:6", "kernel '5.15'"],
        [f"{MATRIX}:7", "os_tag '24.04'"],
    ]


def test_matrix_validate_ok_with_path_argument(lab: Path) -> None:
    result = run_main("matrix", "validate", str(lab / MATRIX))
    assert (result.returncode, result.stdout) == (0, f"{lab / MATRIX}: 3 rows, valid\n")
    assert_one_line_error(run_main("matrix", "validate", "missing.csv", cwd=lab), "missing.csv: no such file")


def test_matrix_add_appends_and_keeps_bytes(lab: Path) -> None:
    path = lab / MATRIX
    original = b"driver_branch,kernel,os_tag\r\n550,5.15.0-119-generic,ubuntu22.04\r\n"
    original += b"\r\n535,5.15.0-107-generic,ubuntu22.04"
    path.write_bytes(original)
    before = sorted(p.name for p in path.parent.iterdir())
    result = run_main("matrix", "add", "--tag", "550-5.15.0-107-generic-ubuntu22.04", cwd=lab)
    assert result.returncode == 0, result.stderr
    row, tag = "550,5.15.0-107-generic,ubuntu22.04", "550-5.15.0-107-generic-ubuntu22.04"
    assert result.stdout == f"added {row} at {MATRIX}:5 (image tag {tag})\n"
    assert path.read_bytes() == original + b"\r\n550,5.15.0-107-generic,ubuntu22.04\r\n"
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no temporary file left


def test_matrix_add_existing_row_is_reported_and_untouched(lab: Path) -> None:
    path = lab / MATRIX
    before = path.read_bytes()
    before_stat = path.stat()
    result = run_main("matrix", "add", "535", "5.15.0-107-generic", "ubuntu22.04", cwd=lab)
    assert (result.returncode, result.stdout) == (
        0,
        f"535,5.15.0-107-generic,ubuntu22.04 is already in {MATRIX} at line 3; file unchanged\n",
    )
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == before_stat.st_mtime_ns


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["55o", "5.15.0-107-generic", "ubuntu22.04"],
            "refused 55o,5.15.0-107-generic,ubuntu22.04: driver_branch '55o'",
        ),
        (["550", "5.15.0 107", "ubuntu22.04"], "kernel '5.15.0 107'"),
        (["550", "5.15.0-107-generic", "Ubuntu22.04"], "os_tag 'Ubuntu22.04'"),
        (["550", "5.15.0-107-generic", ""], "os_tag is empty"),
        (["--tag", "550ubuntu"], "is not <driver-branch>-<kernel>-<os-tag>"),
        (["--tag", "x-5.15-ubuntu22.04"], "driver_branch 'x'"),
        # issue 38: an os tag the GPU Operator never makes, a kernel NFD never reports
        (
            ["550", "5.15.0-119-generic", "ubuntu-22.04"],
            "os_tag 'ubuntu-22.04': an os tag is <ID><VERSION_ID",
        ),
        (["550", "5.15.0-119-generic", "22.04"], "os_tag '22.04': an os tag is <ID><VERSION_ID>"),
        (["550", "5.15", "ubuntu22.04"], "kernel '5.15': a kernel is a release as NFD"),
        (["550", "garbage", "ubuntu22.04"], "kernel 'garbage'"),
        (["--tag", "550-5.15.0-119-generic-ubuntu-22.04"], "os_tag '22.04'"),
    ],
)
def test_matrix_add_refuses_invalid_rows(lab: Path, args: list[str], fragment: str) -> None:
    before = (lab / MATRIX).read_bytes()
    assert_one_line_error(run_main("matrix", "add", *args, cwd=lab), fragment)
    assert (lab / MATRIX).read_bytes() == before


def test_matrix_add_refuses_when_the_matrix_is_broken(lab: Path) -> None:
    path = lab / MATRIX
    path.write_text("kernel,driver_branch,os_tag\n")
    result = run_main("matrix", "add", "550", "5.15.0-107-generic", "ubuntu22.04", cwd=lab)
    assert_one_line_error(result, f"{MATRIX}:1: the header must be exactly")
    assert path.read_text() == "kernel,driver_branch,os_tag\n"


def test_matrix_add_usage_errors(lab: Path) -> None:
    for args in (["550", "k"], ["550", "k", "u", "--tag", "t"], []):
        result = run_main("matrix", "add", *args, cwd=lab)
        assert result.returncode == 2
        assert "give BRANCH KERNEL OS_TAG, or --tag TAG" in result.stderr


UNREACHABLE = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: abc}
"""


@pytest.mark.parametrize("command", [["audit"], ["tag", "lab-node-0"]])
def test_unreachable_cluster(lab: Path, command: list[str]) -> None:
    (lab / "kubeconfig").write_text(UNREACHABLE)
    result = run_main(*command, "--kubeconfig", "kubeconfig", cwd=lab)
    assert_one_line_error(result, "cannot reach the cluster at https://127.0.0.1:9")


def test_kubeconfig_problems(lab: Path) -> None:
    (lab / "kubeconfig").write_text(UNREACHABLE)
    assert_one_line_error(run_main("audit", "--kubeconfig", "nope", cwd=lab), "kubeconfig nope: no such file")
    assert_one_line_error(
        run_main("audit", "--kubeconfig", "kubeconfig", "--context", "other", cwd=lab),
        "kubeconfig:",
        "other",
    )
    assert_one_line_error(
        run_main("audit", cwd=lab, env={"KUBECONFIG": "", "HOME": str(lab)}), "no cluster configured"
    )
    (lab / "garbage").write_text("::: not yaml [")
    assert_one_line_error(run_main("audit", "--kubeconfig", "garbage", cwd=lab), "kubeconfig")


def test_from_and_kubeconfig_together_is_a_usage_error(lab: Path) -> None:
    for command in (["audit"], ["tag", "lab-node-0"], ["report"]):
        result = run_main(*command, "--from", "clusters/lab", "--kubeconfig", "k", cwd=lab)
        assert_one_line_error(result, "--from reads manifests, not the cluster; drop --kubeconfig/--context")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["plan"], "gpudrv plan needs --from DIR"),
        (["apply"], "gpudrv apply needs --from DIR"),
        (["plan", "--from", "clusters/lab"], "not inside a git repository"),
        (["status", "--kubeconfig", "kubeconfig"], "cannot reach the cluster"),
        (["report", "--kubeconfig", "kubeconfig"], "cannot reach the cluster"),
        (["drain", "lab-node-1", "--kubeconfig", "kubeconfig"], "cannot reach the cluster"),
    ],
)
def test_upgrade_commands_bad_input(lab: Path, args: list[str], fragment: str) -> None:
    (lab / "kubeconfig").write_text(UNREACHABLE)
    assert_one_line_error(run_main(*args, cwd=lab, env={"KUBECONFIG": ""}), fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["apply", "--from", "clusters/lab", "--drain-timeout", "5x"], "invalid duration '5x'"),
        (["drain", "n", "--timeout", "soon"], "invalid duration 'soon'"),
        (
            ["apply", "--from", "clusters/lab", "--max-parallel", "0"],
            "'0' is not a whole number of at least 1",
        ),
        (["report", "--from", "clusters/lab", "-o", "markdown"], "invalid choice: 'markdown'"),
    ],
)
def test_upgrade_commands_usage_errors(lab: Path, args: list[str], fragment: str) -> None:
    result = run_main(*args, cwd=lab)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_plan_with_an_unknown_merged_ref(lab: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=lab, check=True)
    subprocess.run(["git", "add", "-A"], cwd=lab, check=True)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", *identity, "commit", "-qm", "fleet"], cwd=lab, check=True)
    result = run_main("plan", "--from", "clusters/lab", "--merged-ref", "nope", cwd=lab)
    assert_one_line_error(result, "git ref 'nope' not found")


def test_offline_commands_never_import_kubernetes(lab: Path) -> None:
    for args in (
        ["audit", "--from", "clusters/lab"],
        ["tag", "lab-node-0", "--from", "clusters/lab"],
        ["matrix", "validate"],
    ):
        verb = f"reconciler.commands.{args[0]}"
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "reconciler", *args],
            cwd=lab,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
        assert verb in imported
        assert not {name for name in imported if name.split(".")[0] in {"kubernetes", "git"}}
        # Each verb's module is imported when it runs, no other verb's (the fixed cost: docs/scale.md);
        # the settings types are data the parser is built from.
        verbs = {name for name in imported if name.startswith("reconciler.commands.")}
        assert verbs <= {verb, "reconciler.commands.upgrades", "reconciler.commands.settings"}, verbs
