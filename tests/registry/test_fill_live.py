"""`gpudrv matrix fill` between two real registries (issue 25): an upstream and a target, each
distribution with TLS and token auth, multi-platform images pushed by crane, the fleet as Node
manifests; what reached the target is counted in its access log. No mocked HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import run_main
from tests.registry import harness
from tests.registry.harness import PASSWORD, PUSHER, PUSHER_PASSWORD, USER, Registry
from tests.schemas import output_schema

pytestmark = pytest.mark.registry

GPUDRV = Path(sys.executable).with_name("gpudrv")
REPO = Path(__file__).resolve().parents[2]
KERNELS = ("6.8.0-51-generic", "6.8.0-52-generic", "6.8.0-53-generic")
HEADER = "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n"


def tag(kernel: str) -> str:
    return f"550-{kernel}-ubuntu24.04"


def fleet(root: Path, kernels: tuple[str, ...] = KERNELS) -> Path:
    """A fleet repository: a node per kernel (none of their images in the matrix), the matrix."""
    return harness.write_fleet(root, kernels, HEADER)


def environment(
    tmp_path: Path,
    upstream: Registry,
    target: Registry,
    target_user: tuple[str, str] = (PUSHER, PUSHER_PASSWORD),
) -> dict[str, str]:
    return harness.pair_env(tmp_path / "gpudrv", [(upstream, USER, PASSWORD), (target, *target_user)])


def fill(
    work: Path, env: dict[str, str], upstream: Registry, target: Registry, *extra: str
) -> subprocess.CompletedProcess[str]:
    registries = ("--upstream", upstream.repository, "--registry", target.repository)
    return run_main("matrix", "fill", "--from", "nodes", *registries, *extra, cwd=work, env=env)


def as_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_fill_copies_three_tags_and_adds_their_rows(
    upstream: Registry, target: Registry, tmp_path: Path
) -> None:
    digests = {tag(kernel): upstream.push_index(tag(kernel)) for kernel in KERNELS}
    work, env = fleet(tmp_path / "fleet"), environment(tmp_path, upstream, target)

    planned = fill(work, env, upstream, target, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines()[-1] == "dry run: 3 to copy, 0 rows to add, 0 to build; nothing written"
    assert target.manifest_puts() == [] and target.uploaded() == []
    assert (work / "matrix" / "support-matrix.csv").read_text() == HEADER

    done = fill(work, env, upstream, target, "-o", "json")
    assert done.returncode == 0, done.stderr
    document = as_json(done)
    schema = output_schema("matrix-fill")
    jsonschema.validate(document, schema)
    assert document["ok"] is True
    assert [(image["action"], image["tag"], image["added"]) for image in document["images"]] == [
        ("COPY", tag(kernel), True) for kernel in KERNELS
    ]
    assert {tag(kernel): target.digest(tag(kernel)) for kernel in KERNELS} == digests
    assert document["blobs_sent"] == len(set(target.uploaded())) == 3 * 2 * 2  # per platform: config, layer
    rows = (work / "matrix" / "support-matrix.csv").read_text().splitlines()
    assert rows[2:] == [f"550,{kernel},ubuntu24.04" for kernel in KERNELS]
    audit = run_main("audit", "--from", "nodes", cwd=work, env=env)
    assert (audit.returncode, audit.stdout.strip()) == (0, "OK"), audit.stderr

    again = fill(work, env, upstream, target)
    assert (again.returncode, again.stdout.strip()) == (
        0,
        "nothing to fill: 3 GPU nodes, each with its image in the matrix",
    )


def test_a_tag_upstream_lacks_is_a_build_and_exit_1(
    upstream: Registry, target: Registry, tmp_path: Path
) -> None:
    upstream.push_index(tag(KERNELS[0]))
    target.push_index(tag(KERNELS[1]))  # already in the target: only its row is missing
    work, env = fleet(tmp_path / "fleet"), environment(tmp_path, upstream, target)
    result = fill(work, env, upstream, target)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"copied {tag(KERNELS[0])} to {target.repository} (sha256:")
    assert lines[0].endswith("added the row at matrix/support-matrix.csv:3")
    assert (
        lines[1] == f"{target.repository} has {tag(KERNELS[1])}; added the row at matrix/support-matrix.csv:4"
    )
    assert lines[2] == (
        f"BUILD {tag(KERNELS[2])}: not in {upstream.repository} nor {target.repository}; for 1 node (gpu-2)"
    )
    assert lines[3].startswith("filled 2 of 3 images; 1 to build;")
    assert (work / "matrix" / "support-matrix.csv").read_text().splitlines()[2:] == [
        f"550,{KERNELS[0]},ubuntu24.04",
        f"550,{KERNELS[1]},ubuntu24.04",
    ]
    builds = fill(work, env, upstream, target, "-o", "github-matrix")
    assert builds.returncode == 1, builds.stderr
    [entry] = json.loads(builds.stdout)["include"]
    assert (entry["target_tag"], entry["kernel"]) == (tag(KERNELS[2]), KERNELS[2])
    assert builds.stderr.splitlines() == [  # the lines for people, beside the workflow's JSON
        lines[2],
        "filled 0 of 1 image; 1 to build (gpudrv matrix fill -o github-matrix: the build plan)",
    ]


def test_a_killed_fill_leaves_the_matrix_alone_and_the_rerun_sends_only_the_missing_blobs(
    upstream: Registry, target: Registry, tmp_path: Path
) -> None:
    kernels = tuple(f"6.8.0-{number}-generic" for number in range(60, 66))
    for kernel in kernels:
        upstream.push_index(tag(kernel), size=4 << 20)
    work, env = fleet(tmp_path / "fleet", kernels), environment(tmp_path, upstream, target)
    command = [str(GPUDRV), "matrix", "fill", "--from", "nodes", "--upstream", upstream.repository,
               "--registry", target.repository, "--concurrency", "1"]  # fmt: skip
    child = subprocess.Popen(
        command, cwd=work, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    errors = harness.kill_after_uploads(child, target, uploads=2, poll=0.005)
    assert child.returncode == -signal.SIGKILL, errors.decode()
    before = target.uploaded()
    assert 2 <= len(before) < 2 * 2 * len(kernels), "the kill did not land mid-fill"
    assert (work / "matrix" / "support-matrix.csv").read_text() == HEADER

    rerun = fill(work, env, upstream, target, "-o", "json")
    assert rerun.returncode == 0, rerun.stderr
    after = target.uploaded()[len(before) :]
    assert not set(before) & set(after), "a blob uploaded before the kill was uploaded again"
    assert as_json(rerun)["blobs_sent"] == len(after)
    assert len((work / "matrix" / "support-matrix.csv").read_text().splitlines()) == 2 + len(kernels)


def test_a_target_that_refuses_writes_is_one_line_and_nothing_written(
    upstream: Registry, target: Registry, tmp_path: Path
) -> None:
    upstream.push_index(tag(KERNELS[0]))
    work = fleet(tmp_path / "fleet", KERNELS[:1])
    env = environment(tmp_path, upstream, target, target_user=(USER, PASSWORD))  # pull only
    result = fill(work, env, upstream, target)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpudrv: registry {target.host}: ") and "push" in line, line
    assert (work / "matrix" / "support-matrix.csv").read_text() == HEADER
    assert target.manifest_puts() == []


def test_wrong_credentials_are_one_line(upstream: Registry, target: Registry, tmp_path: Path) -> None:
    upstream.push_index(tag(KERNELS[0]))
    work = fleet(tmp_path / "fleet", KERNELS[:1])
    env = environment(tmp_path, upstream, target, target_user=(PUSHER, "wrong"))
    result = fill(work, env, upstream, target)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpudrv: registry {target.host}: ") and "refused" in line, line
    assert (work / "matrix" / "support-matrix.csv").read_text() == HEADER


def test_an_upstream_that_is_down_is_one_line(upstream: Registry, target: Registry, tmp_path: Path) -> None:
    work, env = fleet(tmp_path / "fleet", KERNELS[:1]), environment(tmp_path, upstream, target)
    upstream.stop()
    result = fill(work, env, upstream, target, "--dry-run")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"gpudrv: registry {upstream.host}: cannot connect to {upstream.host}: [Errno 111] Connection refused"
    ]
