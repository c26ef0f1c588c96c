"""Fixtures for the registry tier: the binaries (built from tests/registry's Go modules on first use, a
build failure fails the test loudly: nothing here skips), and a registry per test on 127.0.0.1."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.registry import harness

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def registry_bin() -> Path:
    return harness.ensure_built()


def _start(registry_bin: Path, root: Path, auth: harness.Auth) -> Iterator[harness.Registry]:
    registry = harness.Registry(registry_bin, root, auth)
    registry.prepare()
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(params=["htpasswd", "token"])
def registry(
    request: pytest.FixtureRequest, registry_bin: Path, tmp_path: Path
) -> Iterator[harness.Registry]:
    """A registry with Basic (htpasswd) auth, then one with token auth: each test runs against both."""
    yield from _start(registry_bin, tmp_path / "registry", request.param)


@pytest.fixture
def basic_registry(registry_bin: Path, tmp_path: Path) -> Iterator[harness.Registry]:
    yield from _start(registry_bin, tmp_path / "registry", "htpasswd")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A copy of the bundled matrix/ and clusters/ to run gpudrv in."""
    work = tmp_path / "work"
    shutil.copytree(REPO / "matrix", work / "matrix")
    shutil.copytree(REPO / "clusters", work / "clusters")
    return work


@pytest.fixture
def upstream(registry_bin: Path, tmp_path: Path) -> Iterator[harness.Registry]:
    """The registry images are copied from (token auth), with `target` for two registries at once."""
    yield from _start(registry_bin, tmp_path / "upstream", "token")


@pytest.fixture
def target(registry_bin: Path, tmp_path: Path) -> Iterator[harness.Registry]:
    """The registry images are copied to (token auth)."""
    yield from _start(registry_bin, tmp_path / "target", "token")
