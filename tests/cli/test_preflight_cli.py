"""gpudrv preflight --kernel K through main(), offline with --from: the lab and the GPU Operator fleets,
-l, the outputs, --registry (the registry client replaced by a double at the adapter's seam; the real
registry is tests/registry's), bad input (one line, exit 2) and hostile label values."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import jsonschema
import pytest
import yaml

from reconciler.adapters.registry import oci
from reconciler.core.images import tags
from reconciler.core.images.registry import Repository
from tests.cli import test_workflow_commands
from tests.cli.test_bad_input import assert_one_line_error, edit_label
from tests.cli.test_workflow_commands import assert_outcome
from tests.conftest import run_main
from tests.schemas import output_schema

K = "6.8.0-60-generic"
LAB = "clusters/lab"
POOLS = "clusters/gpu-operator-pools"
POLICY = "clusters/gpu-operator"
OPERATOR_MATRIX = "matrix/gpu-operator.csv"
REPOSITORY = "registry.example.com/nvidia/driver"
SCHEMA = output_schema("preflight")


def add_rows(lab: Path, path: str, *rows: str) -> None:
    with (lab / path).open("a") as matrix:
        matrix.writelines(f"{row}\n" for row in rows)


def test_lab_pools_without_their_image(lab: Path) -> None:
    result = run_main("preflight", "--from", LAB, "--kernel", "5.15.0-119-generic", cwd=lab)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (
        "ubuntu22.04, driver 535: 1 GPU node needs 535-5.15.0-119-generic-ubuntu22.04\n"
        "  lab-node-1 MISSING 535-5.15.0-119-generic-ubuntu22.04\n"
        "ubuntu24.04, driver 550: 1 GPU node needs 550-5.15.0-119-generic-ubuntu24.04\n"
        "  lab-node-2 MISSING 550-5.15.0-119-generic-ubuntu24.04\n"
        "kernel 5.15.0-119-generic: 2 of 3 GPU nodes not ready, 2 images not in matrix/support-matrix.csv\n"
    )


def test_lab_ready_once_the_rows_are_there(lab: Path) -> None:
    add_rows(lab, "matrix/support-matrix.csv", f"550,{K},ubuntu22.04", f"535,{K},ubuntu22.04")
    missing = run_main("preflight", "--from", LAB, "--kernel", K, cwd=lab)
    assert missing.returncode == 1
    assert missing.stdout.splitlines()[:2] == [
        f"ubuntu24.04, driver 550: 1 GPU node needs 550-{K}-ubuntu24.04",
        f"  lab-node-2 MISSING 550-{K}-ubuntu24.04",
    ]
    add_rows(lab, "matrix/support-matrix.csv", f"550,{K},ubuntu24.04")
    ok = run_main("preflight", "--from", LAB, "--kernel", K, cwd=lab)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, f"OK: 3 GPU nodes ready for kernel {K}\n", "")


def test_selector_narrows_the_nodes(lab: Path) -> None:
    driver = "nvidia.com/cuda.driver.major=535"
    result = run_main("preflight", "--from", LAB, "--kernel", "5.15.0-119-generic", "-l", driver, cwd=lab)
    assert result.returncode == 1
    assert "lab-node-2" not in result.stdout
    assert result.stdout.endswith("1 of 1 GPU node not ready, 1 image not in matrix/support-matrix.csv\n")
    nothing = run_main("preflight", "--from", LAB, "--kernel", K, "-l", "pool=none", cwd=lab)
    assert_one_line_error(nothing, "no GPU node in clusters/lab matches -l pool=none: nothing was checked")
    empty = run_main("preflight", "--from", LAB, "--kernel", K, "-l", "pool=none", "--allow-empty", cwd=lab)
    assert (empty.returncode, empty.stdout) == (0, f"NOTHING CHECKED: 0 GPU nodes for kernel {K}\n")


def test_nvidia_driver_pools(lab: Path) -> None:
    result = run_main("preflight", "--from", POOLS, "--matrix", OPERATOR_MATRIX, "--kernel", K, cwd=lab)
    assert (result.returncode, result.stderr) == (1, "")
    image = "nvcr.io/nvidia/driver:535-" + K
    assert result.stdout == (
        f"rhel9, driver 535 (NVIDIADriver/rhel): 1 GPU node needs {image}-rhel9\n"
        f"  pool-rhel-0 MISSING {image}-rhel9\n"
        f"ubuntu22.04, driver 535 (NVIDIADriver/ubuntu): 2 GPU nodes need {image}-ubuntu22.04\n"
        f"  pool-ubuntu-0 MISSING {image}-ubuntu22.04\n"
        f"  pool-ubuntu-1 MISSING {image}-ubuntu22.04\n"
        f"kernel {K}: 3 of 3 GPU nodes not ready, 2 images not in {OPERATOR_MATRIX}\n"
    )


def test_the_operator_release_decides_the_os_tag(lab: Path) -> None:
    rhel = "5.14.0-427.13.1.el9_4.x86_64"  # the rhel node's own kernel: the matrix has rhel9 rows for it
    args = ("preflight", "--from", POOLS, "--matrix", OPERATOR_MATRIX, "--kernel", rhel, "-l",
            "feature.node.kubernetes.io/system-os_release.ID=rhel")  # fmt: skip
    assert run_main(*args, cwd=lab).stdout == "OK: 1 GPU node ready for kernel " + rhel + "\n"
    older = run_main(*args, "--operator-version", "v25.10.1", cwd=lab)
    assert older.returncode == 1
    assert f"  pool-rhel-0 MISSING nvcr.io/nvidia/driver:535-{rhel}-rhel9.4\n" in older.stdout


def test_cluster_policy_version_for_every_node(lab: Path) -> None:
    result = run_main("preflight", "--from", POLICY, "--matrix", OPERATOR_MATRIX, "--kernel", K, cwd=lab)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        f"ubuntu22.04, driver 550 (ClusterPolicy/cluster-policy): 2 GPU nodes need "
        f"nvcr.io/nvidia/driver:550-{K}-ubuntu22.04"
    )
    ok = run_main(
        "preflight", "--from", POLICY, "--matrix", OPERATOR_MATRIX, "--kernel", "6.8.0-45-generic", cwd=lab
    )
    assert (ok.returncode, ok.stdout) == (0, "OK: 2 GPU nodes ready for kernel 6.8.0-45-generic\n")


def data(lab: Path, *args: str) -> tuple[int, dict[str, object]]:
    as_json = run_main("preflight", *args, "-o", "json", cwd=lab)
    document = json.loads(as_json.stdout)
    jsonschema.validate(document, SCHEMA)
    assert (document["kind"], document["ok"]) == ("preflight", as_json.returncode == 0)
    as_yaml = run_main("preflight", *args, "-o", "yaml", cwd=lab)
    assert yaml.safe_load(as_yaml.stdout) == document
    return as_json.returncode, document


def test_json_pools_nodes_and_findings(lab: Path) -> None:
    code, document = data(lab, "--from", POOLS, "--matrix", OPERATOR_MATRIX, "--kernel", K)
    assert (code, document["kernel"], document["mode"], document["matrix"]) == (
        1, K, "NVIDIADriver", OPERATOR_MATRIX
    )  # fmt: skip
    assert (document["node_count"], document["missing_count"]) == (3, 3)
    pools = document["pools"]
    assert isinstance(pools, list)
    assert [(p["os_tag"], p["node_names"], p["ready"]) for p in pools] == [
        ("rhel9", ["pool-rhel-0"], False),
        ("ubuntu22.04", ["pool-ubuntu-0", "pool-ubuntu-1"], False),
    ]
    assert pools[0]["resource"]["name"] == "rhel"
    assert [(n["node"], n["status"]) for n in document["nodes"]] == [  # type: ignore[attr-defined]
        ("pool-rhel-0", "MISSING"), ("pool-ubuntu-0", "MISSING"), ("pool-ubuntu-1", "MISSING")
    ]  # fmt: skip
    ok_code, ok = data(
        lab, "--from", LAB, "--kernel", "5.15.0-107-generic", "-l", "nvidia.com/cuda.driver.major=535"
    )
    assert (ok_code, ok["ok"], ok["findings"]) == (0, True, [])


def test_github_annotations_at_the_driver_resource(lab: Path) -> None:
    summary = lab / "summary.md"
    result = run_main(
        "preflight", "--from", POOLS, "--matrix", OPERATOR_MATRIX, "--kernel", K, "-o", "github", cwd=lab,
        env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(lab)},
    )  # fmt: skip
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0].startswith(f"::error file={POOLS}/nvidiadriver-rhel.yaml,line=")
    assert "pool-rhel-0" in errors[0] and f"gpudrv matrix add --tag 535-{K}-rhel9" in errors[0]
    assert lines[-1] == f"gpudrv preflight {K}: 3 MISSING, 0 INVALID of 3"
    assert "| `ubuntu22.04` | `535` | `NVIDIADriver/ubuntu` | 2 |" in summary.read_text()


class Registry:
    """The registry client's double: the tags it holds, and the tags it was asked about."""

    def __init__(self, tags: Sequence[str]) -> None:
        self.tags, self.asked = set(tags), list[list[str]]()
        self.repository: Repository | None = None

    @contextlib.contextmanager
    def connect(self, repository: Repository, concurrency: int = oci.CONCURRENCY) -> Iterator[Registry]:
        self.repository = repository
        yield self

    def exists_all(self, tags: Sequence[str]) -> dict[str, bool]:
        self.asked.append(list(tags))
        return {tag: tag in self.tags for tag in tags}


def test_registry_instead_of_the_matrix(lab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    double = Registry([f"550-{K}-ubuntu22.04", f"535-{K}-ubuntu22.04"])
    monkeypatch.setattr(oci, "connect", double.connect)
    result = run_main("preflight", "--from", LAB, "--kernel", K, "--registry", REPOSITORY, cwd=lab)
    assert str(double.repository) == REPOSITORY
    assert double.asked == [[f"535-{K}-ubuntu22.04", f"550-{K}-ubuntu22.04", f"550-{K}-ubuntu24.04"]]
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (
        f"ubuntu24.04, driver 550: 1 GPU node needs {REPOSITORY}:550-{K}-ubuntu24.04\n"
        f"  lab-node-2 MISSING {REPOSITORY}:550-{K}-ubuntu24.04\n"
        f"kernel {K}: 1 of 3 GPU nodes not ready, 1 image not in {REPOSITORY}\n"
    )
    double.tags.add(f"550-{K}-ubuntu24.04")
    (lab / "gpudrv.yaml").write_text(f"registry: {REPOSITORY}\n")
    ok = run_main("preflight", "--from", LAB, "--kernel", K, "--registry", "-o", "json", cwd=lab)
    document = json.loads(ok.stdout)
    jsonschema.validate(document, SCHEMA)
    assert (ok.returncode, document["registry"], "matrix" in document) == (0, REPOSITORY, False)


def test_registry_refused_before_any_request(lab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    double = Registry([])
    monkeypatch.setattr(oci, "connect", double.connect)
    for args, fragment in (
        (["--registry"], "no registry to check: give --registry REPO"),
        (["--registry", "nvidia/driver"], "does not start with a registry host"),
    ):
        result = run_main("preflight", "--from", LAB, "--kernel", K, *args, cwd=lab)
        assert_one_line_error(result, fragment)
    assert double.asked == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--kernel", "6.8.0 60"], f"argument --kernel: kernel '6.8.0 60' is not {tags.KERNEL_SHAPE}"),
        (["--kernel", "6.8\n::warning::x"], f"kernel '6.8\\n::warning::x' is not {tags.KERNEL_SHAPE}"),
        (["--kernel", "-6.8"], f"argument --kernel: kernel '-6.8' is not {tags.KERNEL_SHAPE}"),
        # issue 38: what NFD's kernel-version.full never reports (tags.KERNEL_PATTERN cites its source)
        (["--kernel", "garbage"], f"argument --kernel: kernel 'garbage' is not {tags.KERNEL_SHAPE}"),
        (["--kernel", "5.15"], f"argument --kernel: kernel '5.15' is not {tags.KERNEL_SHAPE}"),
        (
            ["--kernel", "550-5.15.0-119-generic-ubuntu22.04"],
            "it is a whole image tag: its kernel is 5.15.0-119-generic",
        ),
        (["--kernel", ""], "--kernel: empty kernel (is a variable unset?)"),
        ([], "the following arguments are required: --kernel"),
    ],
)
def test_bad_kernel_is_one_line(lab: Path, args: list[str], fragment: str) -> None:
    assert_one_line_error(run_main("preflight", "--from", LAB, *args, cwd=lab), fragment)


def test_unknown_folder_and_mixed_sources_are_one_line(lab: Path) -> None:
    assert_one_line_error(
        run_main("preflight", "--from", "nowhere", "--kernel", K, cwd=lab), "nowhere: no such directory"
    )
    both = run_main("preflight", "--from", LAB, "--context", "x", "--kernel", K, cwd=lab)
    assert_one_line_error(both, "--from reads manifests, not the cluster")


def test_live_needs_a_cluster(lab: Path, tmp_path: Path) -> None:
    missing = tmp_path / "none"
    result = run_main("preflight", "--kernel", K, cwd=lab, env={"KUBECONFIG": str(missing)})
    assert_one_line_error(result, f"kubeconfig {missing}: no such file")


def test_a_hostile_label_value_is_escaped(lab: Path) -> None:
    hostile = "ubuntu\n::warning::pwned ##[error]x"
    edit_label(
        lab, "lab-node-1", "feature.node.kubernetes.io/system-os_release.ID", hostile.replace("\n", "\\n")
    )
    result = run_main("preflight", "--from", LAB, "--kernel", "5.15.0-119-generic", cwd=lab)
    assert result.returncode == 1
    # repr() keeps the value on one line; the CI guard (actions_guard) spells its `##[` as `##\\[`.
    [line] = [line for line in result.stdout.splitlines() if line.startswith("lab-node-1")]
    assert line == (
        "lab-node-1 INVALID label feature.node.kubernetes.io/system-os_release.ID="
        "'ubuntu\\n::warning::pwned ##\\[error]x' is not an os-release ID (lowercase a-z, 0-9, . _ -)"
    )
    for output in ("text", "json", "yaml", "github"):
        with test_workflow_commands.in_actions():
            matrix = str(lab / "matrix/support-matrix.csv")
            outcome = test_workflow_commands.gpudrv(
                "preflight", "--from", str(lab / LAB), "--matrix", matrix, "--kernel", "5.15.0-119-generic",
                "-o", output,
            )  # fmt: skip
            assert outcome[0] == 1, outcome
            assert_outcome(*outcome, json_output=output == "json", yaml_output=output == "yaml")
