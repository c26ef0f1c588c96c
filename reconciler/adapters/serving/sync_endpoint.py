"""`POST /sync`: a verified caller makes the loop fetch now (the rules: core/incluster/webhook.py).

The secrets are files a Secret mounts (`--sync-secret-file`, `--sync-token-file`), read again on every
request, so a rotated Secret takes effect without a restart. A file that is not there turns its way off
(deploy/ mounts an optional Secret); without either way, `/sync` is off and says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from reconciler.core.incluster import webhook
from reconciler.core.incluster.webhook import Result, Secrets

log = logging.getLogger("gpudrv.http")

MAX_BODY = 25 * 1024 * 1024  # GitHub caps a webhook payload at 25 MB
INTERVAL = 10.0  # seconds: at most one fetch per interval from /sync, the rest coalesced into it

Answer = tuple[int, bytes, dict[str, str]]


def secret_files(webhook_file: Path | None, token_file: Path | None) -> Callable[[], Secrets]:
    """Secrets read from their files at each call; an unreadable file is an error for that request."""

    def read(path: Path | None) -> bytes | None:
        if path is None or not path.exists():
            return None
        value = path.read_bytes().strip()
        if not value:
            raise OSError(f"{path} is empty")
        return value

    return lambda: Secrets(webhook=read(webhook_file), token=read(token_file))


class SyncEndpoint:
    def __init__(
        self,
        sync: Callable[[], None],
        secrets: Callable[[], Secrets],
        count: Callable[[Result], None] = lambda _result: None,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sync, self.secrets, self.count, self.clock = sync, secrets, count, clock
        self.gate = webhook.Gate(interval)
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def handle(self, headers: Mapping[str, str], length: int | None, read: Callable[[int], bytes]) -> Answer:
        """The answer to one POST /sync: header names lower case, `read` the body's reader."""
        try:
            secrets = self.secrets()
        except OSError as exc:
            log.error("POST /sync refused: cannot read its secret: %s", exc)
            return 500, b"cannot read the sync secret\n", {}
        if not secrets.any:
            why = "POST /sync is off: no --sync-secret-file or --sync-token-file"
            return self._refused(Result.OFF, 403, why)
        body = None
        if webhook.needs_body(secrets, headers):
            if length is None:
                return 411, b"Content-Length required\n", {}
            if length > MAX_BODY:
                return self._refused(Result.TOO_LARGE, 413, f"body over {MAX_BODY} bytes")
            body = read(length)
        allowed, why = webhook.verify(secrets, headers, body)
        if not allowed:
            return self._refused(Result.UNAUTHORIZED, 401, why, {"WWW-Authenticate": 'Bearer realm="gpudrv"'})
        return self._admit(webhook.delivery(headers))

    def _admit(self, delivery: str | None) -> Answer:
        with self.lock:
            result, wait = self.gate.admit(self.clock(), delivery)
            if result is Result.LIMITED and self.timer is None:
                self.timer = threading.Timer(wait, self._deferred)
                self.timer.daemon = True
                self.timer.start()
        self.count(result)
        if result is Result.REPLAYED:
            return 409, b"this delivery was seen before\n", {}
        if result is Result.LIMITED:
            return 202, f"fetching the fleet repository within {wait:.0f}s\n".encode(), {}
        self.sync()
        return 202, b"fetching the fleet repository\n", {}

    def _deferred(self) -> None:
        with self.lock:
            self.timer = None
            self.gate.fired(self.clock())
        self.sync()

    def _refused(self, result: Result, status: int, why: str, extra: dict[str, str] | None = None) -> Answer:
        self.count(result)
        log.warning("POST /sync refused (%d): %s", status, why)
        return status, f"refused: {why}\n".encode(), extra or {}

    def stop(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
