"""`gpudrv reconcile --apply` as the apply overlay's ServiceAccount: the lab's upgrade of lab-node-1,
pulled from git, done only once it is merged into the configured branch."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.e2e.conftest import Kube
from tests.e2e.gitops import STATE_LABEL, GitLab
from tests.e2e.reconcile.conftest import DEPLOY, FAST, Loop, Loops, deploy, wait_until
from tests.e2e.test_upgrade_live import add_image_row, branch_with_new_driver, merge_into_main

DRIVER = "nvidia.com/cuda.driver"
NEW_BUDGET = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: reconcile-pdb
  namespace: gpu-drv
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: nothing-yet
"""


def runs(loop: Loop) -> float:
    return sum(
        loop.value("gpudrv_apply_runs_total", result=result) or 0 for result in ("ok", "findings", "error")
    )


def test_apply_in_the_cluster_acts_only_on_the_merged_branch(
    kube: Kube, tmp_path: Path, loops: Loops
) -> None:
    lab = GitLab.create(kube, tmp_path / "fleet")
    overlay = deploy(kube, DEPLOY / "overlays" / "apply", tmp_path)
    bare = tmp_path / "fleet.git"
    try:
        lab.deploy()
        subprocess.run(["git", "clone", "-q", "--bare", str(lab.root), str(bare)], check=True)
        loop = loops.start(
            "applier",
            "--repo",
            str(bare),
            "--lease-namespace",
            overlay.namespace,
            "--apply",
            "--from",
            "clusters/lab",
            "--drain-timeout",
            "60s",
            *FAST,
            kubeconfig=overlay.kubeconfig,
        )
        wait_until(
            "the first apply run",
            lambda: runs(loop) == 1,
            120,
            [loop],
        )
        assert "nothing to upgrade" in loop.output()

        # The new driver and its image row on a branch, pushed but not merged: not acted on.
        branch_with_new_driver(lab)
        add_image_row(lab)
        lab.git("push", "-q", str(bare), "upgrade-lab-node-1")
        assert loop.post("/sync") == 202
        time.sleep(3)
        assert runs(loop) == 1
        assert STATE_LABEL not in lab.labels("lab-node-1")

        # Merged into main, with a budget that allows one node down and a new one: pulled, applied, done.
        merge_into_main(lab)
        lab.set_min_available(3)
        (lab.root / "clusters/lab/workloads/reconcile-pdb.yaml").write_text(NEW_BUDGET)
        lab.commit("trainer-pdb: minAvailable 3; reconcile-pdb")
        lab.git("push", "-q", str(bare), "main")
        wait_until(
            "lab-node-1 upgrade-done",
            lambda: lab.labels("lab-node-1").get(STATE_LABEL) == "upgrade-done",
            180,
            [loop],
        )
        labels = lab.labels("lab-node-1")
        assert [labels[f"{DRIVER}.{part}"] for part in ("major", "minor", "rev")] == ["550", "90", "07"]
        wait_until(
            "the apply run reaped",
            lambda: runs(loop) == 2,
            60,
            [loop],
        )
        assert kube.get("pdb", "reconcile-pdb", "-n", "gpu-drv")["spec"]["maxUnavailable"] == 1  # created
        output = loop.output()
        assert "lab-node-1: upgrade-done" in output and "1 upgraded, 0 blocked, 0 failed" in output
        assert "Forbidden" not in output and "403" not in output
        assert loop.stop() == 0
    finally:
        lab.teardown()
        overlay.remove()
