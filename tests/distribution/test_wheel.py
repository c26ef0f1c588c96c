"""The distribution: `python -m build` makes an sdist and, from it, a wheel; both carry the schemas, the
data files and the templates of gpudrv init, and the record of the commit they were built from. The
wheel, installed into a fresh virtual environment (not editable; its dependencies resolved by pip from
the package index or its cache), runs the README's main job on a copy of the example fleet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from reconciler import __version__
from tests.conftest import REPO

DATA = [
    "data/cuda-compat.json",
    "data/driver-cuda.json",
    "data/os-tag-rules.json",
    "data/gpu-operator-chart.json",
]
SCHEMAS = [
    "desired-state.schema.json",
    "gpudrv-config.schema.json",
    "matrix-row.schema.json",
    "node-manifest.schema.json",
    # -o json's contract, one schema per command (tests/cli/test_output_contract.py checks each has one)
    *(f"output/{path.name}" for path in sorted((REPO / "schemas/output").glob("*.schema.json"))),
]
assert len(SCHEMAS) > 10, SCHEMAS
TEMPLATES = [
    f"data/scaffold/{name}"
    for name in ("gpudrv.yaml", "pr.yml", "audit.yml", "apply.yml", "pre-commit-config.yaml")
]


def clean_env(**extra: str) -> dict[str, str]:
    """No GitHub variables (the build would take GITHUB_REPOSITORY), no virtual environment leaking in."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_")) and key not in {"VIRTUAL_ENV", "PYTHONPATH"}
    }
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def run(
    *command: str | Path, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # In Actions the build knows its repository from GITHUB_REPOSITORY; here the test says it.
    built = run(
        sys.executable,
        "-m",
        "build",
        "--outdir",
        out,
        REPO,
        cwd=out,
        env=clean_env(GITHUB_REPOSITORY="example/gpudrv"),
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, as a user installs it."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    made = run(sys.executable, "-m", "venv", folder, cwd=folder.parent, env=clean_env())
    assert made.returncode == 0, made.stderr
    [wheel] = dist.glob("gpudrv-*.whl")
    installed = run(
        folder / "bin" / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        wheel,
        cwd=folder.parent,
        env=clean_env(),
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return folder


def test_the_sdist_carries_the_schemas_data_templates_and_build_record(dist: Path) -> None:
    [sdist] = dist.glob("gpudrv-*.tar.gz")
    assert sdist.name == f"gpudrv-{__version__}.tar.gz"
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    root = f"gpudrv-{__version__}"
    expected = {
        "pyproject.toml",
        "hatch_build.py",
        "README.md",
        "reconciler/_build.json",
        *(f"reconciler/{name}" for name in DATA + TEMPLATES),
        *(f"schemas/{name}" for name in SCHEMAS),
    }
    assert expected <= names, f"missing from {root}: {sorted(expected - names)}"
    assert not any(name.startswith(("tests/", ".github/", "clusters/")) for name in names)


def test_the_wheel_carries_the_schemas_data_templates_and_build_record(dist: Path) -> None:
    [wheel] = dist.glob("gpudrv-*.whl")
    assert wheel.name == f"gpudrv-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record = json.loads(archive.read("reconciler/_build.json"))
    expected = {
        *(f"reconciler/{name}" for name in DATA + TEMPLATES),
        *(f"reconciler/_schemas/{name}" for name in SCHEMAS),
    }
    assert expected <= names, sorted(expected - names)
    assert (record["repository"], record["commit"]) == ("example/gpudrv", head())


def test_the_installed_wheel_runs_the_readme_main_job(venv: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "matrix", tmp_path / "matrix")
    shutil.copytree(REPO / "clusters", tmp_path / "clusters")
    gpudrv = venv / "bin" / "gpudrv"
    where = run(
        venv / "bin" / "python",
        "-c",
        "import reconciler; print(reconciler.__file__)",
        cwd=tmp_path,
        env=clean_env(),
    )
    assert where.stdout.startswith(str(venv)), "gpudrv must come from the wheel, not the source tree"

    assert run(gpudrv, "--version", cwd=tmp_path, env=clean_env()).stdout == f"gpudrv {__version__}\n"
    audit = run(gpudrv, "audit", "--from", "clusters/lab", cwd=tmp_path, env=clean_env())
    assert (audit.returncode, audit.stdout, audit.stderr) == (0, "OK\n", "")
    validate = run(gpudrv, "manifests", "validate", "--from", "clusters/lab", cwd=tmp_path, env=clean_env())
    assert validate.returncode == 0, validate.stderr


def test_the_installed_wheel_pins_init_to_its_own_commit(venv: Path, tmp_path: Path) -> None:
    made = run(venv / "bin" / "gpudrv", "init", "fleet", cwd=tmp_path, env=clean_env())
    assert made.returncode == 0, made.stderr
    workflow = (tmp_path / "fleet/.github/workflows/pr.yml").read_text()
    assert f"uses: example/gpudrv@{head()} # v{__version__}\n" in workflow
    audit = run(
        venv / "bin" / "gpudrv", "audit", "--from", "clusters/prod", cwd=tmp_path / "fleet", env=clean_env()
    )
    assert (audit.returncode, audit.stdout) == (0, "OK: 1 GPU node, 1 image in matrix/support-matrix.csv\n")
