"""Who may make the loop fetch (core/incluster/webhook.py): signatures, bearer tokens, replays and
the rate."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from reconciler.core.incluster import webhook
from reconciler.core.incluster.webhook import Gate, Result, Secrets

SECRET = b"It's a Secret to Everybody"
# GitHub's documented example ("Validating webhook deliveries"): this secret and body give this digest.
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def signed(body: bytes, secret: bytes = SECRET) -> dict[str, str]:
    return {webhook.SIGNATURE: "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()}


def test_githubs_own_example_verifies() -> None:
    assert webhook.verify(Secrets(webhook=SECRET), {webhook.SIGNATURE: GITHUB_SIGNATURE}, GITHUB_BODY) == (
        True,
        "signed",
    )


@pytest.mark.parametrize(
    ("headers", "body", "why"),
    [
        (signed(b"other body"), b"body", "wrong signature"),
        (signed(b"body", b"another secret"), b"body", "wrong signature"),
        ({webhook.SIGNATURE: "sha1=abc"}, b"body", "X-Hub-Signature-256 is not sha256=<hex>"),
        ({webhook.SIGNATURE: "sha256="}, b"body", "X-Hub-Signature-256 is not sha256=<hex>"),
        ({}, b"body", "no credentials: X-Hub-Signature-256 required"),
        ({"authorization": "Bearer t"}, b"body", "no credentials: X-Hub-Signature-256 required"),
    ],
)
def test_a_webhook_secret_refuses_anything_but_its_signature(
    headers: dict[str, str], body: bytes, why: str
) -> None:
    assert webhook.verify(Secrets(webhook=SECRET), headers, body) == (False, why)


@pytest.mark.parametrize(
    ("authorization", "verdict"),
    [
        ("Bearer s3cret", (True, "bearer token")),
        ("bearer s3cret", (True, "bearer token")),
        ("Bearer s3cre", (False, "wrong bearer token")),
        ("Bearer s3cret-and-more", (False, "wrong bearer token")),
        ("Basic czNjcmV0", (False, "Authorization is not a bearer token")),
        ("Bearer ", (False, "Authorization is not a bearer token")),
    ],
)
def test_a_token_is_a_bearer_token(authorization: str, verdict: tuple[bool, str]) -> None:
    assert webhook.verify(Secrets(token=b"s3cret"), {"authorization": authorization}, None) == verdict


def test_with_both_either_proof_works_and_the_refusal_names_both() -> None:
    both = Secrets(webhook=SECRET, token=b"t")
    assert webhook.verify(both, signed(b"x"), b"x")[0]
    assert webhook.verify(both, {"authorization": "Bearer t"}, None)[0]
    refused = (False, "no credentials: X-Hub-Signature-256 or a bearer token required")
    assert webhook.verify(both, {}, None) == refused


def test_without_secrets_sync_is_off() -> None:
    assert webhook.verify(Secrets(), {"authorization": "Bearer x"}, None)[0] is False
    assert not Secrets(webhook=b"", token=None).any


def test_the_body_is_needed_only_to_check_a_signature() -> None:
    assert webhook.needs_body(Secrets(webhook=SECRET), signed(b"x"))
    assert not webhook.needs_body(Secrets(webhook=SECRET), {"authorization": "Bearer x"})
    assert not webhook.needs_body(Secrets(token=b"t"), signed(b"x"))


def test_a_delivery_is_admitted_once() -> None:
    gate = Gate(interval=10)
    assert gate.admit(0, "d-1") == (Result.ACCEPTED, 0.0)
    assert gate.admit(100, "d-1") == (Result.REPLAYED, 0.0)
    assert gate.admit(100, "d-2") == (Result.ACCEPTED, 0.0)


def test_fetches_are_limited_to_one_per_interval_and_the_next_one_is_deferred() -> None:
    gate = Gate(interval=10)
    assert gate.admit(0, None) == (Result.ACCEPTED, 0.0)
    assert gate.admit(4, None) == (Result.LIMITED, 6.0)
    assert gate.admit(9, "d-3") == (Result.LIMITED, 1.0)
    assert gate.admit(9.5, "d-3") == (Result.REPLAYED, 0.0)  # a limited delivery is still remembered
    gate.fired(10)  # the deferred fetch ran
    assert gate.admit(15, None) == (Result.LIMITED, 5.0)
    assert gate.admit(20, None) == (Result.ACCEPTED, 0.0)


def test_the_remembered_deliveries_are_bounded() -> None:
    gate = Gate(interval=0)
    for number in range(webhook.REMEMBERED + 10):
        gate.admit(number, f"d-{number}")
    assert len(gate.seen) == webhook.REMEMBERED
    assert gate.admit(10**6, "d-0")[0] is Result.ACCEPTED  # forgotten: the oldest went first
    assert gate.admit(10**6 + 1, f"d-{webhook.REMEMBERED + 9}")[0] is Result.REPLAYED


def test_delivery_ids_of_github_gitea_and_gogs() -> None:
    assert webhook.delivery({"x-github-delivery": "a"}) == "a"
    assert webhook.delivery({"x-gitea-delivery": "b"}) == "b"
    assert webhook.delivery({}) is None
