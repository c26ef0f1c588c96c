"""The OCI registry a support matrix stands for: repository names, the protocol's headers, and the
comparison of matrix rows with the tags the registry has.

Pure: adapters/registry/oci.py does the HTTP (the OCI distribution API) and hands the answers here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.images import matrix
from reconciler.core.images.matrix import Matrix, Row
from reconciler.core.images.oci_image import ContentError, parse_digest
from reconciler.core.images.tags import ImageKey

# The distribution spec's repository name: path components of lowercase alphanumerics with separators.
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PORT = re.compile(r"[0-9]{1,5}")
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
EXAMPLE = "registry.example.com/nvidia/driver"


@dataclass(frozen=True, order=True)
class Repository:
    """`host[:port]/path` of a repository in an OCI registry: where the matrix's images are pushed."""

    host: str  # as written, with its port: the key of the credentials too
    path: str  # nvidia/driver

    def __str__(self) -> str:
        return f"{self.host}/{self.path}"

    @property
    def api_host(self) -> str:
        """The host that serves the API (Docker Hub's is not docker.io)."""
        return DOCKER_HUB_API if self.host == DOCKER_HUB else self.host

    def reference(self, tag: str) -> str:
        return f"{self}:{tag}"

    @property
    def scope(self) -> str:
        """The token scope a pull needs (distribution's token auth)."""
        return f"repository:{self.path}:pull"

    @property
    def push_scope(self) -> str:
        """The token scope a push needs (a blob upload, a manifest PUT)."""
        return f"repository:{self.path}:pull,push"


def parse_repository(text: str) -> Repository:
    """`registry.example.com/nvidia/driver` -> Repository; ValueError says what is wrong."""
    value = text.strip()
    for prefix in ("https://", "http://"):
        if value.startswith(prefix):
            raise ValueError(f"{text!r}: give the repository without {prefix} (gpudrv speaks HTTPS)")
    host, _, path = value.partition("/")
    if not path:
        raise ValueError(f"{text!r} is no repository: give host/path, like {EXAMPLE}")
    if not _is_host(host):
        raise ValueError(
            f"{text!r} does not start with a registry host (one with a '.' or a port, or localhost), "
            f"like {EXAMPLE}"
        )
    name, at, _ = path.partition("@")
    last = name.rsplit("/", 1)[-1]
    if at or ":" in last:
        raise ValueError(f"{text!r}: give the repository without a tag or digest, like {EXAMPLE}")
    return Repository(host, _path(text, host, name))


def _path(text: str, host: str, name: str) -> str:
    """The repository's path, each component checked; Docker Hub's official images under library/."""
    components = name.split("/")
    bad = next((part for part in components if not _COMPONENT.fullmatch(part)), None)
    if bad is not None:
        raise ValueError(
            f"{text!r}: path component {bad!r} is not a repository name (lowercase letters and digits, "
            "separated by '.', '_', '__' or '-')"
        )
    return f"library/{name}" if host == DOCKER_HUB and len(components) == 1 else name


def _is_host(host: str) -> bool:
    name, colon, port = host.partition(":")
    if colon and not _PORT.fullmatch(port):
        return False
    if not _HOST.fullmatch(name):
        return False
    return "." in name or bool(colon) or name == "localhost"


# --- the protocol's headers ----------------------------------------------------------------------


@dataclass(frozen=True)
class Challenge:
    """One WWW-Authenticate challenge: `Bearer realm="...",service="...",scope="..."` or `Basic ...`."""

    scheme: str  # lowercase: bearer, basic
    params: Mapping[str, str]

    def get(self, name: str) -> str | None:
        return self.params.get(name)


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")
_PARAM = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*(?:,|$)')


def challenges(header: str) -> list[Challenge]:
    """Every challenge in a WWW-Authenticate value (RFC 7235: schemes with auth-params; quoted strings
    may hold commas). A part that does not parse ends the list; what came before it stands."""
    found: list[Challenge] = []
    position = 0
    while position < len(header):
        while position < len(header) and header[position] in " ,":
            position += 1
        scheme = _SCHEME.match(header, position)
        if scheme is None:
            break
        position = scheme.end()
        params: dict[str, str] = {}
        while (param := _PARAM.match(header, position)) is not None:
            # A token followed by a space is the next challenge's scheme, not a parameter.
            quoted, plain = param.group(2), param.group(3)
            params[param.group(1).lower()] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else plain
            position = param.end()
        found.append(Challenge(scheme.group(1).lower(), params))
    return found


def token_scopes(challenged: str | None, wanted: Sequence[str]) -> list[str]:
    """The scopes to ask the token service for: the challenge's (space separated) and the client's
    own (a push, a mount's source), each once, in that order."""
    return list(dict.fromkeys([*(challenged or "").split(), *wanted]))


_LINK = re.compile(r"<([^>]*)>\s*((?:;\s*[^;,]+)*)")
_REL_NEXT = re.compile(r';\s*rel\s*=\s*"?([^";]*)"?')


def next_link(header: str | None) -> str | None:
    """The target of the `rel="next"` link of a Link header (RFC 8288), as written (maybe relative)."""
    if not header:
        return None
    for match in _LINK.finditer(header):
        rel = _REL_NEXT.search(match.group(2))
        if rel is not None and "next" in rel.group(1).split():
            return match.group(1)
    return None


def token_of(answer: Any) -> str | None:
    """The bearer token in a token service's JSON answer: `token`, or the OAuth2 `access_token`."""
    if not isinstance(answer, Mapping):
        return None
    for key in ("token", "access_token"):
        value = answer.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def tags_of(answer: Any) -> list[str] | None:
    """The `tags` of a tags/list answer; None when the answer is not shaped like one."""
    if not isinstance(answer, Mapping):
        return None
    tags = answer.get("tags")
    if tags is None:
        return []  # distribution answers `"tags": null` for a repository without tags
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return None
    return list(tags)


# --- the matrix against the registry ---------------------------------------------------------------


@dataclass(frozen=True)
class Extra:
    """A tag the registry has and the matrix lacks; `key` is its row when the tag splits into one."""

    tag: str
    key: ImageKey | None


@dataclass(frozen=True)
class Verification:
    repository: Repository
    checked: int  # rows asked about
    missing: tuple[Row, ...]  # rows whose image the registry does not have
    extra: tuple[Extra, ...] | None = None  # None: the registry's tags were not listed
    other_tags: int = 0  # listed tags that are no driver image tag (latest, 550.90.07-ubuntu22.04...)

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def present(self) -> int:
        return self.checked - len(self.missing)

    def rows_to_add(self) -> list[ImageKey]:
        return [extra.key for extra in self.extra or () if extra.key is not None]


def verify(
    repository: Repository,
    parsed: Matrix,
    exists: Mapping[str, bool],
    registry_tags: Sequence[str] | None = None,
    row_schema: Mapping[str, Any] | None = None,
) -> Verification:
    """Rows whose tag the registry lacks (`exists` answers for every row's tag), and with the
    registry's tags the ones the matrix lacks: those that are a valid row (by `row_schema`) as rows to
    add, the others only counted."""
    missing = tuple(row for row in parsed.rows if not exists[row.key.tag])
    if registry_tags is None:
        return Verification(repository, len(parsed.rows), missing)
    known = parsed.tags()
    extra: list[Extra] = []
    others = 0
    for tag in sorted(set(registry_tags) - known):
        key = _row_key(tag, row_schema)
        if key is None:
            others += 1
        else:
            extra.append(Extra(tag, key))
    return Verification(repository, len(parsed.rows), missing, tuple(extra), others)


def _row_key(tag: str, row_schema: Mapping[str, Any] | None) -> ImageKey | None:
    try:
        key = matrix.key_from_tag(tag)
    except ValueError:
        return None
    if row_schema is not None and matrix.row_problems(key, row_schema):
        return None
    return key if key.tag == tag else None


def wanted_tags(tags: Iterable[str | None]) -> list[str]:
    """The distinct tags to ask the registry about, in a stable order."""
    return sorted({tag for tag in tags if tag})


# --- image references, as Kubernetes and containerd normalize them ---------------------------------

_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)  # regexp.go:68@v0.6.0
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")


@dataclass(frozen=True, order=True)
class ImageReference:
    """A pod's image, normalized: `ubuntu` is docker.io/library/ubuntu:latest; with a digest, the
    digest is what is pulled (a tag beside it is kept only to show)."""

    repository: Repository
    tag: str | None
    digest: str | None  # algorithm:hex

    @property
    def manifest(self) -> str:
        """What to ask the registry's manifests endpoint for: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        return f"{self.repository}{tag}" + (f"@{self.digest}" if self.digest else "")


def parse_image_reference(text: str) -> ImageReference:
    """`[host[:port]/]path[:tag][@digest]` -> ImageReference (docker.io and library/ when there is no
    host, `latest` when there is neither tag nor digest); ValueError says what is wrong."""
    value = text.strip()
    if not value:
        raise ValueError("an image reference is empty")
    if "://" in value:
        raise ValueError(f"{text!r}: an image reference has no scheme (give host/path:tag)")
    if _IDENTIFIER.fullmatch(value):
        raise ValueError(f"{text!r}: an image reference is not 64 hex digits (an image ID)")
    name, at, digest = value.partition("@")
    if at:
        _check_digest(text, digest)
    # distribution/reference's splitDockerDomain (normalize.go:126-171@v0.6.0): the first part is a
    # host when it is localhost, has a '.' or ':', or is not lowercase; index.docker.io is docker.io.
    first, slash, rest = name.partition("/")
    if slash and (first == "localhost" or "." in first or ":" in first or first.lower() != first):
        host_name, colon, port = first.partition(":")
        if not _HOST.fullmatch(host_name) or (colon and not _PORT.fullmatch(port)):
            raise ValueError(f"{text!r}: {first!r} is not a registry host[:port]")
        host, path = (DOCKER_HUB if first == "index.docker.io" else first), rest
    else:
        host, path = DOCKER_HUB, name
    path, colon, tag = path.partition(":")
    if colon and not _TAG.fullmatch(tag):
        raise ValueError(f"{text!r}: tag {tag!r} is not a tag (letters, digits, '_', '.', '-'; at most 128)")
    tag_or_default = tag if colon else (None if at else "latest")
    return ImageReference(Repository(host, _path(text, host, path)), tag_or_default, digest if at else None)


def _check_digest(text: str, digest: str) -> None:
    try:
        parse_digest(digest)
    except ContentError as exc:
        raise ValueError(f"{text!r}: {exc}") from None


# --- platforms -------------------------------------------------------------------------------------

_PLATFORM_WORD = re.compile(r"[a-z0-9._-]{1,40}")
_DEFAULT_VARIANT = {"arm64": "v8"}  # containerd's normalization: arm64 is arm64/v8


def parse_platform(text: str) -> tuple[str, str, str | None]:
    """`linux/amd64`, `linux/arm64/v8` -> (os, architecture, variant); ValueError otherwise."""
    parts = text.strip().lower().split("/")
    if len(parts) not in (2, 3) or not all(_PLATFORM_WORD.fullmatch(part) for part in parts):
        raise ValueError(f"{text!r} is no platform: give os/architecture[/variant], like linux/amd64")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def pick_platform(wanted: str, offered: Sequence[str | None]) -> int | None:
    """The index of the entry of an image index (their platforms, os/architecture[/variant]) that
    serves `wanted`: os and architecture equal, and the variant when `wanted` names one (arm64's
    default is v8); without a variant, an entry without one first. None: no entry serves it."""
    system, architecture, variant = parse_platform(wanted)
    fallback: int | None = None
    for index, platform in enumerate(offered):
        if platform is None:
            continue
        parts = platform.split("/")
        if parts[:2] != [system, architecture]:
            continue
        own = parts[2] if len(parts) > 2 else None
        if variant is None:
            if own is None or own == _DEFAULT_VARIANT.get(architecture):
                return index
            fallback = index if fallback is None else fallback
        elif (own or _DEFAULT_VARIANT.get(architecture)) == variant:
            return index
    return fallback
