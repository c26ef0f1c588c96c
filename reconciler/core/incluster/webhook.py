"""Who may make the in-cluster loop fetch now (`POST /sync`), and how often.

A git host's push webhook signs its body the way GitHub does: `X-Hub-Signature-256: sha256=<hex>`, the
HMAC-SHA256 of the raw body under a shared secret (GitHub's "Validating webhook deliveries"; Gitea and
Forgejo send the same header). A CI job or a person sends `Authorization: Bearer <token>` instead. A
caller with neither, or a wrong one, is refused. Both secrets are compared in constant time.

GitHub signs the body only, not a time: a captured delivery stays valid. So a delivery id
(`X-GitHub-Delivery`, `X-Gitea-Delivery`) seen before is refused, and fetches are rate-limited: a
replayed or flooding caller gets at most one fetch per interval, and fetches are coalesced anyway.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

SIGNATURE = "x-hub-signature-256"
DELIVERY_HEADERS = ("x-github-delivery", "x-gitea-delivery", "x-gogs-delivery")
AUTHORIZATION = "authorization"
REMEMBERED = 4096  # delivery ids kept to refuse a replay (GitHub retries a delivery with a new id)


class Result(StrEnum):
    ACCEPTED = "accepted"
    UNAUTHORIZED = "unauthorized"
    REPLAYED = "replayed"
    LIMITED = "limited"
    TOO_LARGE = "too_large"
    OFF = "off"


@dataclass(frozen=True)
class Secrets:
    """What a caller may prove: the webhook's shared secret, a bearer token; None: that way is off."""

    webhook: bytes | None = None
    token: bytes | None = None

    @property
    def any(self) -> bool:
        return bool(self.webhook) or bool(self.token)


def needs_body(secrets: Secrets, headers: Mapping[str, str]) -> bool:
    """Whether the verdict needs the body: a signature to check. A bearer token is decided without it."""
    return bool(secrets.webhook) and SIGNATURE in headers


def verify(secrets: Secrets, headers: Mapping[str, str], body: bytes | None) -> tuple[bool, str]:
    """(allowed, why) for a request whose header names are lower case."""
    if not secrets.any:
        return False, "POST /sync is off: no webhook secret and no token configured"
    signature = headers.get(SIGNATURE)
    if secrets.webhook and signature is not None:
        if body is None:
            return False, "a signed request without its body"
        return _signed(secrets.webhook, signature, body)
    authorization = headers.get(AUTHORIZATION)
    if secrets.token and authorization is not None:
        return _bearer(secrets.token, authorization)
    ways = (("X-Hub-Signature-256", secrets.webhook), ("a bearer token", secrets.token))
    return False, f"no credentials: {' or '.join(name for name, on in ways if on)} required"


def _bearer(token: bytes, authorization: str) -> tuple[bool, str]:
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return False, "Authorization is not a bearer token"
    if hmac.compare_digest(given.strip().encode(), token):
        return True, "bearer token"
    return False, "wrong bearer token"


def _signed(secret: bytes, signature: str, body: bytes) -> tuple[bool, str]:
    algorithm, _, given = signature.partition("=")
    if algorithm != "sha256" or not given:
        return False, "X-Hub-Signature-256 is not sha256=<hex>"
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if hmac.compare_digest(given.strip().lower().encode(), expected.encode()):
        return True, "signed"
    return False, "wrong signature"


def delivery(headers: Mapping[str, str]) -> str | None:
    return next((headers[name] for name in DELIVERY_HEADERS if headers.get(name)), None)


@dataclass
class Gate:
    """Replays and the rate of fetches, on the clock the caller passes (seconds, monotonic)."""

    interval: float  # at most one accepted fetch per interval
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    last: float | None = None

    def admit(self, now: float, delivery_id: str | None) -> tuple[Result, float]:
        """ACCEPTED (fetch now), LIMITED (fetch once the interval is over: the seconds to wait), or
        REPLAYED. A delivery id, once admitted, is remembered; a limited request is not lost: the
        caller fetches at the end of the interval, once for all the requests that came in it."""
        if delivery_id is not None and delivery_id in self.seen:
            return Result.REPLAYED, 0.0
        if delivery_id is not None:
            self.seen[delivery_id] = None
            while len(self.seen) > REMEMBERED:
                self.seen.popitem(last=False)
        if self.last is not None and now - self.last < self.interval:
            return Result.LIMITED, self.interval - (now - self.last)
        self.last = now
        return Result.ACCEPTED, 0.0

    def fired(self, now: float) -> None:
        """A deferred fetch ran: the next interval starts now."""
        self.last = now
