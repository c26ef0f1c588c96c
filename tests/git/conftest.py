"""Real git repositories with scripted histories: commits with chosen authors, dates and subjects.

`Script` is the tests' one helper for a real temporary git repository: `Script.init` (an empty one on
`main`), `Script.committed` (these files committed on `main`), then `write` and `commit` for more. The
other tiers use it too (tests/fleets.py, tests/cli, tests/e2e).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

HEADER = "driver_branch,kernel,os_tag"
MATRIX = "matrix/support-matrix.csv"

# No user or system configuration: the tests see git's defaults only.
ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Script:
    """A repository and a clock: every commit is one day after the previous one."""

    root: Path
    day: int = 0

    @classmethod
    def init(cls, root: Path) -> Script:
        """A new repository at `root` (made if missing) on `main`, with nothing committed yet."""
        root.mkdir(parents=True, exist_ok=True)
        repo = cls(root)
        repo.git("init", "-q", "-b", "main")
        return repo

    @classmethod
    def committed(cls, root: Path, subject: str, files: Mapping[str, str] | None = None) -> Script:
        """A new repository at `root` on `main` whose first commit, `subject`, holds `files` (path
        relative to `root`: text) and every file already under `root`."""
        repo = cls.init(root)
        for path, text in (files or {}).items():
            repo.write(path, text)
        repo.commit(subject)
        return repo

    def git(self, *args: str, author: str = "Ann Author") -> str:
        date = f"2024-03-{self.day + 1:02d}T10:00:00+00:00"
        who = {"NAME": author, "EMAIL": f"{author.split(maxsplit=1)[0].lower()}@example.com", "DATE": date}
        env = {**os.environ, **ISOLATED}
        env |= {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in who.items()}
        result = subprocess.run(
            ["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
        return result.stdout.strip()

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())

    def matrix(self, *rows: str, newline: str = "\n", path: str = MATRIX) -> None:
        self.write(path, "".join(f"{line}{newline}" for line in (HEADER, *rows)))

    def commit(self, subject: str, author: str = "Ann Author") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", subject, author=author)
        self.day += 1
        return self.git("rev-parse", "HEAD")

    def merge(self, branch: str, subject: str, author: str) -> str:
        self.git("merge", "-q", "--no-ff", branch, "-m", subject, author=author)
        self.day += 1
        return self.git("rev-parse", "HEAD")

    def date(self, day: int) -> str:
        return f"2024-03-{day:02d}T10:00:00+00:00"


@pytest.fixture
def script(tmp_path: Path) -> Script:
    return Script.init(tmp_path / "repo")
