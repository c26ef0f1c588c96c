"""Copying images between two real registries (adapters/registry/transfer.py): distribution with TLS
and token auth (htpasswd where Basic adds something), multi-platform images pushed by crane, what
reached the target counted in its access log. No mocked HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconciler.adapters.registry import oci, transfer
from reconciler.core.images.oci_image import Transfer
from reconciler.core.images.registry import parse_repository
from reconciler.errors import GpudrvError
from tests.registry import harness
from tests.registry.harness import PASSWORD, PLATFORMS, PUSHER, PUSHER_PASSWORD, USER, Registry

pytestmark = pytest.mark.registry

REPO = Path(__file__).resolve().parents[2]
TAGS = (
    "550-5.15.0-119-generic-ubuntu22.04",
    "535-5.15.0-107-generic-ubuntu22.04",
    "550-6.8.0-45-generic-ubuntu24.04",
)


def pair_env(
    tmp_path: Path,
    upstream: Registry,
    target: Registry,
    upstream_user: tuple[str, str] = (USER, PASSWORD),
    target_user: tuple[str, str] = (PUSHER, PUSHER_PASSWORD),
) -> dict[str, str]:
    users = [(upstream, *upstream_user)]
    if target is not upstream:
        users.append((target, *target_user))
    return harness.pair_env(tmp_path / "gpudrv", users)


@contextmanager
def clients(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], source: str, target: str
) -> Iterator[tuple[oci.Client, oci.Client]]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    source_repo, target_repo = parse_repository(source), parse_repository(target)
    with oci.connect(source_repo) as pull, transfer.connect_target(target_repo, source_repo) as push:
        yield pull, push


def blobs_of(registry: Registry, tag: str, repository: str = harness.REPOSITORY) -> dict[str, int]:
    """Every config and layer of the tag's platforms, digest -> size (crane reads them)."""
    found: dict[str, int] = {}
    for platform in PLATFORMS:
        manifest = json.loads(
            registry.crane("manifest", "--platform", platform, f"{registry.host}/{repository}:{tag}")
        )
        for blob in (manifest["config"], *manifest["layers"]):
            found[blob["digest"]] = blob["size"]
    return found


def test_copy_three_multi_platform_tags_then_again(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = {tag: upstream.push_index(tag, docker=tag == TAGS[2]) for tag in TAGS}
    env = pair_env(tmp_path, upstream, target)
    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        plan = transfer.resolve_all(source, [*TAGS, "no-such-tag"])
        assert plan == {**digests, "no-such-tag": None}
        copied = transfer.copy_all(source, push, [(tag, digests[tag]) for tag in TAGS], concurrency=3)

    blobs = {tag: blobs_of(upstream, tag) for tag in TAGS}
    assert copied == [
        transfer.Copied(tag, digests[tag], Transfer(3, 4, 0, 0, sum(blobs[tag].values()))) for tag in TAGS
    ]
    for tag in TAGS:
        assert target.digest(tag) == digests[tag]
        for platform in PLATFORMS:
            config = json.loads(target.crane("config", "--platform", platform, f"{target.repository}:{tag}"))
            assert f"{config['os']}/{config['architecture']}" == platform
    every_blob = {digest for found in blobs.values() for digest in found}
    assert len(every_blob) == 12
    assert sorted(target.uploaded()) == sorted(every_blob)  # each sent once
    assert len(target.manifest_puts()) == 9
    assert target.count("POST", r"/v2/nvidia/driver/blobs/uploads/", 202) == 12

    # Again: the target has it all, nothing is sent.
    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        again = transfer.copy_all(source, push, [(tag, digests[tag]) for tag in TAGS], concurrency=3)
    assert again == [transfer.Copied(tag, digests[tag], Transfer(0, 0, 0, 0, 0)) for tag in TAGS]
    assert len(target.uploaded()) == 12
    assert len(target.manifest_puts()) == 9
    assert target.count("POST", r"/v2/nvidia/driver/blobs/uploads/") == 12


CHILD = """
import sys, time
from reconciler.adapters.registry import oci, transfer
from reconciler.core.images.oci_image import Transfer
from reconciler.core.images.registry import parse_repository

chunks = oci.Client.chunks

def paced(self, response, url, size):  # slow reads, so that the kill lands mid-copy
    for chunk in chunks(self, response, url, 64 * 1024):
        time.sleep(0.05)
        yield chunk

oci.Client.chunks = paced
source, target = map(parse_repository, sys.argv[1:3])
plan = [tuple(item.split("@")) for item in sys.argv[3:]]
with oci.connect(source) as pull, transfer.connect_target(target, source) as push:
    print(transfer.copy_all(pull, push, plan, 1), flush=True)
"""


def test_an_interrupted_copy_resumes_with_only_the_missing_blobs(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = {tag: upstream.push_index(tag, size=512 * 1024) for tag in TAGS}
    every_blob = {digest for tag in TAGS for digest in blobs_of(upstream, tag)}
    env = pair_env(tmp_path, upstream, target)
    plan = [f"{tag}@{digests[tag]}" for tag in TAGS]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, upstream.repository, target.repository, *plan],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    errors = harness.kill_after_uploads(child, target, uploads=3, poll=0.02)
    assert child.returncode == -signal.SIGKILL, errors.decode()
    before = target.uploaded()
    assert 3 <= len(before) < len(every_blob), "the kill did not land mid-copy"

    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        copied = transfer.copy_all(source, push, [(tag, digests[tag]) for tag in TAGS], concurrency=2)
    after = target.uploaded()[len(before) :]
    assert not set(before) & set(after), "a blob uploaded before the kill was uploaded again"
    assert set(before) | set(after) == every_blob
    assert all(isinstance(item, transfer.Copied) for item in copied), copied
    results = [item for item in copied if isinstance(item, transfer.Copied)]
    assert sum(item.sent.blobs_sent for item in results) == len(after)
    assert sum(item.sent.blobs_present for item in results) + len(after) <= len(every_blob)
    assert {tag: target.digest(tag) for tag in TAGS} == digests


def test_a_target_that_refuses_writes_is_one_line(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = upstream.push_index(TAGS[0])
    env = pair_env(tmp_path, upstream, target, target_user=(USER, PASSWORD))  # pull only
    with (
        clients(monkeypatch, env, upstream.repository, target.repository) as (source, push),
        pytest.raises(oci.RegistryFailure) as refused,
    ):
        transfer.copy_all(source, push, [(TAGS[0], digest), (TAGS[1], digest)], concurrency=2)
    assert str(refused.value) == (
        f"registry {target.host}: refuses pushes to {target.repository} for {USER} from "
        f"{env['REGISTRY_AUTH_FILE']} (answered 401 insufficient_scope)"
    )
    assert target.manifest_puts() == [] and target.uploaded() == []


def test_wrong_credentials_on_either_registry_are_one_line(
    upstream: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = upstream.push_index(TAGS[0])
    with harness.running(tmp_path / "basic-target", "htpasswd") as target:  # Basic auth on the target
        env = pair_env(tmp_path / "a", upstream, target, target_user=(PUSHER, "wrong"))
        with (
            clients(monkeypatch, env, upstream.repository, target.repository) as (source, push),
            pytest.raises(oci.RegistryFailure) as refused,
        ):
            transfer.copy_all(source, push, [(TAGS[0], digest)], concurrency=1)
        assert str(refused.value) == (
            f"registry {target.host}: answered 401: the credentials of {PUSHER} from "
            f"{env['REGISTRY_AUTH_FILE']} are refused for {target.repository}"
        )
        assert target.manifest_puts() == []

        env = pair_env(tmp_path / "b", upstream, target, upstream_user=(USER, "wrong"))
        with (
            clients(monkeypatch, env, upstream.repository, target.repository) as (source, push),
            pytest.raises(oci.RegistryFailure) as refused,
        ):
            transfer.resolve_all(source, TAGS)
        assert str(refused.value) == (
            f"registry {upstream.host}: its token service at localhost:{upstream.token_port} answered 401: "
            f"the credentials of {USER} from {env['REGISTRY_AUTH_FILE']} are refused for "
            f"{upstream.repository}"
        )


def test_a_tag_that_changes_between_plan_and_copy_is_refused(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned = upstream.push_index(TAGS[0])
    other = upstream.push_index(TAGS[1])
    env = pair_env(tmp_path, upstream, target)
    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        assert transfer.resolve_all(source, [TAGS[0]]) == {TAGS[0]: planned}
        now = upstream.push_index(TAGS[0], seed="a rebuilt image")
        assert now != planned
        (alone,) = transfer.copy_all(source, push, [(TAGS[0], planned)], concurrency=1)
        writes = [item for item in target.accesses() if item.method in ("POST", "PUT", "PATCH")]
        assert writes == []  # nothing written to the target
        results = transfer.copy_all(source, push, [(TAGS[0], planned), (TAGS[1], other)], concurrency=2)
    refused, copied = results
    assert isinstance(refused, GpudrvError) and not isinstance(refused, oci.RegistryFailure)
    expected = (
        f"copying {upstream.repository}:{TAGS[0]} to {target.repository}: registry {upstream.host}: "
        f"the tag now resolves to {now}, not {planned} as planned (it changed between plan and copy); "
        "nothing copied"
    )
    assert str(refused) == str(alone) == expected
    assert isinstance(copied, transfer.Copied) and copied.digest == other  # the other tag goes on
    assert TAGS[0] not in target.manifest_puts()
    with pytest.raises(RuntimeError, match=r"MANIFEST_UNKNOWN|manifest unknown"):
        target.digest(TAGS[0])

    # A tag the target has with another digest is not overwritten.
    rebuilt = upstream.push_index(TAGS[1], seed="rebuilt again")
    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        (kept,) = transfer.copy_all(source, push, [(TAGS[1], rebuilt)], concurrency=1)
    assert str(kept) == (
        f"copying {upstream.repository}:{TAGS[1]} to {target.repository}: registry {target.host}: the tag "
        f"already points at {other}, not {rebuilt}; gpudrv does not overwrite a tag (delete it there to "
        "copy it again)"
    )
    assert target.digest(TAGS[1]) == other


def test_on_one_registry_blobs_are_mounted_not_uploaded(
    upstream: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = upstream
    digest = registry.push_index(TAGS[0])
    mirror = f"{registry.host}/mirror/driver"
    env = pair_env(tmp_path, registry, registry, upstream_user=(PUSHER, PUSHER_PASSWORD))
    with clients(monkeypatch, env, registry.repository, mirror) as (source, push):
        (copied,) = transfer.copy_all(source, push, [(TAGS[0], digest)], concurrency=1)
    assert copied == transfer.Copied(TAGS[0], digest, Transfer(3, 0, 4, 0, 0))
    assert sorted(registry.mounted()) == sorted(blobs_of(registry, TAGS[0]))
    assert registry.uploaded() == []
    assert registry.digest(TAGS[0], "mirror/driver") == digest


def test_a_registry_that_is_down_is_one_line_for_the_run(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = upstream.push_index(TAGS[0])
    env = pair_env(tmp_path, upstream, target)
    target.stop()
    with (
        clients(monkeypatch, env, upstream.repository, target.repository) as (source, push),
        pytest.raises(oci.RegistryFailure) as down,
    ):
        transfer.copy_all(source, push, [(TAGS[0], digest), (TAGS[1], digest)], concurrency=2)
    assert str(down.value) == (
        f"registry {target.host}: cannot connect to {target.host}: [Errno 111] Connection refused"
    )


def test_a_blob_that_does_not_match_its_digest_never_completes_an_upload(
    upstream: Registry, target: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = upstream.push_index(TAGS[0])
    layers = {d: size for d, size in blobs_of(upstream, TAGS[0]).items() if size > 1000}
    bad = sorted(layers)[0]
    # Rot on upstream's disk: same size, other bytes (distribution does not check what it serves).
    data = upstream.root / "storage/docker/registry/v2/blobs/sha256" / bad[7:9] / bad[7:] / "data"
    data.write_bytes(bytes(len(data.read_bytes())))
    env = pair_env(tmp_path, upstream, target)
    with clients(monkeypatch, env, upstream.repository, target.repository) as (source, push):
        (failed,) = transfer.copy_all(source, push, [(TAGS[0], digest)], concurrency=1)
    assert isinstance(failed, GpudrvError)
    assert str(failed).startswith(f"copying {upstream.repository}:{TAGS[0]} to {target.repository}: ")
    assert f"registry {upstream.host}: blob {bad} arrived as {layers[bad]} bytes hashing to sha256:" in str(
        failed
    )
    assert bad not in target.uploaded()
    assert target.count("HEAD", rf"/v2/nvidia/driver/blobs/{bad}", 404) == 1
    assert TAGS[0] not in target.manifest_puts()
