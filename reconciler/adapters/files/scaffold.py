"""`gpudrv init`'s files: its templates (package data), the record of the source this gpudrv was built
from (hatch_build.py writes it into the distribution), manifests as YAML text, and writing a set of
new files all or nothing."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from reconciler.core.views.scaffold import PLAIN, YAML_11_WORDS
from reconciler.errors import GpudrvError

PACKAGE = Path(__file__).resolve().parents[2]
TEMPLATES = PACKAGE / "data" / "scaffold"
BUILD_RECORD = PACKAGE / "_build.json"
QUOTED_MAPS = {"labels", "nodeSelector"}  # label values: always quoted, as Kubernetes' own examples


@dataclass(frozen=True)
class BuildRecord:
    """Where this gpudrv was built from: its GitHub repository (None: not known) and commit."""

    repository: str | None
    commit: str
    dirty: bool = False


def build_record(path: Path = BUILD_RECORD) -> BuildRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("commit"), str):
        return None
    repository = data.get("repository")
    return BuildRecord(
        repository if isinstance(repository, str) else None, data["commit"], bool(data.get("dirty"))
    )


def on_path(program: str) -> str | None:
    """Where `program` is on PATH, or None."""
    return shutil.which(program)


def in_git(folder: Path) -> bool:
    """Is `folder` (or the nearest existing parent) inside a git work tree?"""
    here = folder.absolute()
    return any((parent / ".git").exists() for parent in [here, *here.parents])


def template(name: str, values: Mapping[str, str]) -> str:
    """A template with each `__KEY__` replaced by its value."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    left = re.search(r"__[A-Z_]+__", text)
    assert left is None, f"template {name}: {left[0] if left else ''} has no value"
    return text


def yaml_text(document: Mapping[str, Any], comment: str = "") -> str:
    """The document as YAML, keys in their order, after `comment` (one `# ` line per line)."""
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    stream = StringIO()
    yaml.dump(_quoted(document), stream)
    header = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
    return header + stream.getvalue()


def _quoted(value: Any, quote_all: bool = False) -> Any:
    """Strings double-quoted where YAML (1.1, as kubectl reads it, or 1.2) could read another type:
    "550", "22.04", "on"; label values always."""
    if isinstance(value, Mapping):
        return {key: _quoted(item, quote_all or key in QUOTED_MAPS) for key, item in value.items()}
    if isinstance(value, list):
        return [_quoted(item) for item in value]
    if isinstance(value, str) and (quote_all or not PLAIN.match(value) or value.lower() in YAML_11_WORDS):
        return DoubleQuotedScalarString(value)
    return value


# --- writing -----------------------------------------------------------------------------------------


def refuse_existing(root: Path, files: Sequence[str]) -> None:
    """Exit 2 naming the first file already there (or a file where a folder must go), before anything
    is written: init never overwrites."""
    if root.exists() and not root.is_dir():
        raise GpudrvError(f"{root}: exists and is not a directory; gpudrv init wrote nothing")
    taken = [root / name for name in files if (root / name).exists() or (root / name).is_symlink()]
    if taken:
        more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
        raise GpudrvError(f"{taken[0]}: already exists{more}; gpudrv init never overwrites, it wrote nothing")
    for relative in files:
        for folder in list(reversed(Path(relative).parents))[1:]:
            blocker = root / folder
            if blocker.exists() and not blocker.is_dir():
                raise GpudrvError(f"{blocker}: exists and is not a directory; gpudrv init wrote nothing")


def write_all(root: Path, files: Mapping[str, str]) -> None:
    """Every file new (checked first, and again as each is created: O_EXCL), or none: a failure
    midway removes what this call created."""
    refuse_existing(root, list(files))
    created: list[Path] = []
    folders: list[Path] = []
    try:
        for relative, text in files.items():
            target = root / relative
            for folder in reversed([target.parent, *target.parent.parents]):
                if not folder.exists():
                    folder.mkdir()
                    folders.append(folder)
            with target.open("x", encoding="utf-8") as handle:
                created.append(target)
                handle.write(text)
    except OSError as exc:
        for path in reversed(created):
            with contextlib.suppress(OSError):
                path.unlink()
        for folder in reversed(folders):
            with contextlib.suppress(OSError):
                folder.rmdir()
        name = exc.filename or root
        raise GpudrvError(f"{name}: cannot write: {exc.strerror}; gpudrv init wrote nothing") from None
