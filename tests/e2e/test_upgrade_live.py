"""Safe driver upgrades on the real control plane, the GitOps way (docs/lab.md steps 6-8)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Kube
from tests.e2e.gitops import NS, STATE_LABEL, STATES, GitLab

TARGET_TAG = "550-5.15.0-107-generic-ubuntu22.04"
INITIAL = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"


@pytest.fixture
def gitlab(kube: Kube, tmp_path: Path) -> Iterator[GitLab]:
    lab = GitLab.create(kube, tmp_path / "fleet")
    try:
        lab.deploy()
        yield lab
    finally:
        lab.teardown()


def branch_with_new_driver(lab: GitLab) -> None:
    lab.git("checkout", "-q", "-b", "upgrade-lab-node-1")
    lab.set_driver("lab-node-1", "550", "90", "07")
    lab.commit("lab-node-1: driver 550.90.07")


def add_image_row(lab: GitLab) -> None:
    assert lab.gpudrv("matrix", "add", "--tag", TARGET_TAG).returncode == 0
    lab.commit("matrix: add 550 for 5.15.0-107 (#7)")


def merge_into_main(lab: GitLab) -> None:
    lab.git("checkout", "-q", "main")
    lab.git(
        "merge",
        "-q",
        "--no-ff",
        "upgrade-lab-node-1",
        "-m",
        "Merge pull request #7 from team/upgrade-lab-node-1",
    )


def merged_upgrade(lab: GitLab, min_available: int = 4) -> None:
    """lab-node-1 to 550.90.07 with its image row, merged into main; the budget as given."""
    branch_with_new_driver(lab)
    add_image_row(lab)
    merge_into_main(lab)
    lab.set_min_available(min_available)
    if lab.git("status", "--porcelain"):
        lab.commit(f"trainer-pdb: minAvailable {min_available}")


def test_upgrade_the_gitops_way(gitlab: GitLab) -> None:
    lab = gitlab
    before = lab.labels("lab-node-1")

    # The desired driver changes on a branch: the image is not in the matrix anywhere yet.
    branch_with_new_driver(lab)
    plan = lab.gpudrv("plan", "--from", "clusters/lab")
    assert plan.returncode == 1, plan.stderr
    assert f"[blocked] image: {TARGET_TAG} is not in matrix/support-matrix.csv on main" in plan.stdout
    data = json.loads(lab.gpudrv("plan", "--from", "clusters/lab", "-o", "json").stdout)
    assert [(n["node"], n["target_tag"], n["blocked"]) for n in data["nodes"]] == [
        ("lab-node-1", TARGET_TAG, True)
    ]

    # The row is added on the branch only: apply refuses and touches nothing.
    add_image_row(lab)
    refused = lab.gpudrv("apply", "--from", "clusters/lab")
    assert refused.returncode == 1
    assert "only in the working tree: merge it first" in refused.stdout
    assert lab.labels("lab-node-1") == before
    assert not lab.cordoned("lab-node-1")

    # Merged: the image gate passes, but the budget has no room, so the node is NOT cordoned.
    merge_into_main(lab)
    blocked = lab.gpudrv("apply", "--from", "clusters/lab")
    assert blocked.returncode == 1, refused.stdout + blocked.stdout
    assert "lab-node-1: blocked, not cordoned: PDB gpu-drv/trainer-pdb allows 0 disruptions" in blocked.stdout
    assert not lab.cordoned("lab-node-1")
    assert STATE_LABEL not in lab.labels("lab-node-1")
    status = lab.gpudrv("status", "--from", "clusters/lab")
    assert "PDB gpu-drv/trainer-pdb allows 0 disruptions" in status.stdout

    # Room in the budget, committed: apply syncs the PDB, drains, relabels, uncordons.
    lab.set_min_available(3)
    lab.commit("trainer-pdb: minAvailable 3 for the upgrade")
    done = lab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    progress = done.stderr  # -o json: the progress lines on stderr, one object on stdout
    assert "applied PDB gpu-drv/trainer-pdb: minAvailable 4 -> 3" in progress
    assert [
        line.split(": ", 1)[1] for line in progress.splitlines() if line.split(": ", 1)[-1] in STATES
    ] == STATES
    outcome = json.loads(done.stdout)
    assert (outcome["kind"], outcome["mode"], outcome["ok"], outcome["audited"]) == (
        "apply",
        "lab",
        True,
        True,
    )
    assert [(n["node"], n["outcome"]) for n in outcome["nodes"]] == [("lab-node-1", "upgraded")]
    labels = lab.labels("lab-node-1")
    assert labels[STATE_LABEL] == "upgrade-done"
    assert (labels["nvidia.com/cuda.driver.major"], labels["nvidia.com/cuda.driver.minor"]) == ("550", "90")
    assert labels["nvidia.com/cuda.driver.rev"] == "07"
    assert not lab.cordoned("lab-node-1")
    assert (
        lab.pdb_status("trainer-pdb")
        and lab.kube.get("pdb", "trainer-pdb", "-n", NS)["spec"]["minAvailable"] == 3
    )

    assert (lab.gpudrv("audit").returncode, lab.gpudrv("audit").stdout) == (0, "OK\n")
    report = lab.gpudrv("report").stdout.splitlines()
    assert report[:3] == ["NODES=4", "SKEW=0", "MATRIX_ROWS=5"]
    assert f"LAB_NODE_1_TAG={TARGET_TAG}" in report
    assert "LAB_NODE_1_UPGRADE_STATE=upgrade-done" in report

    again = lab.gpudrv("apply", "--from", "clusters/lab")
    assert again.returncode == 0
    assert "nothing to upgrade" in again.stdout
    assert "applied PDB" not in again.stdout


def test_dry_run_changes_nothing(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    before = gitlab.node("lab-node-1")
    dry = gitlab.gpudrv("apply", "--from", "clusters/lab", "--dry-run")
    assert dry.returncode == 1, dry.stdout  # blocked by the budget as it is live now
    assert "dry run: nothing was changed" in dry.stdout
    assert "would apply PDB gpu-drv/trainer-pdb: minAvailable 4 -> 3" in dry.stdout
    assert gitlab.node("lab-node-1")["metadata"] == before["metadata"]  # type: ignore[index]
    assert gitlab.kube.get("pdb", "trainer-pdb", "-n", NS)["spec"]["minAvailable"] == 4


def helm_applies_the_budget(lab: GitLab, min_available: int) -> None:
    """trainer-pdb as Helm 4 or a GitOps engine writes it: a server-side apply as field manager helm,
    forced as the engines force theirs (docs/gitops.md)."""
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer-pdb", "namespace": NS},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    lab.kube.apply(json.dumps(budget), "--server-side", "--field-manager=helm", "--force-conflicts")


def owners(lab: GitLab, field: str) -> set[str]:
    """The field managers that own trainer-pdb's spec.<field>, from its managedFields."""
    live = lab.kube.get("pdb", "trainer-pdb", "-n", NS, "--show-managed-fields")
    return {
        entry["manager"]
        for entry in live["metadata"].get("managedFields") or []
        if f"f:{field}" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})
    }


def test_a_budget_another_manager_owns_is_refused_naming_it_and_left_alone(gitlab: GitLab) -> None:
    """Helm applies trainer-pdb as it is (minAvailable 4): it owns the field with gpudrv, which created
    the budget. The merged change to 3 is refused, with --dry-run and without: one line naming helm and
    the field, exit 2, the budget still 4 and helm's, lab-node-1 untouched. Once helm itself applies 3,
    gpudrv has no budget to write and upgrades the node."""
    lab = gitlab
    helm_applies_the_budget(lab, 4)
    assert "helm" in owners(lab, "minAvailable")
    merged_upgrade(lab, min_available=3)
    metadata = lab.node("lab-node-1")["metadata"]
    assert isinstance(metadata, dict)
    before = (lab.labels("lab-node-1"), metadata.get("annotations"))

    for dry_run in ((), ("--dry-run",)):
        refused = lab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s", *dry_run)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "applied PDB" not in refused.stdout and "lab-node-1:" not in refused.stdout, refused.stdout
        (line,) = refused.stderr.splitlines()
        assert line.startswith("gpudrv: PDB gpu-drv/trainer-pdb (minAvailable 4 -> 3; "), line
        assert (
            "field manager 'helm' owns spec.minAvailable: gpudrv does not take fields from another manager "
            "(no forced apply)" in line
        ), line
        assert line.endswith("the budget and the nodes are left as they were"), line

    assert lab.kube.get("pdb", "trainer-pdb", "-n", NS)["spec"]["minAvailable"] == 4
    assert "helm" in owners(lab, "minAvailable")
    metadata = lab.node("lab-node-1")["metadata"]
    assert isinstance(metadata, dict)
    assert (lab.labels("lab-node-1"), metadata.get("annotations")) == before
    assert not lab.cordoned("lab-node-1")

    # The manager that owns the field makes the change: gpudrv writes no budget, and upgrades.
    helm_applies_the_budget(lab, 3)
    lab.kube.wait_for(
        "room in trainer-pdb", lambda: lab.pdb_status("trainer-pdb").get("disruptionsAllowed") == 1
    )
    done = lab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied PDB" not in done.stdout
    assert lab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert owners(lab, "minAvailable") == {"helm"}


def test_a_node_cordoned_by_hand_stays_cordoned(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    gitlab.kube.run("cordon", "lab-node-1")
    plan = gitlab.gpudrv("plan", "--from", "clusters/lab")
    assert "cordoned before the upgrade: it stays cordoned afterwards" in plan.stdout
    done = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert done.returncode == 0, done.stdout
    assert "left cordoned, as it was before the upgrade" in done.stdout
    # the operator's conventions: the initial-state annotation, then no uncordon-required at all
    assert [what for _, what in transitions_by_node(done.stdout)] == [
        state for state in STATES if state != "uncordon-required"
    ]
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert gitlab.cordoned("lab-node-1")
    assert INITIAL not in (gitlab.node("lab-node-1")["metadata"].get("annotations") or {})  # type: ignore[union-attr]


BARE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "hand-made", "namespace": NS},
    "spec": {"nodeName": "lab-node-1", "containers": [{"name": "c", "image": "busybox"}]},
}


def test_a_pod_without_controller_blocks_without_force(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    gitlab.kube.apply(json.dumps(BARE_POD))
    gitlab.kube.wait_for("the bare pod Running", lambda: "hand-made" in gitlab.running(""))
    blocked = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert blocked.returncode == 1
    assert f"pod {NS}/hand-made has no controller (use --force to delete it)" in blocked.stdout
    assert not gitlab.cordoned("lab-node-1")

    forced = gitlab.gpudrv("apply", "--from", "clusters/lab", "--force")
    assert forced.returncode == 0, forced.stdout
    assert f"pod {NS}/hand-made deleted (no controller, --force)" in forced.stdout
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"


# A drain that cannot finish on its own: two pods pinned to lab-node-1 under a budget that allows one
# eviction, whose replacement can never become healthy while the node is cordoned.
PINNED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned, namespace: gpu-drv}
spec:
  replicas: 2
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      nodeSelector: {kubernetes.io/hostname: lab-node-1}
      containers: [{name: c, image: busybox}]
"""
PINNED_PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pinned-pdb, namespace: gpu-drv}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: pinned}}
"""


def stuck_in_drain(lab: GitLab) -> subprocess.Popen[str]:
    """An apply that reached drain-required and waits there on pinned-pdb."""
    merged_upgrade(lab, min_available=3)
    (lab.root / "clusters/lab/workloads/pinned.yaml").write_text(PINNED + "---" + PINNED_PDB)
    lab.commit("pinned workload and its budget")
    lab.apply_workloads(lab.root / "clusters/lab/workloads/pinned.yaml")  # pinned-pdb is gpudrv's to change
    lab.kube.wait_for("2 pinned pods Running", lambda: len(lab.running("app=pinned")) == 2)
    lab.kube.wait_for(
        "pinned-pdb allows 1", lambda: lab.pdb_status("pinned-pdb").get("disruptionsAllowed") == 1
    )
    process = lab.start_gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "5m")
    lab.kube.wait_for(
        "eviction refused by pinned-pdb", lambda: len(lab.running("app=pinned")) == 1, timeout=60
    )
    time.sleep(1)  # let it retry once against the budget
    assert lab.labels("lab-node-1")[STATE_LABEL] == "drain-required"
    return process


def test_sigkill_during_drain_then_resume(gitlab: GitLab) -> None:
    process = stuck_in_drain(gitlab)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert gitlab.cordoned("lab-node-1")

    # The budget in git gets room; the next run resumes at drain-required and finishes.
    path = gitlab.root / "clusters/lab/workloads/pinned.yaml"
    path.write_text(path.read_text().replace("minAvailable: 1", "minAvailable: 0"))
    gitlab.commit("pinned-pdb: let the upgrade through")
    resumed = gitlab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s")
    assert resumed.returncode == 0, resumed.stdout
    transitions = [
        line.split(": ", 1)[1] for line in resumed.stdout.splitlines() if line.split(": ", 1)[-1] in STATES
    ]
    assert transitions == STATES[STATES.index("drain-required") :]  # no finished step again
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert not gitlab.cordoned("lab-node-1")
    annotations = gitlab.node("lab-node-1")["metadata"].get("annotations", {})  # type: ignore[union-attr]
    assert not [key for key in annotations if key.startswith("gpudrv.dev/")]


def test_two_runs_never_drive_the_same_node(gitlab: GitLab) -> None:
    first = stuck_in_drain(gitlab)
    try:
        second = gitlab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "5s")
        assert second.returncode == 1
        assert "lab-node-1: being upgraded by another gpudrv run" in second.stdout
        assert gitlab.labels("lab-node-1")[STATE_LABEL] == "drain-required"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)


@pytest.mark.parametrize(
    "state",
    [
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
    ],
)
def test_resumes_from_any_state(gitlab: GitLab, state: str) -> None:
    """A run killed just after writing `state`: the node carries the label and the annotations."""
    merged_upgrade(gitlab, min_available=3)
    patch = {
        "metadata": {
            "labels": {STATE_LABEL: state},
            "annotations": {"gpudrv.dev/initial-unschedulable": "false"},
        }
    }
    index = STATES.index(state)
    if index > STATES.index("cordon-required"):  # the cordon is written with the next state
        patch["spec"] = {"unschedulable": True}  # type: ignore[assignment]
    if index > STATES.index("pod-restart-required"):  # the driver was already installed
        driver = {"nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "90"}
        patch["metadata"]["labels"].update({**driver, "nvidia.com/cuda.driver.rev": "07"})
    gitlab.kube.run("patch", "node", "lab-node-1", "--type=merge", "-p", json.dumps(patch))
    resumed = gitlab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s")
    assert resumed.returncode == 0, resumed.stdout
    transitions = [
        line.split(": ", 1)[1] for line in resumed.stdout.splitlines() if line.split(": ", 1)[-1] in STATES
    ]
    assert transitions == STATES[index:]
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert not gitlab.cordoned("lab-node-1")


def test_drain_command(gitlab: GitLab) -> None:
    preflight = gitlab.gpudrv("drain", "lab-node-1", "--preflight")
    assert preflight.returncode == 1
    assert "node/lab-node-1 not cordoned: PDB gpu-drv/trainer-pdb allows 0 disruptions" in preflight.stdout
    assert not gitlab.cordoned("lab-node-1")

    refused = gitlab.gpudrv("drain", "lab-node-1", "--timeout", "6s")
    assert refused.returncode == 1
    assert "drain of lab-node-1 timed out after 6s: eviction of gpu-drv/trainer-" in refused.stdout
    assert "PDB gpu-drv/trainer-pdb allows 0 disruptions" in refused.stdout
    assert gitlab.cordoned("lab-node-1")  # like kubectl drain: cordoned first

    gitlab.kube.run(
        "patch", "pdb", "trainer-pdb", "-n", NS, "--type=merge", "-p", '{"spec":{"minAvailable":3}}'
    )
    gitlab.kube.wait_for(
        "room in trainer-pdb", lambda: gitlab.pdb_status("trainer-pdb").get("disruptionsAllowed") == 1
    )
    drained = gitlab.gpudrv("drain", "lab-node-1", "--timeout", "30s")
    assert drained.returncode == 0, drained.stdout
    assert "node/lab-node-1 drained" in drained.stdout
    assert "lab-node-1" not in gitlab.running("app=trainer").values()


def test_a_drain_that_times_out_fails_and_stays_cordoned_until_retried(gitlab: GitLab) -> None:
    process = stuck_in_drain(gitlab)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    failed = gitlab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "6s")
    assert failed.returncode == 1
    assert (
        "lab-node-1: upgrade-failed at drain-required: drain of lab-node-1 timed out after 6s"
        in failed.stdout
    )
    assert "PDB gpu-drv/pinned-pdb allows 0 disruptions" in failed.stdout
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-failed"
    annotations = gitlab.node("lab-node-1")["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["gpudrv.dev/upgrade-failure"].startswith(
        "drain-required: drain of lab-node-1 timed out"
    )
    # The operator's rule: a failed node stays cordoned until its driver is in sync.
    assert "left cordoned until its driver is in sync" in failed.stdout
    assert gitlab.cordoned("lab-node-1")
    assert INITIAL not in annotations  # it was schedulable before gpudrv began
    events = gitlab.kube.get("events", "-n", "default", "--field-selector", "involvedObject.name=lab-node-1")[
        "items"
    ]
    assert any(e["reason"] == "DriverUpgradeFailed" and e["type"] == "Warning" for e in events)
    status = gitlab.gpudrv("status", "--from", "clusters/lab").stdout
    assert "upgrade-failed" in status and "drain-required: drain of lab-node-1 timed out" in status

    # Once the budget has room, the next run tries the failed upgrade again from the start.
    path = gitlab.root / "clusters/lab/workloads/pinned.yaml"
    path.write_text(path.read_text().replace("minAvailable: 1", "minAvailable: 0"))
    gitlab.commit("pinned-pdb: let the upgrade through")
    retried = gitlab.gpudrv("apply", "--from", "clusters/lab", "--drain-timeout", "60s")
    assert retried.returncode == 0, retried.stdout
    assert [what for _, what in transitions_by_node(retried.stdout)] == STATES
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert not gitlab.cordoned("lab-node-1")
    assert "gpudrv.dev/upgrade-failure" not in gitlab.node("lab-node-1")["metadata"]["annotations"]  # type: ignore[index]


def test_installer_wait_waits_for_the_node_to_report_the_driver(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    process = gitlab.start_gpudrv(
        "apply", "--from", "clusters/lab", "--installer", "wait", "--timeout", "60s"
    )
    gitlab.kube.wait_for(
        "pod-restart-required", lambda: gitlab.labels("lab-node-1").get(STATE_LABEL) == "pod-restart-required"
    )
    time.sleep(3)
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "pod-restart-required"  # still waiting for the driver
    driver = [
        "nvidia.com/cuda.driver.major=550",
        "nvidia.com/cuda.driver.minor=90",
        "nvidia.com/cuda.driver.rev=07",
    ]
    gitlab.kube.run(
        "label", "node", "lab-node-1", "--overwrite", *driver
    )  # what GPU Feature Discovery would do
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    assert "lab-node-1: driver 550.90.07 reported" in out
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    events = gitlab.kube.get("events", "-n", "default", "--field-selector", "involvedObject.name=lab-node-1")[
        "items"
    ]
    assert any(e["reason"] == "DriverUpgradeDone" for e in events)


def transitions_by_node(output: str) -> list[tuple[str, str]]:
    pairs = [tuple(line.split(": ", 1)) for line in output.splitlines() if ": " in line]
    return [(node, what) for node, what in pairs if what in STATES]


@pytest.mark.parametrize(("min_available", "together"), [(3, False), (2, True)])
def test_max_parallel_never_exceeds_the_budget(gitlab: GitLab, min_available: int, together: bool) -> None:
    """Two nodes to upgrade with --max-parallel 2: one at a time when the budget allows one eviction,
    both at once when it allows two."""
    merged_upgrade(gitlab, min_available=min_available)
    gitlab.set_driver("lab-node-0", "550", "100", "01")  # same branch: its image is already in the matrix
    gitlab.commit("lab-node-0: driver 550.100.01")
    done = gitlab.gpudrv("apply", "--from", "clusters/lab", "--max-parallel", "2", "--drain-timeout", "60s")
    assert done.returncode == 0, done.stdout
    steps = transitions_by_node(done.stdout)
    first_done = min(i for i, (_, what) in enumerate(steps) if what == "upgrade-done")
    starts = [i for i, (_, what) in enumerate(steps) if what == "upgrade-required"]
    assert len(starts) == 2
    assert (starts[1] < first_done) is together
    for node in ("lab-node-0", "lab-node-1"):
        assert gitlab.labels(node)[STATE_LABEL] == "upgrade-done"
        assert not gitlab.cordoned(node)


def test_sigkill_while_waiting_for_the_driver_then_resume(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    process = gitlab.start_gpudrv(
        "apply", "--from", "clusters/lab", "--installer", "wait", "--timeout", "60s"
    )
    gitlab.kube.wait_for(
        "pod-restart-required", lambda: gitlab.labels("lab-node-1").get(STATE_LABEL) == "pod-restart-required"
    )
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert gitlab.cordoned("lab-node-1")
    driver = [
        "nvidia.com/cuda.driver.major=550",
        "nvidia.com/cuda.driver.minor=90",
        "nvidia.com/cuda.driver.rev=07",
    ]
    gitlab.kube.run("label", "node", "lab-node-1", "--overwrite", *driver)
    resumed = gitlab.gpudrv("apply", "--from", "clusters/lab", "--installer", "wait", "--timeout", "60s")
    assert resumed.returncode == 0, resumed.stdout
    assert [what for _, what in transitions_by_node(resumed.stdout)] == STATES[
        STATES.index("pod-restart-required") :
    ]
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    assert not gitlab.cordoned("lab-node-1")


# --- the GPU Operator's conventions in lab mode (docs/operator-contract.md) ------------------------------

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
CRDS = Path(__file__).parent / "manifests" / "gpu-operator-crds.yaml"


def test_the_skip_label_leaves_a_node_alone_and_says_so(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    gitlab.kube.run("label", "node", "lab-node-1", f"{SKIP}=true")
    done = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert done.returncode == 0, done.stdout
    assert "lab-node-1: nvidia.com/gpu-driver-upgrade.skip=true: skipped, left alone" in done.stdout
    assert "0 upgraded, 0 blocked, 0 failed, 1 skipped" in done.stdout
    labels = gitlab.labels("lab-node-1")
    assert STATE_LABEL not in labels and labels["nvidia.com/cuda.driver.major"] == "535"
    assert not gitlab.cordoned("lab-node-1")
    status = gitlab.gpudrv("status", "--from", "clusters/lab").stdout
    assert "nvidia.com/gpu-driver-upgrade.skip=true: skipped" in status


def test_a_state_gpudrv_does_not_drive_is_shown_and_left_alone(gitlab: GitLab) -> None:
    """node-maintenance-required (newer libs' requestor mode) on a node cordoned by someone else: never
    read as "no state", even though its driver already matches."""
    gitlab.kube.run("label", "node", "lab-node-0", f"{STATE_LABEL}=node-maintenance-required")
    gitlab.kube.run("cordon", "lab-node-0")
    gitlab.set_driver("lab-node-0", "550", "100", "01")  # same branch: its image is in the matrix
    gitlab.commit("lab-node-0: driver 550.100.01")
    done = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert done.returncode == 1, done.stdout
    assert (
        "lab-node-0: blocked, left cordoned: node-maintenance-required: an external maintenance "
        "operator holds the node (requestor mode); left alone (cordoned)"
    ) in done.stdout
    assert gitlab.labels("lab-node-0")[STATE_LABEL] == "node-maintenance-required"
    assert gitlab.cordoned("lab-node-0")
    status = gitlab.gpudrv("status", "--from", "clusters/lab").stdout
    row = next(line for line in status.splitlines() if line.startswith("lab-node-0"))
    assert "node-maintenance-required" in row and "external maintenance operator" in row
    report = gitlab.gpudrv("report").stdout
    assert "LAB_NODE_0_UPGRADE_STATE=node-maintenance-required" in report


def owned_pod(gitlab: GitLab, name: str, labels: dict[str, str], resources: dict[str, str]) -> None:
    """A pod on lab-node-1 with a controller nothing recreates it from (a ConfigMap owns it): evicted,
    it is gone for good, so a drain can finish."""
    gitlab.kube.apply(
        json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}})
    )
    uid = gitlab.kube.get("configmap", name, "-n", NS)["metadata"]["uid"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": True}
            ],
        },
        "spec": {
            "nodeName": "lab-node-1",
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": resources}}],
        },
    }
    gitlab.kube.apply(json.dumps(pod))
    gitlab.kube.wait_for(
        f"{name} Running", lambda: name in gitlab.running(",".join(f"{k}={v}" for k, v in labels.items()))
    )


def test_mig_pods_are_gpu_pods_and_drain_skip_pods_stay(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    owned_pod(gitlab, "mig-worker", {"app": "mig"}, {"nvidia.com/mig-1g.10gb": "1"})
    owned_pod(gitlab, "node-agent", {"app": "agent", "nvidia.com/gpu-driver-upgrade-drain.skip": "true"}, {})
    # busybox is no CUDA image and no registry is read here: the CUDA gate (fail closed) would refuse
    # it; the eviction order is what this test is about, so the image is let through by name.
    done = gitlab.gpudrv(
        "apply", "--from", "clusters/lab", "--drain-timeout", "60s", "--allow-unverified-images"
    )
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    evicted = lines.index("lab-node-1: pod gpu-drv/mig-worker evicted")
    # GPU pods go at pod-deletion-required, before drain-required
    assert (
        lines.index("lab-node-1: pod-deletion-required") < evicted < lines.index("lab-node-1: drain-required")
    )
    assert "node-agent" not in done.stdout
    assert gitlab.running("app=agent") == {"node-agent": "lab-node-1"}
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"


DRIVER_DS = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    # Not the operator's DaemonSet (that one would make lab mode refuse): only its pods carry the label.
    "metadata": {"name": "lab-driver", "namespace": NS, "labels": {"app": "lab-driver"}},
    "spec": {
        "selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
        "updateStrategy": {"type": "OnDelete"},
        "template": {
            "metadata": {"labels": {"app": "nvidia-driver-daemonset"}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "lab-node-1"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "driver", "image": "nvcr.io/nvidia/driver:535.183.06"}],
            },
        },
    },
}


def driver_pods(gitlab: GitLab) -> dict[str, str]:
    return gitlab.running("app=nvidia-driver-daemonset")


def test_installer_wait_deletes_the_out_of_date_driver_pod(gitlab: GitLab) -> None:
    """The driver DaemonSet is OnDelete, as the operator's: gpudrv deletes the old pod at
    pod-restart-required, the DaemonSet starts the new one, GFD (here: kubectl) reports the driver."""
    gitlab.kube.apply(json.dumps(DRIVER_DS))
    gitlab.kube.wait_for("the old driver pod Running", lambda: len(driver_pods(gitlab)) == 1)
    (old,) = driver_pods(gitlab)
    image = "nvcr.io/nvidia/driver:550.90.07"
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "driver", "image": image}]}}}}
    gitlab.kube.run("patch", "daemonset", "lab-driver", "-n", NS, "--type=strategic", "-p", json.dumps(patch))
    time.sleep(2)
    assert driver_pods(gitlab) == {old: "lab-node-1"}  # OnDelete: nothing happens by itself
    merged_upgrade(gitlab, min_available=3)
    process = gitlab.start_gpudrv(
        "apply", "--from", "clusters/lab", "--installer", "wait", "--timeout", "90s"
    )
    gitlab.kube.wait_for(
        "a new driver pod", lambda: (pods := driver_pods(gitlab)) and old not in pods, timeout=60
    )
    driver = [
        "nvidia.com/cuda.driver.major=550",
        "nvidia.com/cuda.driver.minor=90",
        "nvidia.com/cuda.driver.rev=07",
    ]
    gitlab.kube.run("label", "node", "lab-node-1", "--overwrite", *driver)
    out, _ = process.communicate(timeout=90)
    assert process.returncode == 0, out
    assert f"lab-node-1: driver pod {NS}/{old} deleted: out of date with its DaemonSet" in out
    assert gitlab.labels("lab-node-1")[STATE_LABEL] == "upgrade-done"
    (new,) = driver_pods(gitlab)
    assert new != old
    assert gitlab.kube.get("pod", new, "-n", NS)["spec"]["containers"][0]["image"] == image


OPERATOR_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "gpu-operator",
        "namespace": NS,
        "labels": {"app.kubernetes.io/component": "gpu-operator"},
    },
    "spec": {
        "replicas": 0,
        "selector": {"matchLabels": {"app": "gpu-operator"}},
        "template": {
            "metadata": {"labels": {"app": "gpu-operator"}},
            "spec": {
                "containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v25.3.0"}]
            },
        },
    },
}


def test_lab_mode_refuses_to_run_beside_the_operator(gitlab: GitLab) -> None:
    merged_upgrade(gitlab, min_available=3)
    had_crd = gitlab.kube.run("get", "crd", "clusterpolicies.nvidia.com", check=False).returncode == 0
    gitlab.kube.run("apply", "-f", str(CRDS))
    gitlab.kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "e2e-lab-refusal"},
        "spec": {"driver": {"version": "550.90.07"}},
    }
    try:
        gitlab.kube.apply(json.dumps(policy))
        for args in (("apply", "--from", "clusters/lab"), ("apply", "--from", "clusters/lab", "--dry-run")):
            refused = gitlab.gpudrv(*args)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert refused.stderr.count("\n") == 1
            assert "lab mode refused: ClusterPolicy e2e-lab-refusal in the cluster at" in refused.stderr
            assert "two controllers must never drive one label" in refused.stderr
        assert STATE_LABEL not in gitlab.labels("lab-node-1") and not gitlab.cordoned("lab-node-1")
    finally:
        gitlab.kube.run("delete", "clusterpolicy", "e2e-lab-refusal", "--ignore-not-found", check=False)
        if not had_crd:
            gitlab.kube.run("delete", "-f", str(CRDS), "--ignore-not-found", "--wait=true", check=False)
    # The operator's driver DaemonSet alone is enough.
    operator_ds = json.loads(json.dumps(DRIVER_DS))
    operator_ds["metadata"] = {"name": "nvidia-driver-daemonset", "namespace": NS,
                               "labels": {"app": "nvidia-driver-daemonset"}}  # fmt: skip
    gitlab.kube.apply(json.dumps(operator_ds))
    refused = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert refused.returncode == 2
    assert (
        f"lab mode refused: driver DaemonSet {NS}/nvidia-driver-daemonset (app=nvidia-driver-daemonset)"
        in refused.stderr
    )
    gitlab.kube.run("delete", "daemonset", "nvidia-driver-daemonset", "-n", NS, "--wait=true")
    # ...and so is the operator's Deployment (no replicas: nothing runs, it only has to exist).
    gitlab.kube.apply(json.dumps(OPERATOR_DEPLOYMENT))
    refused = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert refused.returncode == 2
    assert (
        f"lab mode refused: the GPU Operator's Deployment {NS}/gpu-operator in the cluster" in refused.stderr
    )
    gitlab.kube.run("delete", "deployment", "gpu-operator", "-n", NS, "--wait=true")
    done = gitlab.gpudrv("apply", "--from", "clusters/lab")
    assert done.returncode == 0, done.stdout
