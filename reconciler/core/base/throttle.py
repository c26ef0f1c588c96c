"""When the API server asks to wait: 429 or a 5xx with `Retry-After`, as client-go reads them.

client-go (kubernetes/client-go 32ce75a7d) retries a request whose answer is 429 or >= 500 *and*
carries a `Retry-After` of whole seconds (rest/with_retry.go:309-318, rest/request.go:1380-1387), up to
10 times (rest/request.go:167), sleeping that long first (rest/with_retry.go:195-236). API Priority and
Fairness answers 429 with `Retry-After` to a request it did not run, whatever its verb; so does an
overloaded server with 503/504.

gpudrv does the same, with three differences, each on purpose:
- an eviction refused by a PodDisruptionBudget is no throttle: its status carries the cause
  `DisruptionBudget` (policy/v1 `DisruptionBudgetCause`), and is never retried here: the drain decides;
- a 5xx is retried only for a request that may run twice (not a POST: it may have been done);
- every wait is bounded (MAX_WAIT) and must end before the request's own total timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_RETRIES = 10  # client-go's default, rest/request.go:167
MAX_WAIT = 30.0  # seconds: a Retry-After longer than this is waited this long, then asked again
BUDGET_CAUSE = "DisruptionBudget"
SAFE_TWICE = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})  # gpudrv's PATCHes are merge/apply patches


@dataclass(frozen=True)
class Throttled:
    """One answer that asked to wait: enough to say so in a progress line."""

    status: int
    seconds: float
    attempt: int  # 1 for the first retry

    def shown(self) -> str:
        asked = f"the API server asked to wait {self.seconds:g} s ({self.status})"
        return f"{asked}; retry {self.attempt} of {MAX_RETRIES}"


def retry_after(value: str | None) -> float | None:
    """Retry-After as client-go reads it: whole seconds (strconv.Atoi); anything else is no wait."""
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.lstrip("-").isdigit() or len(text) > 9:
        return None
    seconds = int(text)
    return float(seconds) if seconds >= 0 else None


@dataclass(frozen=True)
class Refusal:
    """An answer outside 2xx: the request's verb, the status, its Retry-After, the status body's causes."""

    method: str
    status: int
    retry_after: str | None = None
    causes: tuple[str, ...] = ()


def wait(answer: Refusal, attempt: int, remaining: float | None) -> Throttled | None:
    """The wait before retrying `attempt` (1 for the first retry), or None: give this answer back.
    `remaining`: the seconds left of the request's total timeout (None: no total timeout)."""
    status = answer.status
    if attempt > MAX_RETRIES or not (status == 429 or status >= 500):
        return None
    if BUDGET_CAUSE in answer.causes:
        return None
    if status >= 500 and answer.method.upper() not in SAFE_TWICE:
        return None
    seconds = retry_after(answer.retry_after)
    if seconds is None:
        return None
    seconds = min(seconds, MAX_WAIT)
    if remaining is not None and seconds >= remaining:
        return None
    return Throttled(status, seconds, attempt)
