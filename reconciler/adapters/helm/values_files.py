"""The files behind a Helm installation: values files, and where a value was set (file:line).

Helm reads a values file with sigs.k8s.io/yaml (YAML 1.1 rules: `550` is a number, `yes` a bool),
so values are parsed as YAML 1.1 here; a Kubernetes manifest's own fields are read as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters import files
from reconciler.adapters.files import manifests, positions, yaml_load
from reconciler.errors import GpudrvError

VERSION_KEYS = ("driver", "version")


@dataclass(frozen=True)
class Layer:
    """A layer of user values and how to find the line of a key in it: the document it was loaded
    from (with ruamel's positions) and the path of the values inside that document."""

    values: Mapping[str, Any]
    file: str
    document: Any = None
    prefix: tuple[str | int, ...] = ()
    line: int = 1  # the line of the layer itself: a --set parameter, a valuesFrom item
    offset: int = 0  # values embedded in a document (a ConfigMap's key): the line before their first

    def origin_of(self, keys: Sequence[str]) -> str | None:
        """`file:line` of the value at `keys` when this layer sets it, else None."""
        node: Any = self.values
        for key in keys:
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        if self.document is None:
            return f"{self.file}:{self.line}"
        line = positions.line_of(self.document, [*self.prefix, *keys], self.line)
        return f"{self.file}:{self.offset + line}"


def values_text(text: str, file: str, line: int = 1) -> tuple[dict[str, Any], Any]:
    """A values file's text as Helm reads it: one mapping (an empty file: no values), plain data,
    and the round-trip document for line numbers; one error line at the problem's line."""
    try:
        documents = list(yaml_load.documents(str(text), version=(1, 1)))
    except yaml_load.Problem as exc:
        at = line - 1 + (exc.line or 1)
        raise GpudrvError(f"not a Helm values file: {exc.message}", file=file, line=at) from None
    document = documents[0] if documents else None
    if document is None:
        return {}, None
    if not isinstance(document, dict):
        raise GpudrvError("a Helm values file is a YAML mapping (key: value)", file=file, line=line)
    return manifests.plain(document), document


def values_file(path: Path) -> Layer:
    """A values file in the repository, as a layer."""
    values, document = values_text(files.read_text(path), str(path))
    return Layer(values, str(path), document)


def last_origin(layers: Sequence[Layer], keys: Sequence[str] = VERSION_KEYS) -> str | None:
    """Where the value at `keys` was set last (the highest layer that sets it), or None."""
    for layer in reversed(layers):
        found = layer.origin_of(keys)
        if found is not None:
            return found
    return None


def inside(root: Path, relative: str, what: str, origin: str) -> Path:
    """`relative` under `root`, refused (one error at `origin`) when it leads outside the repository,
    as Argo CD refuses it (util/io/path/resolved.go:112-175)."""
    base = files.absolute(root).resolve()
    target = (base / relative.lstrip("/")).resolve()
    if target != base and base not in target.parents:
        file, _, line = origin.rpartition(":")
        raise GpudrvError(
            f"{what} {relative!r} is outside the repository ({base}): Argo CD refuses it",
            file=file,
            line=int(line),
        )
    return target


def repository_root(folder: Path) -> Path | None:
    """The working tree holding `folder` (the nearest directory with .git), None outside one."""
    here = files.absolute(folder)
    return next((d for d in [here, *here.parents] if (d / ".git").exists()), None)


def normal_url(url: str) -> str:
    """A git URL without scheme, user, `.git` and trailing slash, `host:path` as `host/path`: the
    forms one repository is cloned by compare equal."""
    text = url.strip().rstrip("/").removesuffix(".git")
    text = text.split("://", 1)[-1]
    text = text.split("@", 1)[-1]
    return text.replace(":", "/", 1) if "/" in text and ":" in text.split("/", 1)[0] else text


def remotes(root: Path) -> tuple[str, ...]:
    """The remote URLs of the repository at `root` (git config remote.*.url), normalized."""
    import subprocess

    try:
        result = subprocess.run(
            ["git", "-C", str(root), "config", "--get-regexp", r"^remote\..*\.url$"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(normal_url(line.split(maxsplit=1)[1]) for line in result.stdout.splitlines() if " " in line)
