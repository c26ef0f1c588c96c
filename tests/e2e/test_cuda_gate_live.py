"""The CUDA gate live: GPU pods in the cluster whose images (in a real registry, pushed with crane) carry
NVIDIA's NVIDIA_REQUIRE_CUDA, and a plan that would move their node to a driver they cannot run on.

The registry is tests/registry's (distribution v3 with TLS and token auth); the pods are bound to a
kwok node of this test, which starts on driver 570.86.10 (CUDA 12.8).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import gpudrv_command, gpudrv_env
from tests.e2e.conftest import TEST_LABEL, FakeNodes, Kube
from tests.registry import harness

KERNEL = "5.15.0-119-generic"
# NVIDIA's CUDA 12.8.1 base image (gitlab.com/nvidia/container-images/cuda dist/12.8.1/ubuntu2204/base/
# Dockerfile:7@7ad4b0af), with 4 of its 24 brand alternatives: 470 and 535 are forward-compatible
# branches for it, so a driver of either passes only on a board of such a brand.
REQUIRE_128 = (
    "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 "
    "brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536"
)
REQUIRE_122 = "cuda>=12.2 brand=tesla,driver>=470,driver<471"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Registry]:
    found = harness.Registry(harness.ensure_built(), tmp_path_factory.mktemp("registry"), "token")
    found.prepare()
    found.start()
    try:
        found.push(["base"], content="a CUDA workload")
        for tag, require, cuda in (
            ("cuda-12.8", REQUIRE_128, "12.8.1"),
            ("cuda-12.2", REQUIRE_122, "12.2.2"),
            ("cuda-12.9", "cuda>=12.9", "12.9.1"),
        ):
            found.crane(
                "mutate",
                f"{found.repository}:base",
                "--env",
                f"NVIDIA_REQUIRE_CUDA={require}",
                "--env",
                f"CUDA_VERSION={cuda}",
                "--tag",
                f"{found.repository}:{tag}",
            )
        yield found
    finally:
        found.stop()


def gpu_labels(major: str, minor: str, rev: str) -> dict[str, str]:
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "feature.node.kubernetes.io/kernel-version.full": KERNEL,
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
    }


def fleet(root: Path, node: str, driver: tuple[str, str, str]) -> Path:
    """A fleet repository declaring `node` on `driver`, with that driver's image row on main."""
    root.mkdir()
    (root / "clusters" / "gpu" / "nodes").mkdir(parents=True)
    labels = "".join(f'    {key}: "{value}"\n' for key, value in gpu_labels(*driver).items())
    node_yaml = f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n  labels:\n{labels}"
    (root / "clusters" / "gpu" / "nodes" / f"{node}.yaml").write_text(node_yaml)
    (root / "matrix").mkdir()
    (root / "matrix" / "support-matrix.csv").write_text(
        f"driver_branch,kernel,os_tag\n{driver[0]},{KERNEL},ubuntu22.04\n"
    )
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "fleet"]):
        subprocess.run(["git", *command], cwd=root, check=True, env=_git_env())
    return root


def _git_env() -> dict[str, str]:
    names = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return gpudrv_env(names)


def gpu_pod(namespace: str, name: str, node: str, image: str) -> str:
    """A Deployment's pod bound to `node` (a controller: the drain gates have nothing to say; kwok keeps
    it Running, where it completes a Job's at once) asking for a GPU."""
    container = {"name": "cuda", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeName": node, "containers": [container]},
            },
        },
    }
    return json.dumps(deployment)


@dataclass
class Site:
    """One test's cluster side (its namespace and node) and the registry."""

    kube: Kube
    namespace: str
    node: str
    registry: harness.Registry
    nodes: FakeNodes

    def image(self, tag: str) -> str:
        return f"{self.registry.repository}:{tag}"

    def run_pod(self, name: str, tag: str) -> str:
        self.kube.apply(gpu_pod(self.namespace, name, self.node, self.image(tag)))
        return self.image(tag)

    def running(self) -> int:
        pods = self.kube.get("pods", "-n", self.namespace)["items"]
        return sum(pod["status"].get("phase") == "Running" for pod in pods)

    def gpudrv(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return gpudrv(self.kube, self.registry, cwd, *args)


@pytest.fixture
def site(kube: Kube, nodes: FakeNodes, namespace: str, unique: str, registry: harness.Registry) -> Site:
    """A GPU node of this test on driver 570.86.10, and a namespace for its pods."""
    node = nodes.add_gpu(f"{unique}-gpu", gpu_labels("570", "86", "10"))
    return Site(kube, namespace, node, registry, nodes)


def gpudrv(kube: Kube, registry: harness.Registry, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = gpudrv_env({**kube.env, **registry.env()})
    return subprocess.run(
        [*gpudrv_command(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_plan_refuses_a_downgrade_that_breaks_a_running_cuda_job(site: Site, tmp_path: Path) -> None:
    image_128 = site.run_pod("train-128", "cuda-12.8")
    site.run_pod("train-122", "cuda-12.2")
    site.kube.wait_for("both GPU pods Running", lambda: site.running() == 2)

    down = fleet(tmp_path / "down", site.node, ("535", "161", "08"))
    plan = site.gpudrv(down, "plan", "--from", "clusters/gpu")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    blocked = [line for line in plan.stdout.splitlines() if "[blocked] cuda:" in line]
    assert len(blocked) == 1, plan.stdout
    assert f"pod {site.namespace}/train-128-" in blocked[0] and f"image {image_128}" in blocked[0]
    assert "needs NVIDIA_REQUIRE_CUDA cuda>=12.8 (or 4 alternatives)" in blocked[0]
    assert "driver 535.161.08 (CUDA 12.2, data/driver-cuda.json)" in blocked[0]
    assert "unsatisfied condition: cuda>=12.8 (cuda=12.2)" in blocked[0]
    assert "train-122" not in blocked[0]  # its requirement, cuda>=12.2, holds on 535

    data = json.loads(site.gpudrv(down, "plan", "--from", "clusters/gpu", "-o", "json").stdout)
    (only,) = [item for item in data["nodes"] if item["node"] == site.node]
    gate = next(gate for gate in only["gates"] if gate["name"] == "cuda")
    assert gate["ok"] is False and image_128 in gate["detail"]

    refused = site.gpudrv(down, "apply", "--from", "clusters/gpu")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{site.node}: blocked" in refused.stdout and "cuda>=12.8" in refused.stdout
    assert not site.kube.get("node", site.node)["spec"].get("unschedulable"), "a refused node was cordoned"

    # Offline, an image the NGC table does not know is not verified: refused (fail closed) ...
    offline = site.gpudrv(down, "plan", "--from", "clusters/gpu", "--registry-images", "off")
    assert offline.returncode == 1, offline.stdout
    unread = f"image {image_128} (not read: --registry-images off; not in data/cuda-compat.json either)"
    assert "[blocked] cuda: not verified (pass --allow-unverified-images to let it through)" in offline.stdout
    assert unread in offline.stdout
    # ... unless the user says so, and the plan names what it let through.
    allowed = site.gpudrv(
        down, "plan", "--from", "clusters/gpu", "--registry-images", "off", "--allow-unverified-images"
    )
    assert allowed.returncode == 0, allowed.stdout
    assert "[note] cuda: 0 GPU pod images accept driver 535.161.08" in allowed.stdout
    let_through = f"; not verified, let through by --allow-unverified-images: pod {site.namespace}/train-"
    assert let_through in allowed.stdout and unread in allowed.stdout


def test_plan_passes_an_upgrade_the_images_accept(site: Site, tmp_path: Path) -> None:
    site.run_pod("train", "cuda-12.8")
    site.kube.wait_for("the GPU pod Running", lambda: site.running() == 1)
    up = fleet(tmp_path / "up", site.node, ("575", "51", "03"))
    plan = site.gpudrv(up, "plan", "--from", "clusters/gpu")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    accepted = "[ok] cuda: 1 GPU pod image accepts driver 575.51.03 (CUDA 12.9, data/driver-cuda.json)"
    assert accepted in plan.stdout

    # An image whose config cannot be read (here: no such tag) refuses the change (fail closed),
    # naming the image and why; --allow-unverified-images lets it through, named in the plan.
    missing = site.run_pod("ghost", "no-such-tag")
    site.kube.wait_for("two GPU pods Running", lambda: site.running() == 2)
    refused = site.gpudrv(up, "plan", "--from", "clusters/gpu")
    assert refused.returncode == 1, refused.stdout
    closed = "[blocked] cuda: not verified (pass --allow-unverified-images to let it through): "
    assert f"{closed}pod {site.namespace}/ghost-" in refused.stdout
    assert f"image {missing} (config not read:" in refused.stdout
    applied = site.gpudrv(up, "apply", "--from", "clusters/gpu", "--dry-run")
    assert applied.returncode == 1 and "not verified" in applied.stdout, applied.stdout
    noted = site.gpudrv(up, "plan", "--from", "clusters/gpu", "--allow-unverified-images")
    assert noted.returncode == 0, noted.stdout
    assert (
        f"not verified, let through by --allow-unverified-images: pod {site.namespace}/ghost-" in noted.stdout
    )


POLICY = """apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  driver: {enabled: true, usePrecompiled: true, repository: nvcr.io/nvidia, image: driver, version: "535"}
"""


def test_operator_plan_refuses_moving_a_node_below_its_jobs(site: Site, tmp_path: Path) -> None:
    """A ClusterPolicy that moves the node from 570 to 535: the CUDA version comes from another live
    node that runs 535 and shows it (GFD's label), not from the table."""
    shown = {"nvidia.com/cuda.driver-version.major": "535", "nvidia.com/cuda.runtime-version.full": "12.2"}
    other = site.nodes.add_gpu(f"{site.node}-535", {**gpu_labels("535", "161", "08"), **shown})
    image = site.run_pod("train", "cuda-12.8")
    site.kube.wait_for("the GPU pod Running", lambda: site.running() == 1)
    root = tmp_path / "operator"
    (root / "clusters" / "gpu").mkdir(parents=True)
    (root / "clusters" / "gpu" / "cluster-policy.yaml").write_text(POLICY)
    (root / "matrix").mkdir()
    (root / "matrix" / "support-matrix.csv").write_text(
        f"driver_branch,kernel,os_tag\n535,{KERNEL},ubuntu22.04\n"
    )
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "fleet"]):
        subprocess.run(["git", *command], cwd=root, check=True, env=_git_env())
    scope = f"{TEST_LABEL}={site.nodes.id}"
    plan = site.gpudrv(root, "plan", "--from", "clusters/gpu", "--operator-version", "v26.7.0", "-l", scope)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    blocked = [line for line in plan.stdout.splitlines() if "[blocked] cuda:" in line]
    assert len(blocked) == 1, plan.stdout
    assert f"pod {site.namespace}/train-" in blocked[0]
    assert f"image {image} needs NVIDIA_REQUIRE_CUDA cuda>=12.8" in blocked[0]
    assert f"driver 535 (CUDA 12.2, shown by {other}'s nvidia.com/cuda.runtime-version.full)" in blocked[0]
    explained = site.gpudrv(root, "explain", "-n", site.namespace, "-l", scope)
    assert explained.returncode == 1, explained.stdout + explained.stderr
    errors = [line for line in explained.stdout.splitlines() if line.strip().startswith("error:")]
    assert len(errors) == 1, explained.stdout
    assert f"{image} needs NVIDIA_REQUIRE_CUDA cuda>=12.8" in errors[0]
    assert "driver 535.161.08 (CUDA 12.2, its nvidia.com/cuda.runtime-version.full)" in errors[0]
    assert errors[0].endswith(f"on {other}")


CRDS = Path(__file__).parent / "manifests" / "gpu-operator-crds.yaml"
POOL = "e2e.gpudrv.dev/pool"


def workloads_section(page: str) -> str:
    """The fleet page's CUDA workloads section as text: its tags dropped, its spaces folded."""
    section = page[page.index('<section id="workloads">') : page.index('<section id="nodes">')]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section)))


def test_fleet_page_shows_the_pods_an_nvidiadriver_move_would_break(site: Site, tmp_path: Path) -> None:
    """The fleet page live on a GPU Operator fleet: an NVIDIADriver that moves this test's node from 570
    to 535, a GPU pod whose image already needs more than 570 gives (CUDA 12.9), and one that runs on
    both. The page judges each pod's image now and after the move, from the registry's configs."""
    site.kube.run("apply", "-f", str(CRDS))
    site.kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    site.kube.run("label", "node", site.node, f"{POOL}={site.node}")
    driver = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": site.node},
        "spec": {
            "usePrecompiled": True,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": "535",
            "nodeSelector": {POOL: site.node},
        },
    }
    site.kube.apply(json.dumps(driver))
    try:
        newer = site.run_pod("newer", "cuda-12.9")
        older = site.run_pod("older", "cuda-12.2")
        site.kube.wait_for("both GPU pods Running", lambda: site.running() == 2)
        root = fleet(tmp_path / "page", site.node, ("535", "161", "08"))  # the matrix has 535's image
        scope = ("-l", f"{TEST_LABEL}={site.nodes.id}", "--operator-version", "v26.7.0")
        page = site.gpudrv(root, "report", "-o", "html", *scope)
        offline = site.gpudrv(root, "report", "-o", "html", "--registry-images", "off", *scope)
    finally:
        site.kube.run("delete", "nvidiadriver", site.node, "--ignore-not-found", "--wait=true", check=False)
    assert (page.returncode, page.stderr) == (0, ""), page.stderr
    text = workloads_section(page.stdout)
    assert "2 GPU pods whose image breaks on the driver" in text  # newer now, and newer after the move
    assert "0 that gpudrv cannot confirm 0 not checked 2 accepted" in text  # older, now and after
    rows = re.findall(
        r"<tr class=\"(\w+)\"><td[^>]*>.*?</td><td class=\"mono\">([^<]*)</td><td>(.*?)</td>", page.stdout
    )
    breaking = [(image, re.sub(r"<[^>]+>", "", where)) for state, image, where in rows if state == "breaks"]
    assert (newer, "now: driver 570.86.10 (CUDA 12.8, data/driver-cuda.json)") in breaking
    assert (newer, "after the move to 535: driver 535 (CUDA 12.2, data/driver-cuda.json)") in breaking
    assert f"{site.namespace}/newer-" in text and "unsatisfied condition: cuda>=12.9" in text
    accepted = {(image, re.sub(r"<[^>]+>", "", where)[:5]) for state, image, where in rows if state == "ok"}
    assert accepted == {(older, "now: "), (older, "after")}

    assert offline.returncode == 0, offline.stderr
    unread = workloads_section(offline.stdout)
    assert "0 GPU pods whose image breaks" in unread and "4 not checked" in unread
    assert "not read: --registry-images off" in unread
