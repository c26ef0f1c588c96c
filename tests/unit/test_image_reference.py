"""Image references as Kubernetes and containerd normalize them, platforms and their pick from an
index (core/images/registry.py), and config.Env (core/oci_image.config_env): plain data."""

from __future__ import annotations

import pytest

from reconciler.core.images.oci_image import ContentError, config_env
from reconciler.core.images.registry import (
    ImageReference,
    Repository,
    parse_image_reference,
    parse_platform,
    pick_platform,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            ImageReference(Repository("nvcr.io", "nvidia/cuda"), "12.4.1-base-ubuntu22.04", None),
        ),
        ("ubuntu", ImageReference(Repository("docker.io", "library/ubuntu"), "latest", None)),
        ("ubuntu:22.04", ImageReference(Repository("docker.io", "library/ubuntu"), "22.04", None)),
        ("nvidia/cuda:12.8.1", ImageReference(Repository("docker.io", "nvidia/cuda"), "12.8.1", None)),
        ("docker.io/ubuntu", ImageReference(Repository("docker.io", "library/ubuntu"), "latest", None)),
        (f"repo@{DIGEST}", ImageReference(Repository("docker.io", "library/repo"), None, DIGEST)),
        (
            f"nvcr.io/nvidia/cuda:12.4.1@{DIGEST}",
            ImageReference(Repository("nvcr.io", "nvidia/cuda"), "12.4.1", DIGEST),
        ),
        ("127.0.0.1:5000/x/y:t", ImageReference(Repository("127.0.0.1:5000", "x/y"), "t", None)),
        (
            "index.docker.io/nvidia/cuda",
            ImageReference(Repository("docker.io", "nvidia/cuda"), "latest", None),
        ),
        ("index.docker.io/ubuntu", ImageReference(Repository("docker.io", "library/ubuntu"), "latest", None)),
        ("Registry/x", ImageReference(Repository("Registry", "x"), "latest", None)),
        ("localhost/x", ImageReference(Repository("localhost", "x"), "latest", None)),
        ("localhost:5000/x", ImageReference(Repository("localhost:5000", "x"), "latest", None)),
    ],
)
def test_references_normalize_as_kubernetes_pulls_them(text: str, expected: ImageReference) -> None:
    assert parse_image_reference(text) == expected


def test_the_digest_wins_over_the_tag() -> None:
    image = parse_image_reference(f"nvcr.io/nvidia/cuda:12.4.1@{DIGEST}")
    assert image.manifest == DIGEST
    assert str(image) == f"nvcr.io/nvidia/cuda:12.4.1@{DIGEST}"
    assert parse_image_reference("ubuntu").manifest == "latest"
    assert str(parse_image_reference("ubuntu")) == "docker.io/library/ubuntu:latest"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("https://nvcr.io/nvidia/cuda", "no scheme"),
        ("Ubuntu", "path component 'Ubuntu'"),
        ("nvcr.io/nvidia/cuda:", "tag ''"),
        ("nvcr.io/nvidia/cuda:bad/tag", "tag 'bad/tag'"),
        ("nvcr.io/nvidia/cuda:" + "t" * 129, "at most 128"),
        ("nvcr.io/nvidia/cuda@sha256:abc", "64 lowercase hex"),
        ("nvcr.io/nvidia/cuda@md5:" + "a" * 32, "not sha256 or sha512"),
        ("nvcr.io/nvidia/cuda@" + DIGEST.upper(), "not algorithm:hex"),
        ("nvcr.io/nvidia/cuda:t\u00e9", "is not a tag"),
        ("host:port/x", "not a registry host"),
        ("[::1]:5000/x", "not a registry host"),
        ("ab" * 32, "an image ID"),
        ("127.0.0.1:5000/", "path component ''"),
        ("nvcr.io//cuda", "path component ''"),
    ],
)
def test_a_malformed_reference_says_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_image_reference(text)
    assert reason in str(caught.value)


def test_platforms() -> None:
    assert parse_platform("linux/amd64") == ("linux", "amd64", None)
    assert parse_platform("linux/arm/v7") == ("linux", "arm", "v7")
    for bad in ("linux", "linux/", "a/b/c/d", "linux/am d64"):
        with pytest.raises(ValueError, match="no platform"):
            parse_platform(bad)


def test_pick_platform_from_an_index() -> None:
    offered = ["linux/amd64", None, "linux/arm/v6", "linux/arm/v7", "linux/arm64/v8"]
    assert pick_platform("linux/amd64", offered) == 0
    assert pick_platform("linux/arm64", offered) == 4  # arm64's default variant is v8
    assert pick_platform("linux/arm64/v8", ["linux/arm64"]) == 0
    assert pick_platform("linux/arm/v7", offered) == 3
    assert pick_platform("linux/arm", offered) == 2  # no variant asked: the first arm
    assert pick_platform("linux/arm", ["linux/arm/v7", "linux/arm"]) == 1  # one without a variant first
    assert pick_platform("linux/s390x", offered) is None
    assert pick_platform("windows/amd64", offered) is None
    assert pick_platform("linux/arm/v8", offered) is None


def test_config_env() -> None:
    env = ["PATH=/usr/bin", "NVIDIA_REQUIRE_CUDA=cuda>=12.8"]
    assert config_env({"architecture": "amd64", "config": {"Env": env}}) == tuple(env)
    assert config_env({"config": {}}) == ()
    assert config_env({"config": {"Env": None}}) == ()
    assert config_env({"architecture": "amd64"}) == ()
    for bad in ([], {"config": []}, {"config": {"Env": "A=B"}}, {"config": {"Env": ["A=B", 1]}}):
        with pytest.raises(ContentError):
            config_env(bad)
