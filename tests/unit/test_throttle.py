"""The retry policy for a busy API server (core/base/throttle.py), against client-go's rules."""

from __future__ import annotations

import pytest

from reconciler.core.base import throttle
from reconciler.core.base.throttle import Refusal, Throttled


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1", 1.0), ("0", 0.0), (" 7 ", 7.0), ("", None), ("1.5", None), ("-1", None),
     ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("\uff11", None), ("9" * 30, None), (None, None)],
)  # fmt: skip
def test_retry_after_is_whole_seconds_as_client_go_reads_it(value: str | None, seconds: float | None) -> None:
    assert throttle.retry_after(value) == seconds


def test_a_throttled_request_of_any_verb_is_retried_after_the_servers_delay() -> None:
    for method in ("GET", "PATCH", "POST", "DELETE"):
        assert throttle.wait(Refusal(method, 429, "2"), 1, 60.0) == Throttled(429, 2.0, 1)


def test_a_disruption_budget_is_never_a_throttle() -> None:
    assert throttle.wait(Refusal("POST", 429, "10", ("DisruptionBudget",)), 1, None) is None
    other = Refusal("POST", 429, "10", ("FieldValueInvalid",))
    assert throttle.wait(other, 1, None) == Throttled(429, 10.0, 1)


def test_a_5xx_is_retried_only_for_a_request_that_may_run_twice() -> None:
    assert throttle.wait(Refusal("GET", 503, "1", ()), 1, None) == Throttled(503, 1.0, 1)
    assert throttle.wait(Refusal("PATCH", 500, "1", ()), 1, None) == Throttled(500, 1.0, 1)
    assert throttle.wait(Refusal("POST", 503, "1", ()), 1, None) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_statuses_are_answers_not_waits(status: int) -> None:
    assert throttle.wait(Refusal("GET", status, "1"), 1, None) is None


def test_without_retry_after_nothing_is_retried() -> None:
    assert throttle.wait(Refusal("GET", 429, None, ()), 1, None) is None
    assert throttle.wait(Refusal("GET", 503, "soon", ()), 1, None) is None


def test_retries_are_bounded_in_number_and_in_time() -> None:
    assert throttle.wait(Refusal("GET", 429, "1", ()), throttle.MAX_RETRIES, None) is not None
    assert throttle.wait(Refusal("GET", 429, "1", ()), throttle.MAX_RETRIES + 1, None) is None
    assert throttle.wait(Refusal("GET", 429, "3600", ()), 1, None) == Throttled(429, throttle.MAX_WAIT, 1)
    assert throttle.wait(Refusal("GET", 429, "5", ()), 1, 5.0) is None  # the total timeout would end first
    assert throttle.wait(Refusal("GET", 429, "5", ()), 1, 5.5) == Throttled(429, 5.0, 1)


def test_the_progress_line_says_the_server_asked_to_wait() -> None:
    assert Throttled(429, 2.0, 3).shown() == "the API server asked to wait 2 s (429); retry 3 of 10"
