"""The API server's refusals as typed errors: one per HTTP status a caller acts on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.core.base.throttle import BUDGET_CAUSE, Refusal
from reconciler.errors import GpudrvError

NO_CLUSTER = "no cluster configured"


class ApiError(GpudrvError):
    """The API server refused a request; `detail` and `causes` are its own words."""

    def __init__(
        self, host: str, status: int, reason: str, detail: str, causes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(f"the cluster at {host} answered {status} {reason}: {detail or 'no message'}")
        self.status, self.reason, self.detail, self.causes = status, reason, detail, causes
        self.method = "GET"  # the request's verb, and what the answer said of a retry (core/base/throttle.py)
        self.retry_after: str | None = None
        self.cause_reasons: tuple[str, ...] = ()  # the causes' `reason` fields: DisruptionBudget, ...
        # Each cause whole, (reason, message, field): an apply conflict's causes name a field and its owner.
        self.cause_details: tuple[tuple[str, str, str], ...] = ()

    def refusal(self) -> Refusal:
        return Refusal(self.method, self.status, self.retry_after, self.cause_reasons)

    @property
    def by_budget(self) -> bool:
        """An eviction a PodDisruptionBudget refused (its cause says so, not the status code)."""
        return BUDGET_CAUSE in self.cause_reasons

    def explanation(self) -> str:
        """The server's message with its causes (an eviction names the budget there)."""
        return " ".join([self.detail, *self.causes]).strip() or self.reason


class NotFound(ApiError):
    """404: no such object."""


class Conflict(ApiError):
    """409: a write lost a race, someone changed the object since we read it."""


class TooManyRequests(ApiError):
    """429: a busy server (API Priority and Fairness) or, for an eviction whose cause is
    DisruptionBudget, a disruption budget said no (`by_budget`)."""


class Forbidden(ApiError):
    """401 or 403: the credentials may not do this."""


class Gone(ApiError):
    """410: the resourceVersion a watch or list asked for is too old; list again."""


class Unreachable(GpudrvError):
    """No answer from the API server at all."""


class NoCluster(GpudrvError):
    """No kubeconfig and not in a pod: the CLI says what the command would have read (cli._no_cluster)."""


class BadAnswer(Exception):
    """An answer gpudrv will not read: too big, or too slow to arrive."""


BY_STATUS: Mapping[int, type[ApiError]] = {
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: TooManyRequests,
}


def refusal(
    host: str, status: int, reason: str, body: Any, *, method: str = "GET", headers: Any = None
) -> ApiError:
    """The typed error of an answer outside 2xx: its status, reason and the metav1.Status it carries,
    the request's verb and the answer's Retry-After."""
    try:
        document = json.loads(body)
    except (TypeError, ValueError, RecursionError):
        document = {}
    document = document if isinstance(document, dict) else {}
    details = document.get("details")
    details = details if isinstance(details, dict) else {}
    listed = details.get("causes")
    causes = [c for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)]
    messages = tuple(str(c["message"]) for c in causes if c.get("message"))
    kind = BY_STATUS.get(status, ApiError)
    error = kind(host, status, first_line(str(reason)), str(document.get("message", "")).strip(), messages)
    error.method = method
    error.retry_after = _header(headers, "Retry-After")
    error.cause_reasons = tuple(str(c["reason"]) for c in causes if c.get("reason"))
    error.cause_details = tuple(
        (str(c.get("reason") or ""), str(c.get("message") or ""), str(c.get("field") or "")) for c in causes
    )
    return error


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name) if headers is not None else None
    except AttributeError:
        return None
    return value if isinstance(value, str) else None


def status_error(host: str, status: Mapping[str, Any]) -> ApiError:
    """A watch's ERROR event carries a metav1.Status."""
    code = status.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else 0
    kind = Gone if code == 410 else BY_STATUS.get(code, ApiError)
    return kind(host, code, str(status.get("reason") or ""), str(status.get("message") or "").strip())


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""
