"""Least privilege, proven on the real API server (it authorizes with RBAC): deploy/'s roles, applied
as kustomize renders them, under the ServiceAccount's own token.

What gpudrv needs is not listed here: it is reconciler/core/incluster/access.py's list, the one `gpudrv
reconcile --check-access` asks the API server about (SelfSubjectAccessReview, as the ServiceAccount),
and SubjectAccessReviews below ask again as the administrator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.incluster import access
from tests.e2e.conftest import Kube
from tests.e2e.reconcile.conftest import DEPLOY, LEASE, Deployed, as_list, deploy, isolate, render

ISSUE_14_DENIALS = {"patch nodes", "create pods/eviction", "get secrets"}


def check_access(deployed: Deployed, *args: str) -> tuple[int, dict[str, Any]]:
    result = deployed.kube.gpudrv(
        "reconcile",
        "--check-access",
        "-o",
        "json",
        "--repo",
        "unused",
        "--kubeconfig",
        str(deployed.kubeconfig),
        "--lease-namespace",
        deployed.namespace,
        *args,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def subject_access_review(kube: Kube, user: str, item: access.Access) -> bool:
    """Asked as the administrator about the ServiceAccount: may `user` do it?"""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{user.split(':')[2]}",
                "system:authenticated",
            ],
            "resourceAttributes": item.attributes(),
        },
    }
    answer = json.loads(kube.run("create", "-f", "-", "-o", "json", stdin=json.dumps(review)).stdout)
    return bool(answer["status"].get("allowed"))


def test_the_base_allows_what_reconcile_needs_and_nothing_it_does_not(deployed: Deployed) -> None:
    code, report = check_access(deployed)
    assert report["user"] == deployed.user
    assert [item["operation"] for item in report["needed"] if not item["allowed"]] == []
    assert [item["operation"] for item in report["unneeded"] if item["allowed"]] == []
    assert code == 0 and report["ok"]
    # The loop's own list covers what the issue names, and the API server denies each.
    assert {item["operation"] for item in report["unneeded"]} >= ISSUE_14_DENIALS


def test_subject_access_reviews_agree(kube: Kube, deployed: Deployed) -> None:
    needs = access.needs(deployed.namespace, LEASE, apply=False)
    excess = access.excess(apply=False)
    assert {item.text(): subject_access_review(kube, deployed.user, item) for item in needs} == {
        item.text(): True for item in needs
    }
    assert {item.text(): subject_access_review(kube, deployed.user, item) for item in excess} == {
        item.text(): False for item in excess
    }
    # And `kubectl auth can-i` (a SelfSubjectAccessReview) with the token itself.
    for verb, resource in (("patch", "nodes"), ("create", "pods/eviction"), ("get", "secrets")):
        answer = kube.run(
            "auth", "can-i", verb, resource, "-A", "--kubeconfig", str(deployed.kubeconfig), check=False
        )
        assert answer.stdout.strip() == "no", (verb, resource, answer.stdout, answer.stderr)


def test_the_apply_overlay_adds_what_apply_needs(kube: Kube, tmp_path: Path) -> None:
    overlay = deploy(kube, DEPLOY / "overlays" / "apply", tmp_path)
    try:
        code, report = check_access(overlay, "--apply")
        assert [item["operation"] for item in report["needed"] if not item["allowed"]] == []
        assert [item["operation"] for item in report["unneeded"] if item["allowed"]] == []
        assert code == 0
        assert {"patch nodes", "create pods/eviction"} <= {item["operation"] for item in report["needed"]}
        # The same identity is more than an audit-only deployment needs, and the check says so.
        code, report = check_access(overlay)
        assert code == 1
        assert {"patch nodes", "create pods/eviction"} <= {
            item["operation"] for item in report["unneeded"] if item["allowed"]
        }
        assert "get secrets" not in {item["operation"] for item in report["unneeded"] if item["allowed"]}
    finally:
        overlay.remove()


def test_the_cronjob_needs_no_lease(kube: Kube, tmp_path: Path) -> None:
    cronjob = deploy(kube, DEPLOY / "cronjob", tmp_path)
    try:
        code, report = check_access(cronjob, "--no-leader-election")
        assert code == 0, report
        assert not any("leases" in item["operation"] for item in report["needed"])
    finally:
        cronjob.remove()


@pytest.mark.parametrize("directory", ["", "overlays/apply", "cronjob"], ids=["base", "apply", "cronjob"])
def test_the_manifests_pass_the_api_servers_validation(deployed: Deployed, directory: str) -> None:
    """Every object, validated by the API server (dry run), in a namespace that enforces the
    restricted Pod Security profile; the pod template itself as a Pod, which it enforces on."""
    documents = isolate(render(deployed.kube, DEPLOY / directory), deployed.namespace, deployed.suffix)
    others = [doc for doc in documents if doc["kind"] != "Namespace"]
    result = deployed.kube.run("apply", "--dry-run=server", "-f", "-", stdin=as_list(others))
    assert "PodSecurity" not in result.stderr, result.stderr
    for workload in (doc for doc in documents if doc["kind"] in ("Deployment", "CronJob")):
        template = (
            workload["spec"]["template"]
            if workload["kind"] == "Deployment"
            else (workload["spec"]["jobTemplate"]["spec"]["template"])
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gpudrv-template", "namespace": deployed.namespace},
            "spec": template["spec"],
        }
        created = deployed.kube.run(
            "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False
        )
        assert created.returncode == 0, created.stderr
        assert "PodSecurity" not in created.stderr, created.stderr
