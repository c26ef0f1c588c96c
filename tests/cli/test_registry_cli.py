"""matrix verify / audit --registry: what is refused before any request, and GitHub output of
untrusted registry tags (the registry tier, tests/registry, runs the requests against a real one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters.files import schemas
from reconciler.core.images import matrix
from reconciler.core.images import registry as oci
from reconciler.render import registry as show
from tests.conftest import run_main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--registry", "nvidia/driver"], "--registry: 'nvidia/driver' does not start with a registry host"),
        (["--registry", ""], "--registry: empty repository (is a variable unset?)"),
        ([], "no registry to check: give --registry REPO"),
        (["--registry", "registry.example.com/nvidia/driver:550"], "without a tag or digest"),
    ],
)
def test_verify_refuses_before_asking(lab: Path, args: list[str], message: str) -> None:
    result = run_main("matrix", "verify", *args, cwd=lab, env={"REGISTRY_AUTH_FILE": str(lab / "none.json")})
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("gpudrv: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_registry_from_gpudrv_yaml_is_checked_too(lab: Path) -> None:
    (lab / "gpudrv.yaml").write_text("registry: nvidia/driver\n")
    result = run_main("audit", "--from", "clusters/lab", "--registry", cwd=lab)
    assert result.returncode == 2
    assert result.stderr == (
        "gpudrv: gpudrv.yaml: registry: 'nvidia/driver' does not start with a registry host (one with a '.' "
        "or a port, or localhost), like registry.example.com/nvidia/driver\n"
    )


def test_audit_without_registry_still_reads_the_matrix(lab: Path) -> None:
    assert run_main("audit", "--from", "clusters/lab", "-o", "text", cwd=lab).stdout == "OK\n"


def test_credential_helper_is_one_clear_error(lab: Path) -> None:
    auth = lab / "auth.json"
    auth.write_text('{"credHelpers": {"registry.example.com": "ecr-login"}}')
    result = run_main(
        "matrix", "verify", "--registry", "registry.example.com/nvidia/driver", cwd=lab,
        env={"REGISTRY_AUTH_FILE": str(auth)},
    )  # fmt: skip
    assert result.returncode == 2
    assert "kept by docker-credential-ecr-login, which gpudrv does not run" in result.stderr


@pytest.mark.parametrize(
    "payload", ["x\n::warning::pwned", "a%0A::error::b", "##[error]pwned", "x\r::set-env"]
)
def test_registry_tags_cannot_inject_workflow_commands(payload: str) -> None:
    """A registry may answer anything in tags/list: annotations escape it, the summary quotes it."""
    parsed = matrix.parse(
        "driver_branch,kernel,os_tag\n550,5.15.0-1-generic,ubuntu22.04\n", schemas.load("matrix-row")
    )
    repository = oci.parse_repository("registry.example.com/nvidia/driver")
    extra = oci.Extra("550-5.15.0-1-generic-ubuntu24.04" + payload, None)
    result = oci.Verification(repository, 1, parsed.rows, (extra,), 0)
    for item in show.verify_annotations(result, Path("matrix.csv")):
        line = item.command()
        assert "\n" not in line and "\r" not in line and "##[" not in line
        assert line.startswith(("::error ", "::notice "))  # one line: `::` further on starts nothing
    markdown = show.verify_summary(result, Path("matrix.csv")).markdown()
    assert all(not line.startswith("::") for line in markdown.splitlines())
