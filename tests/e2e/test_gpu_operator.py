"""The NVIDIA GPU Operator's own upgrade controller on the test cluster (scripts/operator).

The operator is the real one, built from the Go module proxy and unpatched; its driver and validator
DaemonSets run on kwok nodes. These tests pin down what it does, for gpudrv's operator mode to gate
and explain: the states a node goes through, the skip label, and what a PodDisruptionBudget that
refuses eviction leaves behind. Each test changes the module's one ClusterPolicy to a new driver
version and looks only at its own nodes.
"""

from __future__ import annotations

import functools
import json
import time

from tests.e2e.conftest import FakeNodes
from tests.e2e.gpu_operator import DRIVER_APP, SKIP_LABEL, VALIDATOR_APP, GpuOperator

# With drain disabled (the Helm default) and no GPU pod to delete, a node goes straight from
# pod-deletion-required to pod-restart-required (k8s-operator-libs pkg/upgrade/pod_manager.go).
NO_DRAIN_PATH = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
]


def _settle(operator: GpuOperator, names: list[str], version: str) -> None:
    """The operator has put its driver (at `version`) and validator on the nodes and marked them
    upgrade-done: nothing to upgrade yet."""
    operator.wait_for_driver(names, version)
    for name in names:
        operator.kube.wait_for(f"validator on {name}", functools.partial(operator.validator_ready, name), 120)
        operator.wait_for_state(name, "upgrade-done")


def test_operator_runs_its_driver_and_validator_on_kwok_nodes(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str
) -> None:
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-a")
    version = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, version)
    labels = gpu_operator.node(names[0])["metadata"]["labels"]
    # The operator labelled the node from its NFD PCI label and scheduled its operands by these.
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.deploy.driver"] == "true"
    assert labels["nvidia.com/gpu.deploy.operator-validator"] == "true"
    assert {DRIVER_APP, VALIDATOR_APP} <= set(gpu_operator.daemonsets())
    ds = gpu_operator.kube.get("daemonset", DRIVER_APP, "-n", gpu_operator.namespace)
    assert ds["spec"]["updateStrategy"]["type"] == "OnDelete"
    policy = gpu_operator.get_policy()
    assert policy["status"]["state"] == "ready", json.dumps(policy["status"])
    print(f"\noperator up in {gpu_operator.started_seconds:.1f}s (scripts/operator up, built binary cached)")


def test_operator_upgrades_a_node_to_upgrade_done(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str
) -> None:
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-a")
    node = names[0]
    old = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, old)
    old_pod = gpu_operator.driver_pod(node)
    assert old_pod is not None
    new = "570.86.15" if not old.startswith("570.86.15") else "570.124.06"

    with gpu_operator.recording(operator_nodes.selector) as recorder:
        started = time.monotonic()
        gpu_operator.apply_policy(new)
        gpu_operator.wait_for_upgraded(node, new, timeout=240)
        elapsed = time.monotonic() - started
        recorder.caught_up(node, "upgrade-done")
    states = [s for s in recorder.states_of(node) if s]
    # The label's history from the watch: done at the old version, then the whole path.
    assert states[-len(NO_DRAIN_PATH) :] == NO_DRAIN_PATH, " -> ".join(states)
    # The operator deleted the old driver pod; the DaemonSet (OnDelete) made one with the new image.
    assert gpu_operator.driver_running(node, new)
    new_pod = gpu_operator.driver_pod(node)
    assert new_pod is not None and new_pod["metadata"]["uid"] != old_pod["metadata"]["uid"]
    after = gpu_operator.node(node)
    assert not after["spec"].get("unschedulable"), "uncordoned at the end"
    assert after["metadata"]["labels"]["nvidia.com/cuda.driver.major"] == new.split(".", maxsplit=1)[0]
    events = gpu_operator.node_events(node)
    assert any("Successfully updated node state label to upgrade-done" in e for e in events), events
    print(f"\none node {old} -> {new}: upgrade-required -> upgrade-done in {elapsed:.1f}s")
    print(
        f"  {recorder.seconds(node, 'upgrade-required', 'upgrade-done'):.1f}s by the label's own timestamps"
    )


def test_skip_label_holds_a_node_at_upgrade_required(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str
) -> None:
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-go", f"{unique}-skip")
    go, skip = names
    old = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, old)
    gpu_operator.label(skip, SKIP_LABEL, "true")
    new = "575.51.03" if not old.startswith("575.51.03") else "575.57.08"

    gpu_operator.apply_policy(new, maxParallelUpgrades=1)
    gpu_operator.wait_for_upgraded(go, new, timeout=240)
    gpu_operator.wait_for_state(skip, "upgrade-required", timeout=30)
    # ProcessUpgradeRequiredNodes passes over it on every pass: still there, schedulable, old driver.
    time.sleep(5)
    assert gpu_operator.state(skip) == "upgrade-required"
    assert not gpu_operator.node(skip)["spec"].get("unschedulable")
    assert gpu_operator.driver_running(skip, old)
    assert gpu_operator.driver_running(go, new)

    # The label is all that holds it: removed, the node goes the whole way.
    gpu_operator.label(skip, SKIP_LABEL, None)
    gpu_operator.wait_for_upgraded(skip, new, timeout=240)


def test_pdb_refusing_eviction_leaves_the_node_upgrade_failed_and_cordoned(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str, namespace: str
) -> None:
    """A GPU workload whose PodDisruptionBudget allows no disruption: the operator's pod deletion
    (eviction API) is refused until its timeout, then its drain too, and the node ends upgrade-failed,
    cordoned, with the old driver, until someone deletes the driver pod."""
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-pdb")
    node = names[0]
    old = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, old)
    gpu_operator.advertise_gpus(node, 8)
    app = f"{unique}-train"
    gpu_operator.kube.apply(json.dumps(gpu_workload(app, namespace, node)))
    gpu_operator.kube.apply(json.dumps(pdb(app, namespace)))
    gpu_operator.kube.wait_for(
        f"{app} Running on {node}", lambda: _running(gpu_operator, namespace, app), 120
    )
    gpu_operator.kube.wait_for(
        "the PDB to allow no disruption",
        lambda: gpu_operator.kube.get("pdb", app, "-n", namespace).get("status", {}).get("expectedPods") == 1,
        60,
    )
    new = "580.65.06" if not old.startswith("580.65.06") else "580.82.07"

    with gpu_operator.recording(operator_nodes.selector) as recorder:
        gpu_operator.apply_policy(
            new,
            podDeletion={"timeoutSeconds": 10},
            drain={"enable": True, "timeoutSeconds": 10},
        )
        gpu_operator.wait_for_state(node, "upgrade-failed", timeout=180)
        recorder.caught_up(node, "upgrade-failed")
    states = [s for s in recorder.states_of(node) if s]
    assert states[-3:] == ["pod-deletion-required", "drain-required", "upgrade-failed"], " -> ".join(states)
    assert gpu_operator.node(node)["spec"].get("unschedulable") is True
    assert gpu_operator.driver_running(node, old), "the old driver pod was never deleted"
    events = gpu_operator.node_events(node)
    print(f"\n{node} states: {' -> '.join(states)}")
    print("events:\n  " + "\n  ".join(events))
    assert any("Failed to drain the node" in e for e in events), events

    # The PDB gone, the node stays failed: only an in-sync driver pod moves it on
    # (ProcessUpgradeFailedNodes). A label change makes the controller look again.
    gpu_operator.kube.run("delete", "pdb", app, "-n", namespace)
    gpu_operator.label(node, "e2e.gpudrv.dev/nudge", "1")
    time.sleep(5)
    assert gpu_operator.state(node) == "upgrade-failed"
    pod = gpu_operator.driver_pod(node)
    assert pod is not None
    gpu_operator.kube.run("delete", "pod", pod["metadata"]["name"], "-n", gpu_operator.namespace)
    gpu_operator.wait_for_upgraded(node, new, timeout=180)
    assert not gpu_operator.node(node)["spec"].get("unschedulable")
    gpu_operator.apply_policy(new)  # the module's policy back to the defaults


def _running(operator: GpuOperator, namespace: str, app: str) -> bool:
    pods = operator.kube.get("pods", "-n", namespace, "-l", f"app={app}")["items"]
    return len(pods) == 1 and pods[0]["status"].get("phase") == "Running"


def gpu_workload(app: str, namespace: str, node: str) -> dict[str, object]:
    """A Deployment of one pod on `node` asking for a GPU: the operator's pod deletion filter picks
    it (cmd/gpu-operator/main.go gpuPodSpecFilter)."""
    gpu = {"nvidia.com/gpu": "1"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [
                        {"name": "train", "image": "gpudrv.invalid/train:1", "resources": {"limits": gpu}}
                    ],
                },
            },
        },
    }


def pdb(app: str, namespace: str) -> dict[str, object]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def test_validator_not_ready_holds_the_node_at_validation_required(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str
) -> None:
    """The new driver runs but the validator pod on the node is not Ready: the operator keeps the
    node cordoned at validation-required, with the time it started waiting in an annotation (after
    600 s it would be upgrade-failed, k8s-operator-libs pkg/upgrade/validation_manager.go)."""
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-val")
    node = names[0]
    old = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, old)
    (validator,) = gpu_operator.pods(VALIDATOR_APP, node)
    gpu_operator.set_pod_ready(validator, False)
    gpu_operator.kube.wait_for("the validator not Ready", lambda: not gpu_operator.validator_ready(node), 30)
    new = "570.172.08" if not old.startswith("570.172.08") else "570.195.03"

    gpu_operator.apply_policy(new)
    gpu_operator.wait_for_state(node, "validation-required", timeout=120)
    time.sleep(3)
    after = gpu_operator.node(node)
    assert gpu_operator.state(node) == "validation-required"
    assert after["spec"].get("unschedulable") is True
    assert "nvidia.com/gpu-driver-upgrade-validation-start-time" in after["metadata"]["annotations"]
    assert gpu_operator.driver_running(node, new)

    # Ready again, the next pass (any node label change wakes the controller) finishes the upgrade.
    (validator,) = gpu_operator.pods(VALIDATOR_APP, node)
    gpu_operator.set_pod_ready(validator, True)
    gpu_operator.label(node, "e2e.gpudrv.dev/nudge", "1")
    gpu_operator.wait_for_state(node, "upgrade-done", timeout=120)
    annotations = gpu_operator.node(node)["metadata"]["annotations"]
    assert "nvidia.com/gpu-driver-upgrade-validation-start-time" not in annotations


IN_PROGRESS = set(NO_DRAIN_PATH[1:-1]) | {"drain-required", "upgrade-failed"}


def test_max_parallel_upgrades_paces_the_nodes(
    gpu_operator: GpuOperator, operator_nodes: FakeNodes, unique: str
) -> None:
    """Three nodes, maxParallelUpgrades 2 (maxUnavailable 100%): two start together, the third only
    once one of them has had its driver pod deleted, and all three finish.

    The bound is not strict: BuildState skips a driver pod the scheduler has not placed yet
    (k8s-operator-libs pkg/upgrade/upgrade_state.go:263-267), so for a moment after the operator
    deletes a node's old driver pod that node counts neither as in progress nor at all, and the
    third node may start while both others are still in progress (seen: the operator logged
    "currently in progress":3 with "max parallel upgrades":2)."""
    names = gpu_operator.add_nodes(operator_nodes, f"{unique}-1", f"{unique}-2", f"{unique}-3")
    old = gpu_operator.get_policy()["spec"]["driver"]["version"]
    _settle(gpu_operator, names, old)
    new = "580.95.05" if not old.startswith("580.95.05") else "580.105.08"

    with gpu_operator.recording(operator_nodes.selector) as recorder:
        gpu_operator.apply_policy(new, maxParallelUpgrades=2, maxUnavailable="100%")
        for name in names:
            gpu_operator.wait_for_upgraded(name, new, timeout=240)
        for name in names:
            recorder.caught_up(name, "upgrade-done")
    history = "\n".join(
        f"{t.at - recorder.transitions[0].at:6.2f} {t.node} {t.state}" for t in recorder.transitions
    )
    current: dict[str, str | None] = {}
    started: list[tuple[str, dict[str, str | None]]] = []  # each node's cordon-required, and the others then
    most = 0
    for t in recorder.transitions:
        current[t.node] = t.state
        if t.state == "cordon-required":
            started.append((t.node, dict(current)))
        most = max(most, sum(1 for state in current.values() if state in IN_PROGRESS))
    assert len(started) == 3, history
    first, second, (third, others) = started[0][1], started[1][1], started[2]
    assert sum(1 for s in second.values() if s in IN_PROGRESS) == 2, history  # two together
    restarted = {"pod-restart-required", "validation-required", "uncordon-required", "upgrade-done"}
    assert any(s in restarted for n, s in others.items() if n != third), history
    assert first and 2 <= most <= 3, history
    for name in names:
        assert [s for s in recorder.states_of(name) if s][-len(NO_DRAIN_PATH) :] == NO_DRAIN_PATH
    print(f"\nmost nodes in progress at once: {most} (maxParallelUpgrades 2)")
    gpu_operator.apply_policy(new)  # the module's policy back to the defaults
