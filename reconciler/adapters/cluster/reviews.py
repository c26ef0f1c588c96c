"""Ask the API server what this identity may do: SelfSubjectReview (who am I) and
SelfSubjectAccessReview (may I), as `kubectl auth whoami` and `kubectl auth can-i` do."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.adapters import kube
from reconciler.core.incluster.access import Access, Answer, Report


def whoami(gateway: kube.Gateway) -> str:
    """The user name the API server sees; '' if it cannot say (API older than 1.28)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = gateway.create(kube.SELF_SUBJECT_REVIEWS, body)
    except (kube.NotFound, kube.Forbidden):
        return ""
    return str(((answer.get("status") or {}).get("userInfo") or {}).get("username", ""))


def review(gateway: kube.Gateway, access: Access) -> Answer:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": access.attributes()},
    }
    answer = gateway.create(kube.SELF_SUBJECT_ACCESS_REVIEWS, body)
    status = answer.get("status") or {}
    return Answer(access, bool(status.get("allowed")), str(status.get("reason") or ""))


def report(gateway: kube.Gateway, needs: Sequence[Access], excess: Sequence[Access]) -> Report:
    return Report(
        whoami(gateway),
        [review(gateway, item) for item in needs],
        [review(gateway, item) for item in excess],
    )
