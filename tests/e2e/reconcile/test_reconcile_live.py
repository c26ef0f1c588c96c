"""`gpudrv reconcile` on the real control plane, as deploy/'s ServiceAccount (a TokenRequest token):
nodes joining and changing, a matrix row pushed to the fleet repository, a broken fetch, a killed
leader, SIGTERM, and the CronJob's --once."""

from __future__ import annotations

import shutil
import signal
import time

from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.reconcile.conftest import (
    FAST,
    UNKNOWN_KERNEL,
    Deployed,
    Loops,
    Remote,
    add_node_now,
    lease_holder,
    node_events,
    wait_until,
)

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
MISSING_TAG = f"550-{UNKNOWN_KERNEL}-ubuntu22.04"
REPORTED_WITHIN = 5.0  # seconds from `kubectl apply` of a node to its metric


def test_a_node_joining_is_reported_within_seconds_metric_and_event(
    deployed: Deployed, remote: Remote, loops: Loops, nodes: FakeNodes, unique: str
) -> None:
    loop = loops.start(
        "a",
        "--lease-namespace",
        deployed.namespace,
        "--resync",
        "1s",
        *FAST,
        kubeconfig=deployed.kubeconfig,
        remote=remote,
    )
    wait_until(
        "the loop ready and leading", lambda: loop.get("/readyz")[0] == 200 and loop.leading(), 60, [loop]
    )
    assert loop.value("gpudrv_git_sync_up") == 1

    # A node with a kernel no image was built for joins: the metric, at once.
    name = f"{unique}-joins"
    started = time.monotonic()
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    took = wait_until(
        "the missing-image series",
        lambda: loop.value("gpudrv_node_image_missing", node=name, tag=MISSING_TAG) == 1,
        REPORTED_WITHIN,
        [loop],
    )
    print(
        f"node join -> metric: {time.monotonic() - started:.2f}s ({took:.2f}s after kubectl apply returned)"
    )
    # ... and the Event on the Node, with the tag.
    wait_until(
        "the DriverImageMissing event",
        lambda: node_events(deployed.kube, name, "DriverImageMissing"),
        10,
        [loop],
    )
    (event,) = node_events(deployed.kube, name, "DriverImageMissing")
    assert event["type"] == "Warning" and MISSING_TAG in event["message"]
    assert event["involvedObject"]["kind"] == "Node" and event["count"] == 1

    # Deduplicated: full audits every second find it again, and count nothing new (the event is
    # younger than --event-refresh); still one event object.
    audits = loop.value("gpudrv_audit_duration_seconds_count", scope="fleet") or 0
    wait_until(
        "three more full audits",
        lambda: (loop.value("gpudrv_audit_duration_seconds_count", scope="fleet") or 0) >= audits + 3,
        20,
    )
    (event,) = node_events(deployed.kube, name, "DriverImageMissing")
    assert event["count"] == 1

    # Its kernel label changes: audited at once, under the new tag; the old series is gone.
    other = "6.1.0-998-generic"
    deployed.kube.run("label", "node", name, f"{KERNEL}={other}", "--overwrite")
    new_tag = f"550-{other}-ubuntu22.04"
    wait_until(
        "the new tag's series",
        lambda: loop.value("gpudrv_node_image_missing", node=name, tag=new_tag) == 1,
        REPORTED_WITHIN,
        [loop],
    )
    assert loop.series("gpudrv_node_image_missing", node=name) == [{"node": name, "tag": new_tag}]
    wait_until(
        "an event for the new tag",
        lambda: len(node_events(deployed.kube, name, "DriverImageMissing")) == 2,
        10,
    )

    # A GPU node that is fine is counted, not reported.
    fine = f"{unique}-fine"
    add_node_now(nodes, fine)
    wait_until("two GPU nodes", lambda: (loop.value("gpudrv_gpu_nodes") or 0) >= 2, REPORTED_WITHIN, [loop])
    assert loop.series("gpudrv_node_image_missing", node=fine) == []

    # It leaves: its series goes with it.
    deployed.kube.run("delete", "node", name)
    wait_until(
        "the series gone", lambda: not loop.series("gpudrv_node_image_missing", node=name), REPORTED_WITHIN
    )
    assert loop.stop() == 0


def test_a_matrix_row_pushed_clears_it_at_the_next_sync(
    deployed: Deployed, remote: Remote, loops: Loops, nodes: FakeNodes, unique: str
) -> None:
    loop = loops.start(
        "a", "--lease-namespace", deployed.namespace, *FAST, kubeconfig=deployed.kubeconfig, remote=remote
    )
    name = f"{unique}-waits"
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    wait_until(
        "the missing-image series",
        lambda: loop.value("gpudrv_node_image_missing", node=name, tag=MISSING_TAG),
        60,
        [loop],
    )
    first = loop.series("gpudrv_commit_info")[0]["commit"]

    # The image gets built and its row merged: pushed to the remote the loop pulls (--interval 1s).
    commit = remote.push_row(f"550,{UNKNOWN_KERNEL},ubuntu22.04")
    took = wait_until(
        "the series cleared", lambda: not loop.series("gpudrv_node_image_missing", node=name), 10, [loop]
    )
    print(f"push -> cleared: {took:.2f}s")
    assert loop.series("gpudrv_commit_info") == [
        {"commit": commit, "branch": "main", "repository": str(remote.bare)}
    ]
    assert commit != first
    wait_until(
        "DriverImageAvailable", lambda: node_events(deployed.kube, name, "DriverImageAvailable"), 10, [loop]
    )
    (event,) = node_events(deployed.kube, name, "DriverImageAvailable")
    assert event["type"] == "Normal" and MISSING_TAG in event["message"] and commit[:12] in event["message"]

    # A row pushed to another branch is not the configured branch: nothing changes.
    remote.push_row("550,6.1.0-1-generic,ubuntu22.04", branch="feature")
    assert loop.post("/sync") == 202
    time.sleep(2)
    assert loop.series("gpudrv_commit_info")[0]["commit"] == commit

    # A commit whose matrix is broken is refused; the good one stays in force.
    with (remote.work / "matrix/support-matrix.csv").open("a") as handle:
        handle.write("r550,not a kernel,ubuntu22.04\n")
    broken = remote.commit("a broken row")
    remote.git("push", "-q", str(remote.bare), "HEAD:main")
    wait_until("the refusal", lambda: loop.value("gpudrv_commit_rejected_total") == 1, 10, [loop])
    assert loop.series("gpudrv_commit_info")[0]["commit"] == commit != broken
    assert loop.get("/readyz")[0] == 200
    assert loop.stop() == 0


def test_a_broken_fetch_keeps_serving(
    deployed: Deployed, remote: Remote, loops: Loops, nodes: FakeNodes, unique: str
) -> None:
    loop = loops.start(
        "a", "--lease-namespace", deployed.namespace, *FAST, kubeconfig=deployed.kubeconfig, remote=remote
    )
    wait_until(
        "the loop ready and leading", lambda: loop.get("/readyz")[0] == 200 and loop.leading(), 60, [loop]
    )
    commit = loop.series("gpudrv_commit_info")[0]["commit"]
    synced = loop.value("gpudrv_git_last_sync_success_timestamp_seconds")

    # The remote goes away (a dead host, a revoked token: the fetch fails).
    moved = remote.bare.with_name("moved.git")
    remote.bare.rename(moved)
    wait_until("failed fetches", lambda: (loop.value("gpudrv_git_sync_failures_total") or 0) >= 2, 15, [loop])
    assert loop.value("gpudrv_git_sync_up") == 0
    assert loop.process.poll() is None
    assert loop.get("/readyz")[0] == 200 and loop.get("/healthz")[0] == 200
    assert loop.series("gpudrv_commit_info")[0]["commit"] == commit
    last_sync = loop.value("gpudrv_git_last_sync_success_timestamp_seconds")
    assert last_sync is not None and synced is not None and last_sync >= synced

    # Nodes are still audited, with the last good commit's matrix.
    name = f"{unique}-meanwhile"
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    wait_until(
        "the node reported",
        lambda: loop.value("gpudrv_node_image_missing", node=name, tag=MISSING_TAG),
        REPORTED_WITHIN,
        [loop],
    )
    assert "the last good commit stays in force" in loop.output()

    # The remote is back: the next fetch works.
    moved.rename(remote.bare)
    wait_until("fetching again", lambda: loop.value("gpudrv_git_sync_up") == 1, 10, [loop])
    assert loop.stop() == 0


def test_killing_the_leader_hands_over_to_the_standby_within_the_lease(
    deployed: Deployed, remote: Remote, loops: Loops, nodes: FakeNodes, unique: str
) -> None:
    args = ["--lease-namespace", deployed.namespace, *FAST]
    a = loops.start("replica-a", *args, kubeconfig=deployed.kubeconfig, remote=remote)
    wait_until("replica-a leading", a.leading, 60, [a])
    b = loops.start("replica-b", *args, kubeconfig=deployed.kubeconfig, remote=remote)
    wait_until("replica-b ready (standby)", lambda: b.get("/readyz")[0] == 200, 60, [b])
    time.sleep(3)
    assert a.leading() and b.value("gpudrv_leader") == 0  # one active
    assert lease_holder(deployed.kube, deployed.namespace) == "replica-a"
    assert b.series("gpudrv_node_image_missing") == []  # the standby does not audit

    # SIGKILL: no release, the lease must expire (4s here).
    killed = time.monotonic()
    a.process.kill()
    a.process.wait(10)
    took = wait_until("replica-b leading", b.leading, 15, [b])
    print(f"leader killed -> standby leading: {took:.2f}s (lease duration 4s, retry period 1s)")
    # The lease duration, one (jittered) retry period, and slack for a loaded 2-core machine.
    assert took <= 4 + 1.2 + 2.0
    assert lease_holder(deployed.kube, deployed.namespace) == "replica-b"

    # And it acts: a node joining is reported by the new leader.
    name = f"{unique}-after"
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    wait_until(
        "reported by replica-b",
        lambda: b.value("gpudrv_node_image_missing", node=name, tag=MISSING_TAG),
        REPORTED_WITHIN,
        [b],
    )
    print(f"leader killed -> new node reported by the standby: {time.monotonic() - killed:.2f}s")
    assert b.stop() == 0


def test_sigterm_stops_cleanly_and_releases_the_lease(
    deployed: Deployed, remote: Remote, loops: Loops, nodes: FakeNodes, unique: str
) -> None:
    # A long lease: only a released one is taken over quickly.
    args = [
        "--lease-namespace",
        deployed.namespace,
        "--lease-duration",
        "60s",
        "--renew-deadline",
        "40s",
        "--retry-period",
        "1s",
    ]
    a = loops.start("replica-a", *args, kubeconfig=deployed.kubeconfig, remote=remote)
    wait_until("replica-a leading", a.leading, 60, [a])
    b = loops.start("replica-b", *args, kubeconfig=deployed.kubeconfig, remote=remote)
    wait_until("replica-b ready", lambda: b.get("/readyz")[0] == 200, 60, [b])

    stopped = time.monotonic()
    assert a.stop(signal.SIGTERM, timeout=20) == 0
    print(f"SIGTERM -> exited: {time.monotonic() - stopped:.2f}s")
    assert "SIGTERM: stopping after this step" in a.output() and "released the lease" in a.output()
    took = wait_until("replica-b leading", b.leading, 10, [b])
    print(f"SIGTERM -> standby leading: {time.monotonic() - stopped:.2f}s (lease duration 60s)")
    assert took < 10
    name = f"{unique}-later"
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    wait_until(
        "reported by replica-b",
        lambda: b.value("gpudrv_node_image_missing", node=name, tag=MISSING_TAG),
        REPORTED_WITHIN,
        [b],
    )
    assert b.stop() == 0


def test_once_audits_writes_events_and_exits_1(
    kube: Kube, deployed: Deployed, remote: Remote, nodes: FakeNodes, unique: str
) -> None:
    """The CronJob's run (no lease): the node's event, counted again on the next run only when stale."""
    name = f"{unique}-cron"
    add_node_now(nodes, name, **{KERNEL: UNKNOWN_KERNEL})
    args = [
        "reconcile",
        "--once",
        "--repo",
        str(remote.bare),
        "--kubeconfig",
        str(deployed.kubeconfig),
        "--workdir",
        str(remote.bare.parent / "once"),
    ]
    first = kube.gpudrv(*args)
    assert first.returncode == 1, first.stderr
    assert f"{name} MISSING {MISSING_TAG}" in first.stdout
    (event,) = node_events(kube, name, "DriverImageMissing")
    second = kube.gpudrv(*args, "--event-refresh", "0s")
    assert second.returncode == 1, second.stderr
    (again,) = node_events(kube, name, "DriverImageMissing")
    assert again["metadata"]["name"] == event["metadata"]["name"] and again["count"] == 2
    third = kube.gpudrv(*args)  # the default refresh (30m): the event is fresh, nothing counted
    assert third.returncode == 1
    assert node_events(kube, name, "DriverImageMissing")[0]["count"] == 2
    shutil.rmtree(remote.bare.parent / "once", ignore_errors=True)
