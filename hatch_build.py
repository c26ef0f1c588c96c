"""Build hook: record the source a distribution is built from, for `gpudrv init`.

`gpudrv init` pins a new fleet repository's workflows (`uses: OWNER/NAME@COMMIT`) and pre-commit hooks
to the very source the running gpudrv was built from, so the checks in CI are the checks on the
desk. That commit is known only at build time: this hook writes it, with the repository on GitHub
(`GITHUB_REPOSITORY` when the build runs in Actions, else the `origin` remote if it is on
github.com), to `reconciler/_build.json` in the sdist and the wheel. A wheel built from the sdist
(as `python -m build` does) takes the sdist's record. Without git, or for an editable install (whose
source keeps changing), there is no record and `gpudrv init` asks for `--action`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

RECORD = "reconciler/_build.json"
GITHUB_REMOTE = re.compile(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


class SourceRecord(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        shipped = Path(self.root) / RECORD
        if shipped.is_file():  # an unpacked sdist: keep its record (.gitignore would leave it out)
            build_data["force_include"][str(shipped)] = RECORD
            return
        record = _record(Path(self.root))
        if record is None:
            return
        written = Path(self.directory) / ".gpudrv-build.json"
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        build_data["force_include"][str(written)] = RECORD


def _git(root: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _record(root: Path) -> dict[str, Any] | None:
    if _git(root, "rev-parse", "--show-toplevel") is None:
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return None
    repository = os.environ.get("GITHUB_REPOSITORY") or None
    if repository is None:
        found = GITHUB_REMOTE.search(_git(root, "remote", "get-url", "origin") or "")
        repository = found[1] if found else None
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    return {"repository": repository, "commit": commit, "dirty": dirty}
