"""The environment of the GPU workloads' images, read from their registries (issue 27): the OCI config
of each (reference, platform) a pod runs, for core/cuda_require to evaluate NVIDIA_REQUIRE_CUDA.

Per image: GET the manifest (the digest when the reference has one, else the tag); an index or a
manifest list gives the platform's manifest (core/registry.pick_platform), fetched by digest and
checked against its descriptor; then the config blob, checked for size and digest, and its
`config.Env`. Images are grouped by repository, one oci.Client each (the auth file's credentials,
token auth, timeouts), `concurrency` requests at once. Within one call a manifest is fetched once per
reference and a config once per platform manifest digest, so tags sharing an image cost one config.

Nothing raises out of read_configs: the callers are gates, and an image that cannot be read is a note
on it (never a pass, never a crash). A registry that fails as a whole (down, TLS, credentials
refused) is that note on each of its images. Notes repeat no registry text but the spec's error codes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.registry import manifests, oci
from reconciler.core.images.oci_image import (
    MAX_DEPTH,
    ContentError,
    Digest,
    check_content,
    config_env,
    digest_of,
    parse_digest,
)
from reconciler.core.images.registry import (
    ImageReference,
    Repository,
    parse_image_reference,
    parse_platform,
    pick_platform,
)
from reconciler.errors import GpudrvError

MAX_CONFIG = 4 << 20  # bytes: an image config is a few KiB; more is refused unread
CHUNK = 64 << 10


@dataclass(frozen=True)
class ImageConfig:
    reference: str  # as the pod names it
    platform: str  # "linux/amd64"
    digest: str | None  # the platform manifest's digest that was read
    env: tuple[str, ...] | None  # config.Env; None when it could not be read
    note: str = ""  # why not: one line, registry text only as spec error codes


Key = tuple[str, str]


def read_configs(requests: Sequence[tuple[str, str]], concurrency: int = 8) -> dict[Key, ImageConfig]:
    """Each (reference, platform)'s config (module doc); every request has an answer."""
    answers: dict[Key, ImageConfig] = {}
    groups: dict[Repository, list[tuple[Key, ImageReference]]] = {}
    for key in dict.fromkeys(requests):
        reference, platform = key
        try:
            image = parse_image_reference(reference)
            parse_platform(platform)
        except ValueError as exc:
            answers[key] = ImageConfig(reference, platform, None, None, str(exc))
            continue
        groups.setdefault(image.repository, []).append((key, image))
    for repository, items in sorted(groups.items()):
        answers.update(_read_repository(repository, items, max(1, concurrency)))
    return {key: answers[key] for key in requests}


def _read_repository(
    repository: Repository, items: list[tuple[Key, ImageReference]], concurrency: int
) -> dict[Key, ImageConfig]:
    try:
        with oci.connect(repository, concurrency) as client:
            reader = _Reader(client)
            found = client.each(reader.read, items)
    except GpudrvError as exc:  # the registry as a whole (RegistryFailure), or the auth file
        return {key: ImageConfig(*key, None, None, _one_line(exc.message)) for key, _ in items}
    return {key: found[key, image] for key, image in items}


class _Once:
    """A value per key computed once, however many threads ask at the same time (a failure too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[Any, Future[Any]] = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        with self._lock:
            future = self._futures.get(key)
            mine = future is None
            if future is None:
                future = self._futures[key] = Future()
        if mine:
            try:
                future.set_result(compute())
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()


class _Reader:
    def __init__(self, client: oci.Client) -> None:
        self.client = client
        self._manifests = _Once()  # reference -> (media type, bytes)
        self._configs = _Once()  # platform manifest digest -> env

    def read(self, item: tuple[Key, ImageReference]) -> ImageConfig:
        """One image's config, or a note; a RegistryFailure is the registry's and goes up."""
        (reference, platform), image = item
        try:
            digest, env = self._read(image, platform)
        except oci.RegistryFailure:
            raise
        except (GpudrvError, ContentError) as exc:
            message = exc.message if isinstance(exc, GpudrvError) else f"{self.client.where}: {exc}"
            return ImageConfig(reference, platform, None, None, _one_line(message))
        return ImageConfig(reference, platform, str(digest), env)

    def _read(self, image: ImageReference, platform: str) -> tuple[Digest, tuple[str, ...]]:
        client = self.client
        name = image.manifest
        media_type, body = self._manifest(name)
        digest = parse_digest(image.digest) if image.digest else digest_of(body)
        if image.digest:
            _checked(client, body, digest, None, f"manifest {manifests.ref(client, name)}")
        manifest = manifests.parse(client, media_type, body, name)
        for _ in range(MAX_DEPTH):
            if not manifest.is_index:
                break
            offered = [entry.platform for entry in manifest.manifests]
            chosen = pick_platform(platform, offered)
            if chosen is None:
                has = ", ".join(sorted({item for item in offered if item})) or "none named"
                raise GpudrvError(
                    f"{client.where}: {manifests.ref(client, name)} has no {platform} image "
                    f"(its platforms: {has})"
                )
            entry = manifest.manifests[chosen]
            name, digest = str(entry.digest), entry.digest
            media_type, body = self._manifest(name)
            _checked(client, body, entry.digest, entry.size, f"manifest {name}")
            manifest = manifests.parse(client, media_type, body, name)
        if manifest.is_index:
            raise GpudrvError(
                f"{client.where}: {manifests.ref(client, name)}: indexes nest deeper than {MAX_DEPTH}"
            )
        config = manifest.blobs[0]
        env: tuple[str, ...] = self._configs.get(digest, lambda: self._config(config.digest, config.size))
        return digest, env

    def _manifest(self, reference: str) -> tuple[str, bytes]:
        found: tuple[str, bytes] = self._manifests.get(
            reference, lambda: manifests.get_manifest(self.client, reference)
        )
        return found

    def _config(self, digest: Digest, size: int) -> tuple[str, ...]:
        client = self.client
        what = f"config {digest}"
        if size > MAX_CONFIG:
            raise GpudrvError(f"{client.where}: {what} is {size} bytes, over gpudrv's {MAX_CONFIG}")
        url = manifests.blob_url(client, digest)
        response = client.request("GET", url, {}, stream=True)
        try:
            if response.status != 200:
                raise manifests.answered(client, response, f"GET {what}")
            data = bytearray()
            for chunk in client.chunks(response, url, CHUNK):
                data += chunk
                if len(data) > size:
                    raise GpudrvError(f"{client.where}: {what} is over its {size} bytes")
        finally:
            response.close()
        _checked(client, bytes(data), digest, size, what)
        try:
            return config_env(manifests.json_of(bytes(data), what="an image config"))
        except ContentError as exc:
            raise GpudrvError(f"{client.where}: {what}: {exc}") from None


def _checked(client: oci.Client, body: bytes, digest: Digest, size: int | None, what: str) -> None:
    try:
        check_content(body, digest, size)
    except ContentError as exc:
        raise GpudrvError(f"{client.where}: {what}: {exc}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())
