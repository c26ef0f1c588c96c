"""An image's content as the OCI distribution API moves it: digests, descriptors, manifests, indexes.

Pure: adapters/registry/transfer.py fetches the bytes and decodes the JSON; this checks the bytes
against their digest and reads what a manifest refers to (the OCI image spec's descriptor, image
manifest and image index; Docker's manifest v2 and manifest list have the same fields).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST)
# Layers a registry is not meant to hold (Windows base layers): the image spec says not to push them.
NON_DISTRIBUTABLE = frozenset(
    {
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    }
)
# The distribution spec's error codes: only these are ever repeated from a registry's answer.
ERROR_CODES = frozenset(
    {
        "BLOB_UNKNOWN", "BLOB_UPLOAD_INVALID", "BLOB_UPLOAD_UNKNOWN", "DIGEST_INVALID",
        "MANIFEST_BLOB_UNKNOWN", "MANIFEST_INVALID", "MANIFEST_UNKNOWN", "NAME_INVALID", "NAME_UNKNOWN",
        "SIZE_INVALID", "UNAUTHORIZED", "DENIED", "UNSUPPORTED", "TOOMANYREQUESTS",
    }
)  # fmt: skip
MAX_DEPTH = 2  # an index of indexes of manifests at most

_HEX_LENGTH = {"sha256": 64, "sha512": 128}  # the algorithms the image spec registers
_DIGEST = re.compile(r"([a-z0-9]+(?:[+._-][a-z0-9]+)*):([a-zA-Z0-9=_-]+)")


class ContentError(ValueError):
    """Bytes or a document that are not what their descriptor or digest says."""


@dataclass(frozen=True)
class Transfer:
    """What copying an image sent to the target registry (adapters/registry/transfer.py counts it)."""

    manifests: int = 0  # manifests written (0 when the target already had them all)
    blobs_sent: int = 0  # blobs uploaded
    blobs_mounted: int = 0  # blobs cross-repository mounted
    # Blobs the target already had (not sent), of those looked at: the blobs of a platform manifest
    # the target already has are not looked at again (the registry checked them when it took it).
    blobs_present: int = 0
    bytes_sent: int = 0


@dataclass(frozen=True, order=True)
class Digest:
    algorithm: str  # sha256, sha512
    hex: str

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"

    def hasher(self) -> Hasher:
        return Hasher(self.algorithm)


def parse_digest(text: Any) -> Digest:
    """`sha256:<64 lowercase hex>` (or sha512) -> Digest; ContentError otherwise."""
    if not isinstance(text, str):
        raise ContentError("a digest is not a string")
    found = _DIGEST.fullmatch(text)
    if found is None:
        raise ContentError("a digest is not algorithm:hex")
    algorithm, hex_part = found.groups()
    length = _HEX_LENGTH.get(algorithm)
    if length is None:
        raise ContentError("a digest's algorithm is not sha256 or sha512")
    if len(hex_part) != length or not re.fullmatch(r"[0-9a-f]+", hex_part):
        raise ContentError(f"a {algorithm} digest is not {length} lowercase hex digits")
    return Digest(algorithm, hex_part)


class Hasher:
    """The digest and size of bytes that arrive in pieces."""

    def __init__(self, algorithm: str = "sha256") -> None:
        self.algorithm, self.size = algorithm, 0
        self._hash = hashlib.new(algorithm)

    def update(self, chunk: bytes) -> None:
        self._hash.update(chunk)
        self.size += len(chunk)

    def digest(self) -> Digest:
        return Digest(self.algorithm, self._hash.hexdigest())


def digest_of(data: bytes, algorithm: str = "sha256") -> Digest:
    hasher = Hasher(algorithm)
    hasher.update(data)
    return hasher.digest()


def check_content(data: bytes, expected: Digest, size: int | None = None) -> None:
    """ContentError unless the bytes have the expected digest (and size, when given)."""
    if size is not None and len(data) != size:
        raise ContentError(f"{expected} has {len(data)} bytes, its descriptor says {size}")
    found = digest_of(data, expected.algorithm)
    if found != expected:
        raise ContentError(f"the bytes of {expected} hash to {found}")


@dataclass(frozen=True)
class Descriptor:
    """What a manifest points at: a blob (config, layer) or, in an index, another manifest."""

    media_type: str
    digest: Digest
    size: int
    platform: str | None = None  # os/architecture[/variant] of an index's entry

    @property
    def distributable(self) -> bool:
        return self.media_type not in NON_DISTRIBUTABLE


@dataclass(frozen=True)
class Manifest:
    """An image manifest (its blobs: config, then layers) or an index (its manifests)."""

    media_type: str
    manifests: tuple[Descriptor, ...] = ()  # an index's entries
    blobs: tuple[Descriptor, ...] = ()  # an image manifest's config and layers

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES


def media_type_of(content_type: str | None, document: Any) -> str:
    """The manifest's media type: the registry's Content-Type (what a PUT must send back), else the
    document's own `mediaType`; ContentError when neither is one gpudrv copies."""
    header = (content_type or "").split(";", 1)[0].strip().lower()
    if header in MANIFEST_TYPES:
        return header
    own = document.get("mediaType") if isinstance(document, Mapping) else None
    if isinstance(own, str) and own in MANIFEST_TYPES:
        return own
    raise ContentError("a manifest is no OCI image manifest or index, no Docker manifest v2 or list")


def parse_manifest(media_type: str, document: Any) -> Manifest:
    """The manifest's descriptors; ContentError says what is wrong with it."""
    if not isinstance(document, Mapping):
        raise ContentError("a manifest is not a JSON object")
    own = document.get("mediaType")
    if own is not None and own != media_type:
        raise ContentError("a manifest's mediaType differs from the media type the registry gave")
    if media_type in INDEX_TYPES:
        entries = document.get("manifests")
        if not isinstance(entries, list):
            raise ContentError("an index has no manifests list")
        found = tuple(_descriptor(entry, "an index entry") for entry in entries)
        return Manifest(media_type, manifests=found)
    if media_type not in IMAGE_TYPES:
        raise ContentError("a manifest's media type is not one gpudrv copies")
    layers = document.get("layers")
    if not isinstance(layers, list):
        raise ContentError("an image manifest has no layers list")
    config = _descriptor(document.get("config"), "an image manifest's config")
    return Manifest(media_type, blobs=(config, *(_descriptor(layer, "a layer") for layer in layers)))


def _descriptor(value: Any, what: str) -> Descriptor:
    if not isinstance(value, Mapping):
        raise ContentError(f"{what} is not a descriptor object")
    media_type, size = value.get("mediaType"), value.get("size")
    if not isinstance(media_type, str) or not media_type:
        raise ContentError(f"{what} has no mediaType")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ContentError(f"{what} has no size (a whole number of bytes)")
    try:
        digest = parse_digest(value.get("digest"))
    except ContentError as exc:
        raise ContentError(f"{what}: {exc}") from None
    return Descriptor(media_type, digest, size, _platform(value.get("platform")))


def _platform(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    parts = [value.get("os"), value.get("architecture"), value.get("variant")]
    words = [part for part in parts if isinstance(part, str) and re.fullmatch(r"[a-z0-9._-]{1,40}", part)]
    return "/".join(words) or None


def error_codes(document: Any) -> list[str]:
    """The spec's error codes in a registry's error answer (`{"errors": [{"code": ...}]}`); codes the
    spec does not define are left out, so what is returned can be shown as it is."""
    errors = document.get("errors") if isinstance(document, Mapping) else None
    if not isinstance(errors, list):
        return []
    codes = (error.get("code") for error in errors if isinstance(error, Mapping))
    return list(dict.fromkeys(code for code in codes if isinstance(code, str) and code in ERROR_CODES))


def config_env(document: Any) -> tuple[str, ...]:
    """`config.Env` of an image's config blob (the image spec's `config` object): no Env is none;
    ContentError when it is not a list of strings."""
    if not isinstance(document, Mapping):
        raise ContentError("an image config is not a JSON object")
    config = document.get("config")
    if config is None:
        return ()
    if not isinstance(config, Mapping):
        raise ContentError("an image config's config is not an object")
    env = config.get("Env")
    if env is None:
        return ()
    if not isinstance(env, list) or not all(isinstance(item, str) for item in env):
        raise ContentError("an image config's config.Env is not a list of strings")
    return tuple(env)
