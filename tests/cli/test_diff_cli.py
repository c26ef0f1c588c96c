"""`gpudrv diff` without a cluster: bad input and an unreachable cluster are one line and exit 2."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.files import manifests
from reconciler.core.views.diff import Budget
from tests.cli.test_bad_input import assert_one_line_error
from tests.conftest import run_gpudrv, run_main

DEAD_CLUSTER = """apiVersion: v1
kind: Config
clusters: [{name: dead, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dead, context: {cluster: dead, user: u}}]
current-context: dead
"""


def test_from_is_required(lab: Path) -> None:
    # The real entry point: argparse's usage error exits 2 from the console script.
    result = run_gpudrv("diff", cwd=lab)
    assert result.returncode == 2 and "--from" in result.stderr


def test_manifests_are_read_before_the_cluster(lab: Path) -> None:
    assert_one_line_error(
        run_main("diff", "--from", "nope", "--kubeconfig", "/nonexistent", cwd=lab),
        "nope: no such directory",
    )
    (lab / "clusters/lab/bad.yaml").write_text("kind: PodDisruptionBudget\nmetadata: {}\nspec: {}\n")
    assert_one_line_error(
        run_main("diff", "--from", "clusters/lab", "--kubeconfig", "/nonexistent", cwd=lab),
        "clusters/lab/bad.yaml:1: PodDisruptionBudget without metadata.name",
    )


def test_no_or_unreachable_cluster(lab: Path) -> None:
    assert_one_line_error(
        run_main("diff", "--from", "clusters/lab", "--kubeconfig", "/nonexistent", cwd=lab),
        "kubeconfig /nonexistent: no such file",
    )
    (lab / "dead.kubeconfig").write_text(DEAD_CLUSTER)
    assert_one_line_error(
        run_main("diff", "--from", "clusters/lab", "--kubeconfig", "dead.kubeconfig", cwd=lab),
        "cannot reach the cluster at https://127.0.0.1:9",
    )


def test_budget_specs_from_manifests_are_plain_data(lab: Path) -> None:
    budgets = manifests.load_budget_specs(lab / "clusters/lab")
    origin = f"{lab}/clusters/lab/workloads/trainer.yaml:30"
    assert budgets == [
        Budget(
            "gpu-drv",
            "trainer-pdb",
            {"minAvailable": 4, "selector": {"matchLabels": {"app": "trainer"}}},
            origin,
        )
    ]
    assert type(budgets[0].spec["minAvailable"]) is int
    assert type(budgets[0].spec["selector"]) is dict

    (lab / "clusters/lab/more.yaml").write_text(
        "kind: List\nitems:\n- kind: PodDisruptionBudget\n  metadata: {name: p}\n"
        "  spec: {maxUnavailable: '25%'}\n---\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {}\n"
    )
    assert_one_line_error(
        run_main("diff", "--from", "clusters/lab", "--kubeconfig", "/nonexistent", cwd=lab),
        "clusters/lab/more.yaml:7: PodDisruptionBudget default/p is declared twice",
        "(also clusters/lab/more.yaml:3)",
    )
