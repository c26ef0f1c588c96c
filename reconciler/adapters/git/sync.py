"""The fleet repository, pulled: fetched on an interval and on demand, in a thread.

Credentials come from files a Secret mounts, read again at every fetch (a rotated token is picked
up): an HTTPS token goes to git as an `Authorization` header for that host only, through git's
GIT_CONFIG_* environment (never on a command line, never in the URL, never on disk); an SSH key is
copied to a private file (ssh refuses group-readable keys, and Secret volumes are often 0644) and used
with the known_hosts file given, host keys checked strictly. git never prompts.

A fetch that fails keeps the last good commit in force; the failure is logged and counted, and the
next try comes at the next interval (sooner if asked). Nothing here raises out of the thread.
"""

from __future__ import annotations

import base64
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from reconciler.adapters import files, git
from reconciler.errors import GpudrvError

log = logging.getLogger("gpudrv.git")

FETCH_TIMEOUT = 120.0


@dataclass(frozen=True)
class Credentials:
    token_file: Path | None = None
    username: str = "x-access-token"  # GitHub's name for a token; any name works with a PAT
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None

    def problem(self, url: str) -> str | None:
        if self.token_file and self.ssh_key_file:
            return "give --git-token-file (HTTPS) or --git-ssh-key-file (SSH), not both"
        if self.token_file and not url.startswith("https://"):
            return f"--git-token-file needs an https:// repository URL, not {git.redact(url)}"
        if self.ssh_key_file and not self.known_hosts_file:
            return "--git-ssh-key-file needs --git-known-hosts-file: gpudrv checks the server's host key"
        return None


@dataclass(frozen=True)
class Source:
    url: str  # https://..., ssh://..., git@host:path, or a local path
    branch: str
    credentials: Credentials


@dataclass(frozen=True)
class Fetched:
    """The newest commit of the branch, fetched (posted when it differs from the last one posted)."""

    commit: str


def environment(source: Source, private: Path) -> dict[str, str]:
    """git's environment for one fetch: no prompts, no user or system config, the credentials."""
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GCM_INTERACTIVE": "never"}
    creds = source.credentials
    if creds.token_file is not None:
        token = files.read_text(creds.token_file).strip()
        basic = base64.b64encode(f"{creds.username}:{token}".encode()).decode()
        parts = urlsplit(source.url)
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"http.{parts.scheme}://{parts.netloc.rpartition('@')[2]}/.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    if creds.ssh_key_file is not None and creds.known_hosts_file is not None:
        key = private / "ssh-key"
        key.write_bytes(Path(creds.ssh_key_file).read_bytes())
        key.chmod(0o600)
        options = [
            "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={creds.known_hosts_file}", "-o", "StrictHostKeyChecking=yes",
        ]  # fmt: skip
        env["GIT_SSH_COMMAND"] = shlex.join(options)
    return env


class GitSync:
    """Fetches `source` into `directory` every `interval` seconds or when `trigger()`ed; posts
    `Fetched` when the branch moved. `on_result(ok, error)` is called after every try."""

    def __init__(
        self,
        source: Source,
        directory: Path,
        interval: float,
        post: Callable[[Fetched], None],
        on_result: Callable[[bool, str | None], None] = lambda ok, error: None,
    ) -> None:
        self.source, self.directory, self.interval = source, directory, interval
        self.post, self.on_result = post, on_result
        self.private = directory.parent / "private"
        self.wanted = threading.Event()
        self.stopping = threading.Event()
        self.posted: str | None = None
        self.thread = threading.Thread(target=self._run, name="git-sync", daemon=True)

    def start(self) -> GitSync:
        self.private.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive() or self.stopping.is_set()

    def trigger(self) -> None:
        self.wanted.set()

    def stop(self) -> None:
        self.stopping.set()
        self.wanted.set()
        self.thread.join(5)

    def fetch_once(self) -> str:
        """One fetch, in the caller's thread; the commit, or GpudrvError."""
        self.private.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        env = environment(self.source, self.private)
        return git.fetch_branch(self.directory, self.source.url, self.source.branch, env, FETCH_TIMEOUT)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.wanted.clear()
            started = time.monotonic()
            try:
                commit = self.fetch_once()
            except (GpudrvError, OSError) as exc:
                log.error("fleet repository: %s; the last good commit stays in force", exc)
                self.on_result(False, str(exc))
            except Exception as exc:  # never die: the last good commit stays, the next try may work
                log.exception("fleet repository: unexpected error; the last good commit stays in force")
                self.on_result(False, repr(exc))
            else:
                self.on_result(True, None)
                if commit != self.posted:
                    self.posted = commit
                    self.post(Fetched(commit))
            # Asked again while fetching: at once; else at the interval.
            remaining = self.interval - (time.monotonic() - started)
            self.wanted.wait(max(0.0, remaining))


def default_directory() -> Path:
    """Where the clone goes without --workdir: $GPUDRV_WORKDIR, else under the temp dir."""
    import tempfile

    return Path(os.environ.get("GPUDRV_WORKDIR") or Path(tempfile.gettempdir()) / "gpudrv")
