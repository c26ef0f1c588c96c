"""Reading manifests over the distribution API, shared by transfer.py (copying images) and
image_config.py (reading their configs): the GET with the manifest types gpudrv accepts, the bytes
checked against Docker-Content-Digest, the JSON parsed into core/oci_image's Manifest.

Registry text never reaches a message: only statuses and the spec's error codes (oci_image.error_codes).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from reconciler.adapters.registry import oci
from reconciler.core.images.oci_image import (
    MANIFEST_TYPES,
    ContentError,
    Digest,
    Manifest,
    digest_of,
    error_codes,
    media_type_of,
    parse_digest,
    parse_manifest,
)
from reconciler.errors import GpudrvError

ACCEPT = {"Accept": ", ".join(MANIFEST_TYPES)}
MAX_MANIFEST = 4 << 20  # distribution refuses manifests over 4 MiB; so does gpudrv


def manifest_url(client: oci.Client, reference: str) -> str:
    return f"{client.base}/manifests/{urllib.parse.quote(reference, safe=':')}"


def blob_url(client: oci.Client, digest: Digest) -> str:
    return f"{client.base}/blobs/{digest}"


def ref(client: oci.Client, reference: str) -> str:
    """`repository:tag` or `repository@digest`, to name it in a message."""
    separator = "@" if ":" in reference else ":"
    return f"{client.repository}{separator}{reference}"


def get_manifest(client: oci.Client, reference: str) -> tuple[str, bytes]:
    """The manifest's media type (as the registry sends it) and exact bytes, their digest checked
    against the registry's Docker-Content-Digest when it sends one."""
    response = client.request("GET", manifest_url(client, reference), ACCEPT)
    if response.status == 404:
        raise GpudrvError(f"{client.where}: has no manifest {ref(client, reference)}")
    if response.status != 200:
        raise answered(client, response, f"GET {ref(client, reference)}")
    body = response.data
    if len(body) > MAX_MANIFEST:
        raise GpudrvError(f"{client.where}: manifest {ref(client, reference)} is over {MAX_MANIFEST} bytes")
    header = response.headers.get("Docker-Content-Digest")
    if header:
        said = header_digest(client, header, reference)
        if digest_of(body, said.algorithm) != said:
            raise GpudrvError(
                f"{client.where}: sent a manifest for {ref(client, reference)} whose bytes do not match "
                f"its digest {said}"
            )
    try:
        media_type = media_type_of(response.headers.get("Content-Type"), json_of(body))
    except ContentError as exc:
        raise GpudrvError(f"{client.where}: {ref(client, reference)}: {exc}") from None
    return media_type, body


def answered(client: oci.Client, response: oci.Response, what: str) -> GpudrvError:
    """An answer that is not the one asked for: its status and the spec's error codes, nothing else
    the registry wrote (not even the reason phrase)."""
    codes = error_codes(json_of(response.data, quiet=True))
    status = " ".join([str(response.status), *codes])
    if response.status == 403:
        return GpudrvError(f"{client.where}: {what}: access denied ({status})")
    return GpudrvError(f"{client.where}: {what}: answered {status}")


def parse(client: oci.Client, media_type: str, body: bytes, reference: str) -> Manifest:
    try:
        return parse_manifest(media_type, json_of(body))
    except ContentError as exc:
        raise GpudrvError(f"{client.where}: {ref(client, reference)}: {exc}") from None


def header_digest(client: oci.Client, header: str, reference: str) -> Digest:
    try:
        return parse_digest(header.strip())
    except ContentError as exc:
        raise GpudrvError(
            f"{client.where}: the Docker-Content-Digest of {ref(client, reference)}: {exc}"
        ) from None


def json_of(body: bytes, quiet: bool = False, what: str = "a manifest") -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        if quiet:
            return None
        raise ContentError(f"{what} is not JSON") from None
