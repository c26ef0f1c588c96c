"""Lab mode's `gpudrv apply` never takes a budget's field from another manager (issue 38 item 3), through
the real entry point against a fake API server: git's trainer-pdb wants minAvailable 4, the live one has
3 and Helm owns it, so the API server refuses gpudrv's unforced apply (409). One line names helm and the
field, exit 2, and gpudrv wrote nothing: its only budget request was the dry run, no node was patched.
tests/e2e/test_upgrade_live.py has the same on a real control plane."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git, run_main
from tests.hostile.fake_api import Answer, FakeApi, Request

BUDGETS = "/apis/policy/v1/namespaces/gpu-drv/poddisruptionbudgets"
LIVE = {
    "kind": "PodDisruptionBudgetList",
    "apiVersion": "policy/v1",
    "metadata": {"resourceVersion": "7"},
    "items": [
        {
            "metadata": {"name": "trainer-pdb", "namespace": "gpu-drv", "generation": 2},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "trainer"}}},
            "status": {"observedGeneration": 2, "currentHealthy": 4, "disruptionsAllowed": 1},
        }
    ],
}
HELM_OWNS = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'Apply failed with 1 conflict: conflict with "helm" using policy/v1: .spec.minAvailable',
    "reason": "Conflict",
    "details": {
        "name": "trainer-pdb",
        "group": "policy",
        "kind": "poddisruptionbudgets",
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "helm" using policy/v1',
                "field": ".spec.minAvailable",
            }
        ],
    },
    "code": 409,
}


def helm_owns_the_budget(request: Request) -> Answer:
    if request.method == "PATCH" and request.path == f"{BUDGETS}/trainer-pdb":
        return Answer(status=409, body=json.dumps(HELM_OWNS).encode())
    if request.path == BUDGETS:
        return Answer(body=json.dumps(LIVE).encode())
    if "/apis/nvidia.com/" in request.path:  # no GPU Operator CRDs
        return Answer(status=404, body=b'{"kind": "Status", "message": "not found", "code": 404}')
    return Answer(body=b'{"kind": "List", "items": [], "metadata": {}}')


def test_lab_apply_refuses_a_budget_field_helm_owns_and_writes_nothing(lab: Path) -> None:
    git(lab, "init", "-q")
    git(lab, "add", "-A")
    git(lab, "commit", "-qm", "the lab fleet")
    with FakeApi(helm_owns_the_budget) as fake:
        env = {"KUBECONFIG": str(fake.kubeconfig(lab / "kubeconfig"))}
        results = [
            run_main("apply", "--from", "clusters/lab", *dry_run, cwd=lab, env=env)
            for dry_run in ((), ("--dry-run",))
        ]
    for result in results:
        assert (result.returncode, result.stdout) == (2, ""), result.stdout + result.stderr
        (line,) = result.stderr.splitlines()
        assert line == (
            "gpudrv: PDB gpu-drv/trainer-pdb (minAvailable 3 -> 4; clusters/lab/workloads/trainer.yaml:30): "
            "field manager 'helm' owns spec.minAvailable: gpudrv does not take fields from another manager "
            "(no forced apply). Let that manager change the budget, or take the budget out of its hands "
            "first (docs/lab-mode.md, budgets another manager owns); the budget and the nodes are left as "
            "they were"
        )
    writes = [(r.method, r.path, r.query) for r in fake.requests if r.method != "GET"]
    applied = ("PATCH", f"{BUDGETS}/trainer-pdb", {"fieldManager": ["gpudrv"], "dryRun": ["All"]})
    assert writes == [applied, applied]  # one dry run per apply; no real write, no node touched
