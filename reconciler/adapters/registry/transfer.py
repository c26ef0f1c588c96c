"""Copy an image from one OCI registry to another over the distribution API, digests preserved.

The tag's manifest is fetched from the source and must still have the digest the plan resolved; for
an index, every platform manifest is fetched by digest and checked against its descriptor. Blobs
(configs, layers) go first: a HEAD on the target (present: not sent), a cross-repository mount when
both repositories are on one registry, else a stream from the source into a POST-then-PUT upload,
checked for size and digest while it flows (never a whole layer in memory). Platform manifests are
PUT by digest, the index (or the single manifest) by tag last, so a tag never points at an
incomplete image; a HEAD of the tag on the target then checks the digest. A rerun sends only what
the target lacks. See docs/registry.md, "Copying an image".
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconciler.adapters.registry import manifests, oci
from reconciler.core.images.oci_image import (
    MAX_DEPTH,
    ContentError,
    Descriptor,
    Digest,
    Manifest,
    Transfer,
    check_content,
    digest_of,
    error_codes,
    parse_digest,
)
from reconciler.core.images.registry import Repository
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from reconciler.adapters.registry.oci import Response

CHUNK = 1 << 20  # bytes per read of a streamed blob


@dataclass(frozen=True)
class Copied:
    tag: str
    digest: str  # the manifest (index) digest, identical in both registries
    sent: Transfer  # what reached the target


def connect_target(
    target: Repository, source: Repository, concurrency: int = oci.CONCURRENCY
) -> AbstractContextManager[oci.Client]:
    """A client for the target that asks for a token to push there, and on the source's registry to
    pull the source too (a cross-repository mount needs both)."""
    scopes = [target.push_scope]
    if mounts_from(source, target) is not None:
        scopes.append(source.scope)
    return oci.connect(target, concurrency, scopes)


def mounts_from(source: Repository, target: Repository) -> str | None:
    """The repository a target blob can be mounted from: the source's, on the same registry."""
    same = source.api_host == target.api_host and source.path != target.path
    return source.path if same else None


# --- what upstream has ---------------------------------------------------------------------------


def resolve_all(source: oci.Client, tags: Sequence[str]) -> dict[str, str | None]:
    """Each tag's manifest digest in the source (None: no such tag), `concurrency` at a time; the
    first error stops the rest."""
    found = source.each(lambda tag: _digest_at(source, tag), list(tags))
    return {tag: None if digest is None else str(digest) for tag, digest in found.items()}


def _digest_at(client: oci.Client, reference: str) -> Digest | None:
    """The digest a reference resolves to: Docker-Content-Digest of a HEAD, else the GET body's."""
    response = client.request("HEAD", manifests.manifest_url(client, reference), manifests.ACCEPT)
    if response.status == 404:
        return None
    if response.status != 200:
        raise client.unexpected(response, f"HEAD {manifests.ref(client, reference)}")
    header = response.headers.get("Docker-Content-Digest")
    if header:
        return manifests.header_digest(client, header, reference)
    return digest_of(manifests.get_manifest(client, reference)[1])


# --- the copy ------------------------------------------------------------------------------------


def copy(
    source: oci.Client, target: oci.Client, tag: str, digest: str, shared: SharedBlobs | None = None
) -> Copied:
    """Copy the image `tag` pointed to when planned (`digest`) from source to target (module doc). A
    tag the target has with another digest is not overwritten. A GpudrvError names the tag; a
    RegistryFailure (down, refused) is the registry's, not the tag's."""
    try:
        return _copy(source, target, tag, digest, shared or SharedBlobs())
    except oci.RegistryFailure:
        raise
    except GpudrvError as exc:
        raise GpudrvError(
            f"copying {manifests.ref(source, tag)} to {target.repository}: {exc.message}"
        ) from None


def copy_all(
    source: oci.Client, target: oci.Client, plan: Sequence[tuple[str, str]], concurrency: int
) -> list[Copied | GpudrvError]:
    """Copy each (tag, digest), `concurrency` tags at a time, blobs shared between tags sent once. A
    tag that fails is its GpudrvError in the list and the others go on; a registry that is down or
    refuses (RegistryFailure) is raised once for the whole run, the tags not started left alone."""
    shared = SharedBlobs()
    results: dict[int, Copied | GpudrvError] = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="gpudrv-copy") as pool:
        futures = {
            pool.submit(copy, source, target, tag, digest, shared): index
            for index, (tag, digest) in enumerate(plan)
        }
        for future in concurrent.futures.as_completed(futures):
            error = future.exception()
            if isinstance(error, oci.RegistryFailure):
                pool.shutdown(wait=True, cancel_futures=True)
                raise error
            if error is not None and not isinstance(error, GpudrvError):
                raise error
            results[futures[future]] = error if isinstance(error, GpudrvError) else future.result()
    return [results[index] for index in range(len(plan))]


@dataclass
class _Counts:
    manifests: int = 0
    sent: int = 0
    mounted: int = 0
    present: int = 0
    bytes_sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def blob(self, outcome: str, size: int) -> None:
        with self.lock:
            if outcome == "sent":
                self.sent, self.bytes_sent = self.sent + 1, self.bytes_sent + size
            elif outcome == "mounted":
                self.mounted += 1
            else:
                self.present += 1


def _copy(source: oci.Client, target: oci.Client, tag: str, digest: str, shared: SharedBlobs) -> Copied:
    try:
        planned = parse_digest(digest)
    except ContentError as exc:
        raise GpudrvError(f"the planned digest of {tag}: {exc}") from None
    media_type, body = manifests.get_manifest(source, tag)
    sent_digest = digest_of(body, planned.algorithm)
    if sent_digest != planned:
        raise GpudrvError(
            f"{source.where}: the tag now resolves to {sent_digest}, not {planned} as planned (it changed "
            "between plan and copy); nothing copied"
        )
    existing = _digest_at(target, tag)
    if existing not in (None, planned):
        raise GpudrvError(
            f"{target.where}: the tag already points at {existing}, not {planned}; gpudrv does not "
            "overwrite a tag (delete it there to copy it again)"
        )
    counts = _Counts()
    work = _Work(source, target, mounts_from(source.repository, target.repository), shared, counts)
    work.contents(manifests.parse(source, media_type, body, tag), depth=0)
    if existing != planned:
        _put_manifest(target, tag, media_type, body)
        counts.manifests += 1
    found = _digest_at(target, tag)
    if found != planned:
        raise GpudrvError(
            f"{manifests.ref(target, tag)} is {found or 'missing'} after the copy, not {planned} "
            "(the copy does not verify by digest)"
        )
    sent = Transfer(counts.manifests, counts.sent, counts.mounted, counts.present, counts.bytes_sent)
    return Copied(tag, str(planned), sent)


@dataclass
class _Work:
    source: oci.Client
    target: oci.Client
    mount_from: str | None
    shared: SharedBlobs
    counts: _Counts

    def contents(self, manifest: Manifest, depth: int) -> None:
        """What the manifest refers to onto the target: its blobs, or an index's manifests (each
        after its own contents, by digest)."""
        for blob in dict.fromkeys(manifest.blobs):
            if blob.distributable:
                outcome = self.shared.ensure(blob.digest, functools.partial(self.blob, blob))
                self.counts.blob(outcome, blob.size)
        for entry in dict.fromkeys(manifest.manifests):
            if _digest_at(self.target, str(entry.digest)) == entry.digest:
                continue  # the registry checked its contents when it took it
            if depth >= MAX_DEPTH:
                raise GpudrvError(f"{self.source.where}: indexes nest deeper than {MAX_DEPTH} levels")
            media_type, body = manifests.get_manifest(self.source, str(entry.digest))
            try:
                check_content(body, entry.digest, entry.size)
            except ContentError as exc:
                raise GpudrvError(f"{self.source.where}: manifest {entry.digest}: {exc}") from None
            self.contents(manifests.parse(self.source, media_type, body, str(entry.digest)), depth + 1)
            _put_manifest(self.target, str(entry.digest), media_type, body)
            self.counts.manifests += 1

    def blob(self, blob: Descriptor) -> str:
        """present, mounted or sent."""
        target = self.target
        response = target.request("HEAD", manifests.blob_url(target, blob.digest), {})
        if response.status == 200:
            return "present"
        if response.status != 404:
            raise target.unexpected(response, f"HEAD blob {blob.digest}")
        query = {"mount": str(blob.digest), "from": self.mount_from} if self.mount_from else {}
        url = f"{target.base}/blobs/uploads/" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        response = target.request("POST", url, {}, write=True)
        if response.status == 201 and self.mount_from:
            return "mounted"
        if response.status != 202:
            raise _write_error(target, response, "POST a blob upload")
        location = response.headers.get("Location")
        if not location:
            raise GpudrvError(f"{target.where}: its answer to an upload POST has no Location")
        parts = urllib.parse.urlsplit(target.same_origin(urllib.parse.urljoin(url, location), "its upload"))
        query_list = [*urllib.parse.parse_qsl(parts.query), ("digest", str(blob.digest))]
        put = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query_list)))
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(blob.size)}
        response = target.request("PUT", put, headers, lambda: self.stream(blob), write=True)
        if response.status != 201:
            raise _write_error(target, response, f"PUT blob {blob.digest}")
        return "sent"

    def stream(self, blob: Descriptor) -> Iterator[bytes]:
        """The blob from the source, checked while it flows: the last piece is held back until size
        and digest are right, so a wrong blob never completes an upload."""
        source = self.source
        url = manifests.blob_url(source, blob.digest)
        response = source.request("GET", url, {}, stream=True)
        try:
            if response.status != 200:
                raise source.unexpected(response, f"GET blob {blob.digest}")
            hasher, held = blob.digest.hasher(), b""
            for chunk in source.chunks(response, url, CHUNK):
                hasher.update(chunk)
                if hasher.size > blob.size:
                    raise GpudrvError(f"{source.where}: blob {blob.digest} is over its {blob.size} bytes")
                if held:
                    yield held
                held = chunk
            if hasher.size != blob.size or hasher.digest() != blob.digest:
                raise GpudrvError(
                    f"{source.where}: blob {blob.digest} arrived as {hasher.size} bytes hashing to "
                    f"{hasher.digest()}, not {blob.size} bytes"
                )
            if held:
                yield held
        finally:
            response.close()


class SharedBlobs:
    """Blobs one run has handled, so that tags copied at once send a shared layer once: the first
    tag sends it, the others wait and count it present (or try themselves if it failed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handled: dict[Digest, concurrent.futures.Future[str]] = {}

    def ensure(self, digest: Digest, work: Callable[[], str]) -> str:
        with self._lock:
            future = self._handled.get(digest)
            mine = future is None or (future.done() and future.exception() is not None)
            if mine:
                future = self._handled[digest] = concurrent.futures.Future()
        assert future is not None
        if not mine:
            try:
                future.result()
            except Exception:  # the other tag's attempt failed: this one tries
                return work()
            return "present"
        try:
            outcome = work()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(outcome)
        return outcome


# --- the endpoints -------------------------------------------------------------------------------


def _put_manifest(client: oci.Client, reference: str, media_type: str, body: bytes) -> None:
    response = client.request(
        "PUT", manifests.manifest_url(client, reference), {"Content-Type": media_type}, body, write=True
    )
    if response.status != 201:
        raise _write_error(client, response, f"PUT manifest {manifests.ref(client, reference)}")


def _write_error(client: oci.Client, response: Response, what: str) -> GpudrvError:
    """A refused write is the `refuses pushes` line; other answers name the spec's error codes only."""
    codes = error_codes(manifests.json_of(response.data, quiet=True))
    status = f"{response.status} {' '.join(codes)}".strip()
    if response.status in (401, 403) or {"DENIED", "UNAUTHORIZED"} & set(codes):
        return client.refuses_pushes(f"{what} answered {status}")
    return GpudrvError(f"{client.where}: {what} answered {status}")
