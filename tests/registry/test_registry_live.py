"""`gpudrv matrix verify` and `gpudrv audit --registry` against a real registry (distribution, TLS, and
Basic or token auth), with images pushed and deleted by crane. No mocked HTTP.

Each scenario of issue 15: present, missing, deleted after a push, wrong credentials, registry stopped;
and anonymous access, --list-tags with pagination, --write, the GitHub and JSON outputs, the audit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconciler.adapters.registry import oci
from tests.conftest import run_gpudrv, run_main
from tests.registry.harness import USER, Registry

pytestmark = pytest.mark.registry

ROWS = {  # matrix/support-matrix.csv, by line
    2: "550-5.15.0-119-generic-ubuntu22.04",
    3: "535-5.15.0-107-generic-ubuntu22.04",
    4: "550-6.8.0-45-generic-ubuntu24.04",
}


def verify(
    registry: Registry, workdir: Path, *args: str, auth: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_main(
        "matrix", "verify", "--registry", registry.repository, *args, cwd=workdir, env=registry.env(auth)
    )


def audit_registry(
    registry: Registry, workdir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_main("audit", "--registry", registry.repository, *args, cwd=workdir, env=env or registry.env())


def github_env(registry: Registry, workdir: Path) -> dict[str, str]:
    return {
        **registry.env(),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workdir),
        "GITHUB_STEP_SUMMARY": str(workdir / "summary.md"),
    }


def verdict(registry: Registry, present: int, missing: int) -> str:
    return f"{registry.repository}: 3 rows, {present} with an image, {missing} MISSING"


def test_present(registry: Registry, workdir: Path) -> None:
    registry.push(list(ROWS.values()))
    # The real entry point, in a new process.
    result = run_gpudrv(
        "matrix", "verify", "--registry", registry.repository, cwd=workdir, env=registry.env()
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == verdict(registry, 3, 0) + "\n"


def test_missing(registry: Registry, workdir: Path) -> None:
    registry.push([ROWS[2], ROWS[4]])
    result = verify(registry, workdir)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines() == [
        f"matrix/support-matrix.csv:3: MISSING {registry.repository}:{ROWS[3]}",
        verdict(registry, 2, 1),
    ]


def test_deleted_after_a_push(registry: Registry, workdir: Path) -> None:
    registry.push(list(ROWS.values()))
    assert verify(registry, workdir).returncode == 0
    # Each tag its own manifest, so deleting one by digest leaves the others.
    registry.push([ROWS[4]], content="the 550 driver for kernel 6.8.0-45")
    registry.delete(ROWS[4])
    result = verify(registry, workdir)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"matrix/support-matrix.csv:4: MISSING {registry.repository}:{ROWS[4]}",
        verdict(registry, 2, 1),
    ]


def test_wrong_credentials(registry: Registry, workdir: Path) -> None:
    registry.push([ROWS[2]])
    wrong = registry.write_auth(registry.root / "wrong.json", USER, "not-the-password")
    result = verify(registry, workdir, auth=wrong)
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpudrv: registry {registry.host}: ")
    assert f"the credentials of {USER} from {wrong} are refused for {registry.repository}" in line


def test_anonymous_is_refused_with_advice(registry: Registry, workdir: Path) -> None:
    registry.push([ROWS[2]])
    env = {key: value for key, value in registry.env().items() if key != "REGISTRY_AUTH_FILE"}
    result = run_main("matrix", "verify", "--registry", registry.repository, cwd=workdir, env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"gpudrv: registry {registry.host}: answered 401: {registry.repository} needs credentials, and there "
        f"are none for {registry.host} (docker login {registry.host}, or $REGISTRY_AUTH_FILE)\n"
    )


def test_registry_stopped(basic_registry: Registry, workdir: Path) -> None:
    registry = basic_registry
    registry.push([ROWS[2]])
    registry.stop()
    result = run_gpudrv(
        "matrix", "verify", "--registry", registry.repository, cwd=workdir, env=registry.env()
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"gpudrv: registry {registry.host}: cannot connect to {registry.host}: "
        "[Errno 111] Connection refused\n"
    )


def test_list_tags_pages_and_write_appends(
    registry: Registry, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = ["570-6.8.0-60-generic-ubuntu24.04", "535-6.8.0-60-generic-ubuntu24.04"]
    registry.push([*ROWS.values(), *extra, "latest", "550.90.07-ubuntu22.04"])
    monkeypatch.setattr(oci, "PAGE_SIZE", 2)  # 7 tags: four pages, linked by Link headers
    result = verify(registry, workdir, "--list-tags")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"note: {registry.repository}:{extra[1]} is in the registry, not in the matrix",
        f"note: {registry.repository}:{extra[0]} is in the registry, not in the matrix",
        f"{verdict(registry, 3, 0)}; in the registry, not in the matrix: "
        "2 driver image tags and 2 other tags",
    ]
    before = (workdir / "matrix/support-matrix.csv").read_text()
    result = verify(registry, workdir, "--write")
    assert result.returncode == 0
    assert "added 535,6.8.0-60-generic,ubuntu24.04 at matrix/support-matrix.csv:5" in result.stdout
    assert (workdir / "matrix/support-matrix.csv").read_text() == (
        before + "535,6.8.0-60-generic,ubuntu24.04\n570,6.8.0-60-generic,ubuntu24.04\n"
    )
    again = verify(registry, workdir, "--write", "-o", "json")
    document = json.loads(again.stdout)
    assert (document["row_count"], document["present_count"], document["extra"], document["added"]) == (
        5,
        5,
        [],
        [],
    )
    assert document["other_tag_count"] == 2


def test_json_and_github_outputs(basic_registry: Registry, workdir: Path) -> None:
    registry = basic_registry
    registry.push([ROWS[2], ROWS[3], "570-6.8.0-60-generic-ubuntu24.04"])
    result = verify(registry, workdir, "-o", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert (document["kind"], document["ok"]) == ("matrix-verify", False)
    assert document["findings"] == [
        {
            "status": "MISSING",
            "tag": ROWS[4],
            "image": f"{registry.repository}:{ROWS[4]}",
            "origin": "matrix/support-matrix.csv:4",
            "line": 4,
        },
    ]
    summary = workdir / "summary.md"
    env = github_env(registry, workdir)
    result = run_main(
        "matrix", "verify", "--registry", registry.repository, "--list-tags", cwd=workdir, env=env
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"::error file=matrix/support-matrix.csv,line=4,title=driver image missing from the registry::"
        f"{registry.repository}:{ROWS[4]} is not in the registry: a node that needs it would be stuck in "
        "ImagePullBackOff. Push the image, or remove the row"
    )
    assert lines[1].startswith(
        "::notice file=matrix/support-matrix.csv,title=registry tag not in the matrix::"
    )
    assert lines[2] == (f"{verdict(registry, 2, 1)}; in the registry, not in the matrix: 1 driver image tag")
    text = summary.read_text()
    assert text.startswith("### gpudrv matrix verify: 1 MISSING\n")
    assert f"| `matrix/support-matrix.csv:4` | `{ROWS[4]}` |" in text


def test_registry_from_gpudrv_yaml(basic_registry: Registry, workdir: Path) -> None:
    registry = basic_registry
    registry.push(list(ROWS.values()))
    (workdir / "gpudrv.yaml").write_text(
        f"matrix: matrix/support-matrix.csv\nregistry: {registry.repository}\n"
    )
    result = run_main("matrix", "verify", cwd=workdir, env=registry.env())
    assert (result.returncode, result.stdout) == (0, verdict(registry, 3, 0) + "\n")


def test_audit_against_the_registry(registry: Registry, workdir: Path) -> None:
    """The lab fleet's nodes against the registry: the same findings as against a matrix that lists
    what the registry has, each naming the reference it looked up."""
    registry.push([ROWS[2], ROWS[4]])  # lab-node-1 needs ROWS[3]
    result = audit_registry(registry, workdir, "--from", "clusters/lab", "-o", "text")
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == f"lab-node-1 MISSING {registry.repository}:{ROWS[3]}\n"

    matrix = workdir / "matrix/support-matrix.csv"
    matrix.write_text(matrix.read_text().replace("535,5.15.0-107-generic,ubuntu22.04\n", ""))
    against_matrix = run_main("audit", "--from", "clusters/lab", "-o", "json", cwd=workdir)
    against_registry = audit_registry(registry, workdir, "--from", "clusters/lab", "-o", "json")
    expected = json.loads(against_matrix.stdout)
    document = json.loads(against_registry.stdout)
    assert document.pop("registry") == registry.repository
    assert expected.pop("matrix") == "matrix/support-matrix.csv"
    for finding in expected["findings"]:
        finding["image"] = f"{registry.repository}:{finding['tag']}"
    assert document == expected

    registry.push([ROWS[3]])
    result = audit_registry(registry, workdir, "--from", "clusters/lab", "-o", "text")
    assert (result.returncode, result.stdout) == (0, "OK\n")


def test_audit_github_output_at_the_driver_resource(basic_registry: Registry, workdir: Path) -> None:
    """A GPU Operator fleet: the missing image's annotation sits at the ClusterPolicy's version line."""
    registry = basic_registry
    summary = workdir / "summary.md"
    env = github_env(registry, workdir)
    result = audit_registry(registry, workdir, "--from", "clusters/gpu-operator", env=env)
    assert result.returncode == 1, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("::error file=clusters/gpu-operator/cluster-policy.yaml,line=")
    assert f"{registry.repository}:550-" in first
    assert result.stdout.splitlines()[-1].endswith("(registry)")
    assert summary.read_text().startswith("### gpudrv audit: ")


def test_preflight_against_the_registry(registry: Registry, workdir: Path) -> None:
    """gpudrv preflight --registry: each lab node's image on the kernel, asked of the real registry."""
    kernel = "6.8.0-60-generic"
    need = {"lab-node-0": f"550-{kernel}-ubuntu22.04", "lab-node-1": f"535-{kernel}-ubuntu22.04",
            "lab-node-2": f"550-{kernel}-ubuntu24.04"}  # fmt: skip
    registry.push([need["lab-node-0"], need["lab-node-1"]])
    args = ("preflight", "--from", "clusters/lab", "--kernel", kernel, "--registry", registry.repository)
    result = run_main(*args, cwd=workdir, env=registry.env())
    assert (result.returncode, result.stderr) == (1, "")
    image = f"{registry.repository}:{need['lab-node-2']}"
    assert result.stdout == (
        f"ubuntu24.04, driver 550: 1 GPU node needs {image}\n"
        f"  lab-node-2 MISSING {image}\n"
        f"kernel {kernel}: 1 of 3 GPU nodes not ready, 1 image not in {registry.repository}\n"
    )
    registry.push([need["lab-node-2"]])
    ok = run_main(*args, cwd=workdir, env=registry.env())
    assert (ok.returncode, ok.stdout) == (0, f"OK: 3 GPU nodes ready for kernel {kernel}\n")
