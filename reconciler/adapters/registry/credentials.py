"""The credentials for an OCI registry, from the auth file gpudrv shares with the container tools.

They come from $REGISTRY_AUTH_FILE, else the docker config ($DOCKER_CONFIG/config.json,
~/.docker/config.json): `auths[host].auth` (base64 of user:password) or `username`/`password`; an
entry for the repository or one of its parents (podman's auth.json) wins over the host's. Credential
helpers are not run: a host whose credentials a helper keeps is one clear error. No entry: None, and
the client (oci.py) asks anonymously.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.core.images.registry import DOCKER_HUB, Repository
from reconciler.errors import GpudrvError

AUTH_FILE = "REGISTRY_AUTH_FILE"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    source: Path  # the file they came from, for messages

    def basic(self) -> str:
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def auth_file() -> Path | None:
    """$REGISTRY_AUTH_FILE (podman, skopeo, buildah), else the docker config when it exists."""
    given = os.environ.get(AUTH_FILE)
    if given is not None:
        if not given.strip():
            raise GpudrvError(f"${AUTH_FILE}: empty path (is a variable unset?)")
        return Path(given)
    folder = os.environ.get("DOCKER_CONFIG")
    path = Path(folder) / "config.json" if folder else Path.home() / ".docker" / "config.json"
    return path if path.is_file() else None


def for_repository(repository: Repository, path: Path | None = None) -> Credentials | None:
    """The credentials for the repository's registry from the auth file, or None (anonymous). An entry
    for the repository or one of its parents (podman's auth.json) wins over the host's."""
    path = path or auth_file()
    if path is None:
        return None
    document = _read_json(path)
    auths = _mapping(document.get("auths"), path, "auths")
    entries = {_normal_key(key): (key, value) for key, value in auths.items()}
    for candidate in _candidates(repository):
        if candidate not in entries:
            continue
        key, entry = entries[candidate]
        found = _entry(_mapping(entry, path, f"auths.{key}"), path, key)
        if found is not None:
            return Credentials(*found, path)
        _refuse_helper(document, path, repository, listed=True)
    _refuse_helper(document, path, repository, listed=False)
    return None


def _read_json(path: Path) -> Mapping[str, Any]:
    text = files.read_text(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GpudrvError(f"not JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
    return _mapping(document, path, "the file")


def _mapping(value: Any, path: Path, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise GpudrvError(f"{path}: {where} must be a JSON object")
    return value


def _normal_key(key: str) -> str:
    """Docker writes `https://index.docker.io/v1/` for Docker Hub and may keep a scheme or a path."""
    host = re.sub(r"^[a-z]+://", "", key.strip()).rstrip("/")
    host = re.sub(r"/v[12]$", "", host)
    first, slash, rest = host.partition("/")
    if first in ("index.docker.io", "registry-1.docker.io"):
        first = DOCKER_HUB
    return first + slash + rest


def _candidates(repository: Repository) -> Iterator[str]:
    parts = repository.path.split("/")
    for end in range(len(parts), 0, -1):
        yield f"{repository.host}/{'/'.join(parts[:end])}"
    yield repository.host


def _entry(entry: Mapping[str, Any], path: Path, key: str) -> tuple[str, str] | None:
    encoded = entry.get("auth")
    if isinstance(encoded, str) and encoded:
        try:
            user, colon, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, colon, password = "", "", ""
        if not colon or not user:
            raise GpudrvError(f"{path}: auths.{key}.auth is not base64 of username:password")
        return user, password
    name, secret = entry.get("username"), entry.get("password")
    if isinstance(name, str) and name and isinstance(secret, str):
        return name, secret
    if entry.get("identitytoken"):
        raise GpudrvError(
            f"{path}: auths.{key} holds an identity token (an OAuth refresh token), which gpudrv does "
            "not exchange; give username and password (or auth) for it"
        )
    return None


def _refuse_helper(document: Mapping[str, Any], path: Path, repository: Repository, listed: bool) -> None:
    """Credentials a helper keeps are out of reach (gpudrv runs no docker-credential-* program): say so
    rather than ask anonymously and fail with a misleading 401."""
    helpers = document.get("credHelpers")
    helper = helpers.get(repository.host) if isinstance(helpers, Mapping) else None
    store = document.get("credsStore") if listed else None
    name = helper or store
    if isinstance(name, str) and name:
        raise GpudrvError(
            f"{path}: the credentials for {repository.host} are kept by docker-credential-{name}, which "
            f"gpudrv does not run; put them in a file for gpudrv (auths.{repository.host}.auth, base64 of "
            f"username:password) and point ${AUTH_FILE} at it"
        )
