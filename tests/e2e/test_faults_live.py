"""Issue 12, item 5: faults on the real control plane during `gpudrv apply` (the lab's label-driven
upgrade, both installers): SIGKILL at every upgrade state, kube-apiserver restarted in the middle of a
drain and of a rollout, etcd paused for 10 s, another writer winning a race before every node write.

gpudrv talks to the API server through tests/e2e/faults.py's recording proxy (or directly, for one
restart), so each test counts what gpudrv wrote across all its runs: every state entered once and in
order, the cordon, the driver labels and the uncordon written once, each pod evicted at most once; and
afterwards no node cordoned, no gpudrv annotation left, nothing skipped. Each test prints its figures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpudrv_command, gpudrv_env
from tests.e2e import faults
from tests.e2e.conftest import Kube
from tests.e2e.faults import Exchange, Proxy
from tests.e2e.gitops import NS, STATE_LABEL, STATES, GitLab, scoped
from tests.e2e.test_upgrade_live import PINNED, PINNED_PDB, merged_upgrade

NODE = "lab-node-1"
OWNER = "gpudrv.dev/upgrade-owner"
DRIVER_KEYS = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")


@dataclass
class Faulty:
    lab: GitLab
    proxy: Proxy
    kubeconfig: Path

    def start(self, *args: str, direct: bool = False) -> subprocess.Popen[str]:
        env = self.lab.kube.env if direct else {"KUBECONFIG": str(self.kubeconfig)}
        return subprocess.Popen(
            [*gpudrv_command(), *scoped(args)],
            cwd=self.lab.root,
            env=gpudrv_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def apply(self, *args: str) -> subprocess.CompletedProcess[str]:
        process = self.start("apply", "--from", "clusters/lab", "--drain-timeout", "2m", *args)
        out, _ = process.communicate(timeout=300)
        return subprocess.CompletedProcess(process.args, process.returncode, out, "")


@pytest.fixture
def faulty(kube: Kube, tmp_path: Path) -> Iterator[Faulty]:
    lab = GitLab.create(kube, tmp_path / "fleet")
    with faults.proxy() as proxy:
        try:
            lab.deploy()
            yield Faulty(lab, proxy, proxy.kubeconfig(tmp_path / "proxy-kubeconfig"))
        finally:
            lab.teardown()


# --- what gpudrv wrote, from the proxy's record ----------------------------------------------------------


@dataclass(frozen=True)
class Writes:
    states: list[str]  # every state label gpudrv wrote, in order, repeats of the same value collapsed
    cordons: int
    uncordons: int
    driver_writes: int
    initial_marks: int
    evictions: list[str]  # the pods evicted (201), in order
    conflicts: int  # writes the API server refused with 409

    @classmethod
    def of(cls, exchanges: list[Exchange], node: str = NODE) -> Writes:
        patches = [body for e in exchanges if e.ok and (body := e.node_patch(node)) is not None]
        states: list[str] = []
        for body in patches:
            state = ((body.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL)
            if state and (not states or states[-1] != state):
                states.append(state)
        specs = [body["spec"] for body in patches if "spec" in body]
        labels = [(body.get("metadata") or {}).get("labels") or {} for body in patches]
        annotations = [(body.get("metadata") or {}).get("annotations") or {} for body in patches]
        return cls(
            states=states,
            cordons=sum(spec.get("unschedulable") is True for spec in specs),
            uncordons=sum(spec.get("unschedulable") is None for spec in specs),
            driver_writes=sum(DRIVER_KEYS[1] in label for label in labels),
            initial_marks=sum(bool(a.get("gpudrv.dev/initial-unschedulable")) for a in annotations),
            evictions=[
                e.path for e in exchanges if e.method == "POST" and e.path.endswith("/eviction") and e.ok
            ],
            conflicts=sum(1 for e in exchanges if e.status == 409 and e.node_patch(node) is not None),
        )

    def assert_each_step_once(self, installer: str = "labels") -> None:
        assert self.states == STATES, self.states
        assert (self.cordons, self.uncordons, self.initial_marks) == (1, 1, 1), self
        assert self.driver_writes == (1 if installer == "labels" else 0), self
        assert len(self.evictions) == len(set(self.evictions)), self.evictions


def assert_left_clean(lab: GitLab, node: str = NODE, driver: tuple[str, str, str] | None = None) -> None:
    labels = lab.labels(node)
    assert labels[STATE_LABEL] == "upgrade-done"
    assert not lab.cordoned(node)
    annotations = lab.node(node)["metadata"].get("annotations") or {}  # type: ignore[union-attr]
    assert not [key for key in annotations if key.startswith("gpudrv.dev/")], annotations
    if driver is not None:
        assert tuple(labels[key] for key in DRIVER_KEYS) == driver


def wait_for_room(lab: GitLab) -> None:
    """Every trainer back and Running, and healthy in its budget (apply sets the budget's room)."""
    lab.kube.wait_for("4 trainers Running", lambda: len(lab.running("app=trainer")) == 4, timeout=120)
    lab.kube.wait_for(
        "4 healthy trainers", lambda: lab.pdb_status("trainer-pdb").get("currentHealthy") == 4, timeout=60
    )


def report(title: str, figures: dict[str, object]) -> None:
    print(f"\nFIGURES {title}: {json.dumps(figures)}")


class GpuFeatureDiscovery:
    """installer=wait: what GFD would do once the operator's driver pod runs: the node reports the
    desired driver in its labels (written by kubectl, not through the proxy: not gpudrv's writes)."""

    def __init__(self, lab: GitLab, driver: Callable[[], tuple[str, str, str]]) -> None:
        self.lab, self.driver = lab, driver
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            labels = self.lab.labels(NODE)
            wanted = self.driver()
            if (
                labels.get(STATE_LABEL) == "pod-restart-required"
                and tuple(labels.get(k) for k in DRIVER_KEYS) != wanted
            ):
                pairs = [f"{key}={value}" for key, value in zip(DRIVER_KEYS, wanted, strict=True)]
                self.lab.kube.run("label", "node", NODE, "--overwrite", *pairs, check=False)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


# --- SIGKILL at every state --------------------------------------------------------------------------------


@pytest.mark.parametrize("installer", ["labels", "wait"])
def test_sigkill_at_every_state_then_rerun(faulty: Faulty, installer: str) -> None:
    """For each state: an apply is killed the moment its write of that state is on the node (before it
    hears the answer); the next apply finishes the upgrade. Each state is a new upgrade of lab-node-1
    (550.90.07, then 550.91.01, ...: the same image, so the matrix row is merged once)."""
    lab, proxy = faulty.lab, faulty.proxy
    merged_upgrade(lab, min_available=3)
    desired = ["550", "90", "07"]
    gfd = (
        GpuFeatureDiscovery(lab, lambda: (desired[0], desired[1], desired[2]))
        if installer == "wait"
        else None
    )
    figures: dict[str, object] = {}
    try:
        for round_, state in enumerate(STATES):
            if round_:
                desired[1:] = [str(90 + round_), "01"]
                lab.set_driver(NODE, *desired)
                lab.commit(f"{NODE}: driver {'.'.join(desired)}")
            wait_for_room(lab)
            mark = proxy.mark()
            started = time.monotonic()
            out, code = killed_at(faulty, state, installer)
            assert code == -signal.SIGKILL, out
            first = time.monotonic() - started
            started = time.monotonic()
            rerun = faulty.apply("--installer", installer, "--timeout", "2m")
            assert rerun.returncode == 0, rerun.stdout
            assert "skipped" not in rerun.stdout and ": blocked" not in rerun.stdout
            writes = Writes.of(proxy.since(mark))
            writes.assert_each_step_once(installer)
            assert_left_clean(lab, driver=(desired[0], desired[1], desired[2]))
            figures[state] = {
                "killed_after_s": round(first, 1),
                "rerun_s": round(time.monotonic() - started, 1),
            }
    finally:
        if gfd is not None:
            gfd.close()
    report(f"sigkill-every-state installer={installer}", figures)


def killed_at(faulty: Faulty, state: str, installer: str) -> tuple[str, int]:
    """An apply killed the moment its write of `state` is on the node: its output and exit status."""
    killed = threading.Event()
    process = faulty.start(
        "apply",
        "--from",
        "clusters/lab",
        "--drain-timeout",
        "2m",
        "--installer",
        installer,
        "--timeout",
        "2m",
    )

    def kill(exchange: Exchange) -> None:
        labels = ((exchange.node_patch(NODE) or {}).get("metadata") or {}).get("labels") or {}
        if exchange.ok and labels.get(STATE_LABEL) == state and not killed.is_set():
            killed.set()
            process.send_signal(signal.SIGKILL)

    faulty.proxy.after = kill
    try:
        out, _ = process.communicate(timeout=300)
    finally:
        faulty.proxy.after = None
    return out, process.returncode


# --- another writer before every node write ----------------------------------------------------------------


def write_identity(body: dict[str, Any]) -> str:
    """A write without what changes when it is sent again: the resourceVersion, the lease's expiry."""
    metadata = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
    annotations = dict(metadata.get("annotations") or {})
    if annotations.get(OWNER):
        annotations[OWNER] = json.loads(annotations[OWNER])["holder"]
    return json.dumps({**body, "metadata": {**metadata, "annotations": annotations}}, sort_keys=True)


def test_a_conflict_on_every_node_write_is_retried_on_the_fresh_object(faulty: Faulty) -> None:
    lab, proxy = faulty.lab, faulty.proxy
    merged_upgrade(lab, min_available=3)
    injected: list[str] = []
    seen: set[str] = set()

    def race(exchange: Exchange) -> None:
        body = exchange.node_patch(NODE)
        if body is None or "resourceVersion" not in (body.get("metadata") or {}):
            return
        identity = write_identity(body)
        if identity in seen:
            return  # the retry of a write that lost its race: let it through
        seen.add(identity)
        assert faults.other_writer(NODE, str(len(injected))) == 200
        injected.append(identity)

    proxy.before = race
    mark = proxy.mark()
    done = faulty.apply()
    proxy.before = None
    assert done.returncode == 0, done.stdout
    writes = Writes.of(proxy.since(mark))
    writes.assert_each_step_once()
    assert writes.conflicts == len(injected) > 8, (writes.conflicts, len(injected))
    assert_left_clean(lab)
    annotations = lab.node(NODE)["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["e2e.gpudrv.dev/other-writer"] == str(
        len(injected) - 1
    )  # the other writer's changes stay
    report("conflict-on-every-write", {"writes": len(injected), "conflicts_answered_409": writes.conflicts})


# --- kube-apiserver restarts, etcd paused -------------------------------------------------------------------


def stuck_in_drain(faulty: Faulty, direct: bool = False) -> subprocess.Popen[str]:
    """An apply that reached drain-required and waits there on pinned-pdb (minAvailable 1 of 2)."""
    lab = faulty.lab
    merged_upgrade(lab, min_available=3)
    (lab.root / "clusters/lab/workloads/pinned.yaml").write_text(PINNED + "---" + PINNED_PDB)
    lab.commit("pinned workload and its budget")
    lab.kube.run("apply", "-f", str(lab.root / "clusters/lab/workloads/pinned.yaml"))
    lab.kube.wait_for("2 pinned pods Running", lambda: len(lab.running("app=pinned")) == 2)
    lab.kube.wait_for(
        "pinned-pdb allows 1", lambda: lab.pdb_status("pinned-pdb").get("disruptionsAllowed") == 1
    )
    process = faulty.start("apply", "--from", "clusters/lab", "--drain-timeout", "5m", direct=direct)
    lab.kube.wait_for(
        "eviction refused by pinned-pdb", lambda: len(lab.running("app=pinned")) == 1, timeout=60
    )
    time.sleep(1)
    assert lab.labels(NODE)[STATE_LABEL] == "drain-required"
    return process


def let_the_drain_through(lab: GitLab) -> None:
    lab.kube.run("patch", "pdb", "pinned-pdb", "-n", NS, "--type=merge", "-p", '{"spec":{"minAvailable":0}}')


def first_answer_after(exchanges: list[Exchange], moment: float) -> float | None:
    """Seconds from `moment` to the first request of gpudrv the API server answered after it."""
    answered = [e.at for e in exchanges if e.status and e.at >= moment]
    return round(min(answered) - moment, 2) if answered else None


@pytest.mark.parametrize("direct", [False, True], ids=["through-proxy", "direct"])
def test_apiserver_restart_in_the_middle_of_a_drain(faulty: Faulty, direct: bool) -> None:
    lab, proxy = faulty.lab, faulty.proxy
    mark = proxy.mark()
    process = stuck_in_drain(faulty, direct=direct)
    outage = faults.restart_apiserver()
    let_the_drain_through(lab)
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, out
    transitions = [line.split(": ", 1)[1] for line in out.splitlines() if line.split(": ", 1)[-1] in STATES]
    assert transitions == STATES, out
    assert_left_clean(lab)
    figures: dict[str, object] = {"apiserver_down_s": round(outage.seconds, 1)}
    if not direct:
        writes = Writes.of(proxy.since(mark))
        writes.assert_each_step_once()
        figures["first_answer_after_ready_s"] = first_answer_after(proxy.since(mark), outage.ended)
    figures["gpudrv_noticed"] = sum("waiting for the cluster" in line for line in out.splitlines())
    report(f"apiserver-restart-mid-drain {'direct' if direct else 'proxy'}", figures)


def test_apiserver_restart_in_the_middle_of_a_rollout(faulty: Faulty) -> None:
    """Two nodes, one at a time: the API server restarts while the second node is being upgraded."""
    lab, proxy = faulty.lab, faulty.proxy
    merged_upgrade(lab, min_available=3)
    lab.set_driver("lab-node-0", "550", "100", "01")  # same branch: its image is already in the matrix
    lab.commit("lab-node-0: driver 550.100.01")
    restarted: list[faults.Outage] = []
    began = threading.Event()

    def restart_on_second_node(exchange: Exchange) -> None:
        body = exchange.node_patch("lab-node-1")  # lab-node-0 goes first (name order)
        labels = ((body or {}).get("metadata") or {}).get("labels") or {}
        if exchange.ok and labels.get(STATE_LABEL) == "cordon-required" and not began.is_set():
            began.set()
            threading.Thread(target=lambda: restarted.append(faults.restart_apiserver()), daemon=True).start()

    proxy.after = restart_on_second_node
    mark = proxy.mark()
    done = faulty.apply()
    proxy.after = None
    assert done.returncode == 0, done.stdout
    assert began.is_set() and restarted, done.stdout
    for node in ("lab-node-0", "lab-node-1"):
        Writes.of(proxy.since(mark), node).assert_each_step_once()
        assert_left_clean(lab, node)
    report(
        "apiserver-restart-mid-rollout",
        {
            "apiserver_down_s": round(restarted[0].seconds, 1),
            "first_answer_after_ready_s": first_answer_after(proxy.since(mark), restarted[0].ended),
            "gpudrv_noticed": done.stdout.count("waiting for the cluster"),
        },
    )


def test_etcd_paused_for_ten_seconds_in_the_middle_of_an_upgrade(faulty: Faulty) -> None:
    """etcd stops (SIGSTOP) for 10 s right after the node is cordoned: gpudrv's next requests stall at
    the API server until etcd is back, and the upgrade goes on, each step once."""
    lab, proxy = faulty.lab, faulty.proxy
    merged_upgrade(lab, min_available=3)
    paused: list[faults.Outage] = []
    began = threading.Event()

    def pause_after_cordon(exchange: Exchange) -> None:
        labels = ((exchange.node_patch(NODE) or {}).get("metadata") or {}).get("labels") or {}
        if exchange.ok and labels.get(STATE_LABEL) == "pod-deletion-required" and not began.is_set():
            began.set()
            threading.Thread(target=lambda: paused.append(faults.pause_etcd(10)), daemon=True).start()

    proxy.after = pause_after_cordon
    mark = proxy.mark()
    done = faulty.apply()
    proxy.after = None
    assert done.returncode == 0, done.stdout
    assert began.is_set() and paused, done.stdout
    Writes.of(proxy.since(mark)).assert_each_step_once()
    assert_left_clean(lab)
    pause = paused[0]
    during = [e for e in proxy.since(mark) if pause.began <= e.at <= pause.ended]
    waits = [e.waited for e in during if e.waited is not None]
    report(
        "etcd-paused-10s-mid-upgrade",
        {
            "paused_s": round(pause.seconds, 1),
            "requests_sent_during_pause": len(during),
            "longest_wait_for_an_answer_s": round(max(waits), 1) if waits else None,
            "answered_5xx_or_none": sum(1 for e in during if not e.status or e.status >= 500),
            "gpudrv_noticed": done.stdout.count("waiting for the cluster"),
        },
    )


def test_the_faults_leave_the_control_plane_whole(kube: Kube) -> None:
    """After restarts and pauses the cluster is still what scripts/cluster started: every component
    healthy (the restarted API server recorded in state.json)."""
    result = subprocess.run(
        [str(Path(__file__).resolve().parents[2] / "scripts" / "cluster"), "status"],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
