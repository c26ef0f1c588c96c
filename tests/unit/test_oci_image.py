"""The pure half of copying an image: digests, descriptors, manifests and indexes (core/images/oci_image.py),
and the token scopes a copy asks for (core/images/registry.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from reconciler.core.images import oci_image
from reconciler.core.images.oci_image import ContentError, Descriptor, Digest, Hasher
from reconciler.core.images.registry import Repository, token_scopes

BYTES = b'{"schemaVersion":2}'
HEX = hashlib.sha256(BYTES).hexdigest()
DIGEST = f"sha256:{HEX}"


def descriptor(
    media_type: str = "application/vnd.oci.image.layer.v1.tar+gzip", **extra: Any
) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": DIGEST, "size": len(BYTES), **extra}


def test_a_digest_parses_and_prints_back() -> None:
    parsed = oci_image.parse_digest(DIGEST)
    assert parsed == Digest("sha256", HEX)
    assert str(parsed) == DIGEST
    sha512 = "sha512:" + hashlib.sha512(BYTES).hexdigest()
    assert str(oci_image.parse_digest(sha512)) == sha512


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (None, "not a string"),
        ("sha256", "not algorithm:hex"),
        ("sha256:" + HEX[:-1], "64 lowercase hex"),
        ("sha256:" + HEX.upper(), "64 lowercase hex"),
        ("md5:" + HEX[:32], "not sha256 or sha512"),
        ("sha256:" + HEX + "\n", "not algorithm:hex"),
        ("sha256:../../" + HEX, "not algorithm:hex"),
    ],
)
def test_a_bad_digest_string_is_refused(text: Any, why: str) -> None:
    with pytest.raises(ContentError, match=why):
        oci_image.parse_digest(text)


def test_content_is_checked_against_its_digest_and_size() -> None:
    expected = oci_image.parse_digest(DIGEST)
    oci_image.check_content(BYTES, expected, len(BYTES))
    with pytest.raises(ContentError, match="hash to sha256:"):
        oci_image.check_content(BYTES + b" ", expected)
    with pytest.raises(ContentError, match="descriptor says 3"):
        oci_image.check_content(BYTES, expected, 3)


def test_the_hasher_counts_pieces_like_the_whole() -> None:
    hasher = Hasher()
    for piece in (BYTES[:5], b"", BYTES[5:]):
        hasher.update(piece)
    assert (hasher.size, hasher.digest()) == (len(BYTES), oci_image.digest_of(BYTES))


def test_an_index_gives_its_platform_manifests() -> None:
    document = {
        "schemaVersion": 2,
        "mediaType": oci_image.OCI_INDEX,
        "manifests": [
            descriptor(oci_image.OCI_MANIFEST, platform={"os": "linux", "architecture": "amd64"}),
            descriptor(
                oci_image.OCI_MANIFEST, platform={"os": "linux", "architecture": "arm64", "variant": "v8"}
            ),
        ],
    }
    parsed = oci_image.parse_manifest(oci_image.OCI_INDEX, document)
    assert parsed.is_index
    assert [entry.platform for entry in parsed.manifests] == ["linux/amd64", "linux/arm64/v8"]
    assert parsed.blobs == ()


def test_an_image_manifest_gives_its_config_then_layers() -> None:
    config = descriptor("application/vnd.docker.container.image.v1+json")
    foreign = descriptor("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", urls=["https://x"])
    document = {"schemaVersion": 2, "config": config, "layers": [descriptor(), foreign]}
    parsed = oci_image.parse_manifest(oci_image.DOCKER_MANIFEST, document)
    assert not parsed.is_index
    assert [blob.media_type for blob in parsed.blobs] == [
        config["mediaType"],
        descriptor()["mediaType"],
        foreign["mediaType"],
    ]
    assert [blob.distributable for blob in parsed.blobs] == [True, True, False]
    assert parsed.blobs[1] == Descriptor(
        descriptor()["mediaType"], oci_image.parse_digest(DIGEST), len(BYTES)
    )


@pytest.mark.parametrize(
    ("media_type", "document", "why"),
    [
        (oci_image.OCI_INDEX, [], "not a JSON object"),
        (oci_image.OCI_INDEX, {"mediaType": oci_image.OCI_INDEX}, "no manifests list"),
        (oci_image.OCI_MANIFEST, {"config": descriptor(), "layers": None}, "no layers list"),
        (oci_image.OCI_MANIFEST, {"layers": []}, "config is not a descriptor"),
        (oci_image.OCI_MANIFEST, {"config": descriptor(size=-1), "layers": []}, "no size"),
        (oci_image.OCI_MANIFEST, {"config": descriptor(size=True), "layers": []}, "no size"),
        (
            oci_image.OCI_MANIFEST,
            {"config": descriptor(digest="sha256:zz"), "layers": []},
            "config: a sha256 digest",
        ),
        (oci_image.OCI_MANIFEST, {"config": descriptor(mediaType=""), "layers": []}, "no mediaType"),
        (oci_image.OCI_MANIFEST, {"mediaType": oci_image.OCI_INDEX, "manifests": []}, "differs"),
        ("application/vnd.oci.artifact.manifest.v1+json", {"layers": []}, "not one gpudrv copies"),
    ],
)
def test_a_bad_manifest_is_refused(media_type: str, document: Any, why: str) -> None:
    with pytest.raises(ContentError, match=why):
        oci_image.parse_manifest(media_type, document)


def test_the_media_type_comes_from_the_header_else_the_document() -> None:
    assert oci_image.media_type_of(f"{oci_image.OCI_INDEX}; charset=utf-8", {}) == oci_image.OCI_INDEX
    assert (
        oci_image.media_type_of("application/json", {"mediaType": oci_image.DOCKER_LIST})
        == oci_image.DOCKER_LIST
    )
    with pytest.raises(ContentError, match="no OCI image manifest"):
        oci_image.media_type_of("application/json", {"mediaType": "text/html"})


def test_only_the_specs_error_codes_are_repeated() -> None:
    answer = {
        "errors": [{"code": "DENIED", "message": "\x1b[31mgo away"}, {"code": "<script>"}, {"code": "DENIED"}]
    }
    assert oci_image.error_codes(answer) == ["DENIED"]
    assert oci_image.error_codes("not json") == []
    assert oci_image.error_codes({"errors": "x"}) == []


def test_a_token_asks_for_the_challenge_scopes_and_the_clients_own() -> None:
    target = Repository("registry.example.com", "mirror/driver")
    assert target.push_scope == "repository:mirror/driver:pull,push"
    challenged = "repository:mirror/driver:pull,push repository:nvidia/driver:pull"
    assert token_scopes(challenged, [target.push_scope, "repository:nvidia/driver:pull"]) == [
        "repository:mirror/driver:pull,push",
        "repository:nvidia/driver:pull",
    ]
    assert token_scopes(None, [target.scope]) == ["repository:mirror/driver:pull"]
