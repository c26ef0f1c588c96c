"""`gpudrv matrix fill` refuses what it cannot run with, in one line and before any request: no
upstream, a bad repository, the same repository twice. The copies themselves are tests/registry's."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_main

TARGET = "127.0.0.1:9/nvidia/driver"  # port 9 (discard): never reached, every case fails before


def one_line(*args: str, cwd: Path) -> str:
    result = run_main("matrix", "fill", "--from", "clusters/lab", *args, cwd=cwd)
    assert (result.returncode, result.stdout) == (2, ""), result
    [line] = result.stderr.splitlines()
    return line


def test_without_an_upstream_it_says_where_to_give_one(lab: Path) -> None:
    assert one_line("--registry", TARGET, cwd=lab) == (
        "gpudrv: no upstream registry to copy from: give --upstream REPO (NVIDIA's is "
        "nvcr.io/nvidia/driver) or set upstream: in gpudrv.yaml"
    )


def test_a_bad_upstream_names_the_flag_or_the_file(lab: Path) -> None:
    assert one_line("--upstream", "https://nvcr.io/nvidia/driver", "--registry", TARGET, cwd=lab) == (
        "gpudrv: --upstream: 'https://nvcr.io/nvidia/driver': give the repository without https:// "
        "(gpudrv speaks HTTPS)"
    )
    (lab / "gpudrv.yaml").write_text("upstream: nvcr.io/nvidia/driver:latest\n")
    line = one_line("--registry", TARGET, cwd=lab)
    assert line.startswith("gpudrv: ") and "upstream" in line, line


def test_the_same_repository_twice_is_refused(lab: Path) -> None:
    (lab / "gpudrv.yaml").write_text(f"upstream: {TARGET}\nregistry: {TARGET}\n")
    assert one_line(cwd=lab) == (
        f"gpudrv: --upstream and --registry are the same repository ({TARGET}): nothing to copy"
    )


def test_without_a_target_registry_it_says_where_to_give_one(lab: Path) -> None:
    line = one_line("--upstream", "nvcr.io/nvidia/driver", cwd=lab)
    assert line.startswith("gpudrv: no registry to check: give --registry REPO"), line
