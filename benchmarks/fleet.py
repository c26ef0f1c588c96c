#!/usr/bin/env python3
"""Benchmark gpudrv's live commands on a fleet of fake GPU nodes, beside the raw fetch and kubectl+jq.

    apt-get install -y jq curl                    # the raw fetch and the kubectl+jq columns use them
    .venv/bin/python benchmarks/fleet.py [--nodes 1000,5000,10000] [--runs 5] [--loop-at 1000]
                                         [--forms] [--keep]

It starts a control plane of its own with scripts/cluster (state in $GPUDRV_CLUSTER_STATE, by default
~/.cache/gpudrv/state-bench, never the e2e tier's; without the TTL controller, which would rewrite
every node's annotation each time the fleet grows past 500, 1,000, 2,000 nodes) and stops it at the
end unless --keep. For each fleet size, smallest first, it creates the missing nodes (112 NFD/GFD
labels each and a kubelet's status with 25 images; parallel POSTs over keep-alive connections), then
runs every live command --runs times, interleaved, and prints the medians beside:

- raw: the very requests the command makes (tests/e2e/test_request_counts.py pins them), made by one
  curl with the kubeconfig's client certificate, bodies to /dev/null: the floor for any client;
- kubectl+jq: `kubectl get ... -o json | jq` doing the same job (kubectl asks for whole objects in
  chunks of 500, gzip-compressed);
- loop (at --loop-at nodes only, once): the lab's per-node script, one `kubectl get node` per GPU node.

Peak memory is the largest process of each command's tree (ru_maxrss of the reaped children). The
fixed cost is `gpudrv tag NODE`: interpreter, imports, kubeconfig, one small request.

The nodes carry no kwok annotation: kwok renewing 10,000 node leases every 10 s would be ~1,000 writes
a second on the 2-core machine. They are created as a node whose kubelet stopped posting status
(conditions Unknown, the unreachable NoSchedule taint), and the not-ready taint that admission adds
to every new node is patched away at once, so the node lifecycle controller has nothing to write.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "scripts" / "cluster"
GPUDRV = Path(sys.executable).with_name("gpudrv")
BENCH_LABEL = "gpudrv.dev/benchmark"
PREFIX = "bench-"
NAMESPACE = "bench"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
GPU_SELECTOR = "nvidia.com/gpu.present=true"

# --- the fleet -----------------------------------------------------------------------------------------

KERNELS = {
    ("ubuntu", "22.04"): ("5.15.0-119-generic", "5.15.0-122-generic", "5.15.0-125-generic"),
    ("ubuntu", "24.04"): ("6.8.0-45-generic", "6.8.0-52-generic"),
    ("rhel", "9.4"): ("5.14.0-427.13.1.el9_4.x86_64",),
}
DRIVERS = (("550", "90", "07"), ("550", "127", "05"), ("535", "183", "06"), ("570", "86", "15"))
GPUS = (
    ("NVIDIA-H100-80GB-HBM3", "hopper", "9", "0", "81559"),
    ("NVIDIA-A100-SXM4-80GB", "ampere", "8", "0", "81920"),
    ("NVIDIA-L40S", "ada-lovelace", "8", "9", "46068"),
)
CPU_FLAGS = (
    "ADX",
    "AESNI",
    "AVX",
    "AVX2",
    "AVX512BW",
    "AVX512CD",
    "AVX512DQ",
    "AVX512F",
    "AVX512VL",
    "AVX512VNNI",
    "CMPXCHG8",
    "FMA3",
    "FXSR",
    "FXSROPT",
    "GFNI",
    "HYPERVISOR",
    "IBPB",
    "LAHF",
    "MOVBE",
    "OSXSAVE",
    "SHA",
    "STIBP",
    "SYSCALL",
    "VAES",
    "VPCLMULQDQ",
    "X87",
    "XSAVE",
)
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d")


def node_name(index: int) -> str:
    return f"{PREFIX}{index:05d}"


def node_labels(index: int) -> dict[str, str]:
    """About 100 labels, as NFD, GPU Feature Discovery, the operator and the cloud put on a GPU node."""
    rng = random.Random(index)
    name = node_name(index)
    (os_id, version), kernels = rng.choice(list(KERNELS.items()))
    kernel = rng.choice(kernels)
    major, minor, rev = rng.choice(DRIVERS)
    product, family, cc_major, cc_minor, memory = rng.choice(GPUS)
    count = rng.choice(("4", "8"))
    zone = rng.choice(ZONES)
    nfd = "feature.node.kubernetes.io"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": f"p5.{int(count) * 6}xlarge",
        "node.kubernetes.io/instance-type": f"p5.{int(count) * 6}xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "node-role.kubernetes.io/gpu-worker": "",
        "nodepool.example.com/name": f"gpu-{family}-{zone[-1]}",
        BENCH_LABEL: "true",
        **{f"{nfd}/cpu-cpuid.{flag}": "true" for flag in CPU_FLAGS},
        f"{nfd}/cpu-cpuid.AMXFP16": "true" if index % 3 == 0 else "false",
        f"{nfd}/cpu-hardware_multithreading": "true",
        f"{nfd}/cpu-model.family": "6",
        f"{nfd}/cpu-model.id": "143",
        f"{nfd}/cpu-model.vendor_id": "Intel",
        f"{nfd}/cpu-cstate.enabled": "true",
        f"{nfd}/cpu-pstate.status": "active",
        f"{nfd}/cpu-pstate.scaling_governor": "performance",
        f"{nfd}/cpu-pstate.turbo": "true",
        f"{nfd}/cpu-rdt.RDTCMT": "true",
        f"{nfd}/cpu-rdt.RDTL3CA": "true",
        f"{nfd}/cpu-rdt.RDTMBA": "true",
        f"{nfd}/cpu-rdt.RDTMBM": "true",
        f"{nfd}/cpu-rdt.RDTMON": "true",
        f"{nfd}/kernel-config.NO_HZ": "true",
        f"{nfd}/kernel-config.NO_HZ_FULL": "true",
        f"{nfd}/kernel-version.full": kernel,
        f"{nfd}/kernel-version.major": kernel.split(".")[0],
        f"{nfd}/kernel-version.minor": kernel.split(".")[1],
        f"{nfd}/kernel-version.revision": kernel.split(".")[2].split("-")[0],
        f"{nfd}/memory-numa": "true",
        f"{nfd}/memory-nv.present": "true",
        f"{nfd}/network-sriov.capable": "true",
        f"{nfd}/pci-10de.present": "true",
        f"{nfd}/pci-10de.sriov.capable": "true",
        f"{nfd}/pci-1d0f.present": "true",
        f"{nfd}/rdma.available": "true",
        f"{nfd}/rdma.capable": "true",
        f"{nfd}/storage-nonrotationaldisk": "true",
        f"{nfd}/system-os_release.ID": os_id,
        f"{nfd}/system-os_release.VERSION_ID": version,
        f"{nfd}/system-os_release.VERSION_ID.major": version.split(".")[0],
        f"{nfd}/system-os_release.VERSION_ID.minor": version.split(".")[1],
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": count,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.memory": memory,
        "nvidia.com/gpu.compute.major": cc_major,
        "nvidia.com/gpu.compute.minor": cc_minor,
        "nvidia.com/gpu.machine": f"p5.{int(count) * 6}xlarge",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu-driver-upgrade-enabled": "true",
        "nvidia.com/mig.capable": "true" if family != "ada-lovelace" else "false",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.driver-version.full": f"{major}.{minor}.{rev}",
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "4",
        "nvidia.com/gfd.timestamp": str(1_735_000_000 + rng.randrange(10_000_000)),
        **{
            f"nvidia.com/gpu.deploy.{part}": "true"
            for part in (
                "container-toolkit",
                "dcgm",
                "dcgm-exporter",
                "device-plugin",
                "driver",
                "gpu-feature-discovery",
                "node-status-exporter",
                "operator-validator",
            )
        },
    }
    if index % 50 == 7:  # a few nodes are mid-upgrade
        labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-required"
    return labels


def node_document(index: int) -> dict[str, Any]:
    """A Node as a kubelet registers it: labels, addresses, capacity, conditions, node info, images."""
    labels = node_labels(index)
    name = node_name(index)
    gpus = labels["nvidia.com/gpu.count"]
    now = "2025-01-01T00:00:00Z"
    resources = {
        "cpu": "192",
        "memory": "2113638484Ki",
        "ephemeral-storage": "7499052Mi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "pods": "110",
        "nvidia.com/gpu": gpus,
        "vpc.amazonaws.com/efa": "32",
    }
    # A node whose kubelet stopped posting status, as the node lifecycle controller leaves it: Unknown
    # conditions and the unreachable NoSchedule taint. Created that way, the controller has nothing to
    # write (nothing renews these nodes' leases); created Ready, it would update 10,000 nodes at its
    # 20 requests a second for half an hour while the benchmark runs.
    unknown = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    conditions = [
        (kind, "Unknown", *unknown) for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    # The kubelet reports up to 50 images (--node-status-max-images); a GPU node runs the operator's.
    images = [
        {
            "names": [
                f"nvcr.io/nvidia/{image}@sha256:{(index * 131 + number):064x}",
                f"nvcr.io/nvidia/{image}",
            ],
            "sizeBytes": 100_000_000 + number * 7_654_321,
        }
        for number, image in enumerate(
            [
                f"driver:{labels['nvidia.com/cuda.driver-version.full']}-{labels[_KERNEL]}",
                "k8s-device-plugin:v0.17.0",
                "gpu-feature-discovery:v0.8.2",
                "dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
                "cloud-native/k8s-driver-manager:v0.7.0",
                "gpu-operator-validator:v24.9.1",
                "k8s/container-toolkit:v1.17.3-ubuntu20.04",
                "cloud-native/dcgm:3.3.9-1-ubuntu22.04",
                "node-feature-discovery:v0.16.6",
                "cuda:12.4.1-base-ubuntu22.04",
                *(f"pytorch:24.{month:02d}-py3" for month in range(1, 13)),
                *(f"tritonserver:24.{month:02d}-py3" for month in range(1, 9)),
            ]
        )
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nfd.node.kubernetes.io/feature-labels": ",".join(
                    key.split("/", 1)[1] for key in labels if key.startswith("feature.node")
                )[:2000],
            },
        },
        "spec": {
            "providerID": f"aws:///{labels['topology.kubernetes.io/zone']}/i-{index:017x}",
            "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now}],
        },
        "status": {
            "capacity": resources,
            "allocatable": {**resources, "cpu": "191450m", "memory": "2101007956Ki"},
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
                for kind, status, reason, message in conditions
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"ec2{index:029x}",
                "bootID": f"{index * 7919:032x}",
                "kernelVersion": labels[_KERNEL],
                "osImage": f"{labels[_OS_ID]} {labels[_OS_VERSION]}",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.31.4",
                "kubeProxyVersion": "v1.31.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


_KERNEL = "feature.node.kubernetes.io/kernel-version.full"
_OS_ID = "feature.node.kubernetes.io/system-os_release.ID"
_OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"


# --- the cluster, with the standard library only ------------------------------------------------------


@dataclass
class Cluster:
    """The API server of the kubeconfig scripts/cluster writes, with its client certificate."""

    kubeconfig: Path
    host: str
    port: int
    files: Path  # ca.crt, client.crt, client.key, for curl and for ssl

    @classmethod
    def load(cls, kubeconfig: Path, files: Path) -> Cluster:
        # scripts/cluster writes one cluster and one user with the certificates inline, as plain
        # `key: value` lines: no YAML library needed.
        values: dict[str, str] = {}
        for line in kubeconfig.read_text().splitlines():
            key, _, value = line.strip().lstrip("- ").partition(": ")
            values.setdefault(key, value.strip())
        files.mkdir(parents=True, exist_ok=True)
        for key, file in (
            ("certificate-authority-data", "ca.crt"),
            ("client-certificate-data", "client.crt"),
            ("client-key-data", "client.key"),
        ):
            (files / file).write_bytes(base64.b64decode(values[key]))
        (files / "client.key").chmod(0o600)
        url = urlparse(values["server"])
        return cls(kubeconfig, url.hostname or "127.0.0.1", url.port or 443, files)

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.port}"

    def connection(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(self.files / "ca.crt"))
        context.load_cert_chain(str(self.files / "client.crt"), str(self.files / "client.key"))
        return http.client.HTTPSConnection(self.host, self.port, context=context, timeout=120)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        conn: http.client.HTTPSConnection | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        own = conn is None
        conn = conn or self.connection()
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(
                method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
            )
            response = conn.getresponse()
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
        finally:
            if own:
                conn.close()

    def curl(self, requests: list[tuple[str, str]]) -> list[str]:
        """One curl for all of `requests` ((path, Accept) each), bodies to /dev/null."""
        command = ["curl", "-sS"]
        for number, (path, accept) in enumerate(requests):
            command += [
                *(["--next"] if number else []),
                "-o", "/dev/null",
                "--cacert", str(self.files / "ca.crt"),
                "--cert", str(self.files / "client.crt"),
                "--key", str(self.files / "client.key"),
                "-H", f"Accept: {accept}",
                f"{self.server}{path}",
            ]  # fmt: skip
        return command


def bench_nodes(cluster: Cluster) -> dict[str, str]:
    """Every benchmark node's name and resourceVersion."""
    status, body = cluster.call(
        "GET",
        f"/api/v1/nodes?{urlencode({'labelSelector': f'{BENCH_LABEL}=true'})}",
        headers={"Accept": METADATA_LIST},
    )
    if status != 200:
        raise RuntimeError(f"listing the benchmark nodes: HTTP {status}")
    return {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in body["items"] or []}


UNREACHABLE = [
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": "2025-01-01T00:00:00Z"}
]


def create_nodes(cluster: Cluster, count: int, workers: int = 8) -> float:
    """Creates the missing nodes of bench-00000 .. bench-<count-1>; returns the seconds it took."""
    have = {int(name[len(PREFIX) :]) for name in bench_nodes(cluster)}
    missing = [index for index in range(count) if index not in have]
    extra = sorted(index for index in have if index >= count)  # a smaller fleet after a larger one
    started = time.perf_counter()
    if extra:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda index: cluster.call("DELETE", f"/api/v1/nodes/{node_name(index)}"), extra))
    if not missing:
        return time.perf_counter() - started
    local = threading.local()
    done, lock = [0], threading.Lock()

    def send(
        method: str, path: str, body: Any, ok: tuple[int, ...], content_type: str = "application/json"
    ) -> None:
        for attempt in range(6):
            if getattr(local, "conn", None) is None:
                local.conn = cluster.connection()
            try:
                status, answer = cluster.call(method, path, body, local.conn, {"Content-Type": content_type})
            except (OSError, http.client.HTTPException):
                local.conn.close()
                local.conn = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if status in ok:
                return
            if status != 429 and status < 500:
                raise RuntimeError(f"{method} {path}: HTTP {status} {answer}")
            time.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"{method} {path}: no success after 6 tries")

    def create(index: int) -> None:
        send("POST", "/api/v1/nodes", node_document(index), (201, 409))
        # Admission gave the new node the not-ready taint; the lifecycle controller would swap it for
        # the unreachable one, one node at a time: say so now, in the same connection.
        patch = {"spec": {"taints": UNREACHABLE}}
        send("PATCH", f"/api/v1/nodes/{node_name(index)}", patch, (200,), "application/merge-patch+json")
        with lock:
            done[0] += 1
            if done[0] % 1000 == 0:
                log(f"  {done[0]}/{len(missing)} nodes created")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, missing))
    return time.perf_counter() - started


def settle(cluster: Cluster, quiet: float = 15.0, limit: float = 1800.0) -> float:
    """Waits until no benchmark node has changed for `quiet` seconds; returns the seconds waited."""
    started = time.perf_counter()
    before = bench_nodes(cluster)
    while time.perf_counter() - started < limit:
        time.sleep(quiet)
        now = bench_nodes(cluster)
        changed = sum(before.get(name) != version for name, version in now.items())
        if not changed:
            return time.perf_counter() - started
        log(f"  {changed} nodes changed in the last {quiet:.0f} s; waiting")
        before = now
    raise RuntimeError(f"the fleet did not settle in {limit:.0f} s")


def log(message: str) -> None:
    print(f"[fleet] {message}", file=sys.stderr, flush=True)


# --- the scene: a matrix, the fleet in git, a namespace with a budget and pods ---------------------------

MATRIX = "\n".join(
    [
        "driver_branch,kernel,os_tag",
        *(
            f"550,{kernel},{os_id}{version}"
            for (os_id, version), kernels in KERNELS.items()
            for kernel in kernels
        ),
        *(f"535,{kernel},ubuntu22.04" for kernel in KERNELS[("ubuntu", "22.04")]),
    ]
)
DECLARED = 20  # nodes the fleet in git declares (the rest are live GPU nodes git does not know: drift)
DECLARED_LABELS = (
    "kubernetes.io/hostname",
    "nvidia.com/gpu.present",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "feature.node.kubernetes.io/kernel-version.full",
    "feature.node.kubernetes.io/system-os_release.ID",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID",
)


def scene(cluster: Cluster, work: Path) -> None:
    """The matrix and the fleet in a git repository; the namespace with a budget and 5 pods."""
    (work / "jq").mkdir(parents=True, exist_ok=True)
    for name, program in JQ.items():
        (work / "jq" / f"{name}.jq").write_text(program)
    (work / "matrix").mkdir(parents=True, exist_ok=True)
    (work / "matrix" / "support-matrix.csv").write_text(MATRIX + "\n")
    nodes = work / "fleet" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    declared_json = []
    for index in range(DECLARED):
        # As the lab declares a node: the labels gpudrv manages, block YAML; the driver one minor ahead.
        live = node_labels(index)
        declared = {key: live[key] for key in DECLARED_LABELS}
        declared |= {"nvidia.com/cuda.driver.minor": "127", "nvidia.com/cuda.driver.rev": "05"}
        lines = ["apiVersion: v1", "kind: Node", "metadata:", f"  name: {node_name(index)}", "  labels:"]
        lines += [f'    {key}: "{value}"' for key, value in declared.items()]
        (nodes / f"{node_name(index)}.yaml").write_text("\n".join(lines) + "\n")
        declared_json.append(json.dumps({"metadata": {"name": node_name(index), "labels": declared}}))
    (work / "declared.json").write_text("\n".join(declared_json) + "\n")  # the same, for jq
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer", "namespace": NAMESPACE},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    (work / "fleet" / "budget.yaml").write_text(json.dumps(budget, indent=1) + "\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=work, check=True)
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fleet"], cwd=work, check=True)

    cluster.call(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    cluster.call("POST", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", budget)
    for index in range(5):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"trainer-{index}", "namespace": NAMESPACE, "labels": {"app": "trainer"}},
            "spec": {
                "nodeSelector": {
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/cuda.driver.major": "550",
                },
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}],
            },
        }
        cluster.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


# --- what each command does, three ways --------------------------------------------------------------

# jq programs doing each command's job on `kubectl get ... -o json` (written to files: no quoting).
JQ_TAG = r"""
def tag: .metadata.labels as $l
  | ($l["feature.node.kubernetes.io/system-os_release.VERSION_ID"]) as $v
  | ($l["feature.node.kubernetes.io/system-os_release.ID"]) as $os
  | "\($l["nvidia.com/cuda.driver.major"])-\($l["feature.node.kubernetes.io/kernel-version.full"])-\($os)\(
      if ($os | IN("rhel", "rocky", "ol")) then ($v | split(".")[0]) else $v end)";
def rows: $m | split("\n")[1:] | map(select(length > 0) | split(",") | join("-"));
def missing: tag as $t | select(rows | index($t) | not) | "\(.metadata.name) MISSING \($t)";
"""
JQ = {
    "tag": JQ_TAG + "missing",
    "audit": JQ_TAG + ".items[] | missing",
    "report": JQ_TAG
    + r"""rows as $rows
      | [.items[] | .metadata.labels["nvidia.com/gpu-driver-upgrade-state"] as $state
          | {name: .metadata.name, tag: tag, state: $state}]
      | {kind: "report", ok: true, node_count: length,
         missing_count: ([.[] | select(.tag as $t | $rows | index($t) | not)] | length),
         row_count: ($rows | length), nodes: map({node: .name, tag, upgrade_state: .state})}""",
    "status": JQ_TAG
    + r"""rows as $rows | .items[] | .metadata.labels as $l
      | [.metadata.name,
         ([$l["nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"]]
          | join(".")),
         tag, (tag as $t | $rows | index($t) != null),
         ($l["nvidia.com/gpu-driver-upgrade-state"] // "-"), (.spec.unschedulable // false | not)]
      | @tsv""",
    "diff": r"""($d | map({key: .metadata.name, value: .metadata.labels}) | from_entries) as $want
      | (.items | map({key: .metadata.name, value: .metadata.labels}) | from_entries) as $live
      | ($want | to_entries[] | .key as $n | .value | to_entries[] | select($live[$n][.key] != .value)
          | "\($n) \(.key): \($live[$n][.key]) -> \(.value)"),
        ($live | to_entries[] | select(.value["nvidia.com/gpu.present"] == "true" and ($want[.key] == null))
          | "\(.key) undeclared")""",
    "plan": r"""($d | map({key: .metadata.name, value: .metadata.labels}) | from_entries) as $want
      | .items[] | select($want[.metadata.name] != null) | .metadata.name as $n | .metadata.labels as $l
      | select(["nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"]
          | any($l[.] != $want[$n][.]))
      | "\($n): upgrade, cordoned=\(.spec.unschedulable // false)"
""",
    "explain": r"""[.items[] | {name: .metadata.name, labels: .metadata.labels}] as $nodes
      | $p[0].items[] | .metadata.name as $pod | (.spec.nodeSelector // {}) as $s
      | [$nodes[] | select(.labels as $l | $s | to_entries | all($l[.key] == .value)) | .name]
      | "\($pod): \(length) nodes admit it"
""",
}


@dataclass
class Command:
    """One live command: gpudrv's arguments, the requests it makes, and kubectl+jq doing its job."""

    name: str
    args: list[str]
    requests: list[tuple[str, str]]  # (path with query, Accept)
    kubectl: str  # a bash pipeline; $K is kubectl, $W the work folder


def path(base: str, **query: str) -> str:
    return f"{base}?{urlencode(query)}" if query else base


def commands(work: Path) -> list[Command]:
    matrix = str(work / "matrix" / "support-matrix.csv")
    fleet = str(work / "fleet")
    json_ = "application/json"
    resources = [
        (path("/apis/nvidia.com/v1/clusterpolicies", limit="500"), json_),
        (path("/apis/nvidia.com/v1alpha1/nvidiadrivers", limit="500"), json_),
    ]
    gpu = [(path("/api/v1/nodes", labelSelector=GPU_SELECTOR), METADATA_LIST)]
    live = [
        (
            path("/api/v1/nodes", labelSelector=GPU_SELECTOR, fieldSelector="spec.unschedulable=true"),
            METADATA_LIST,
        ),
        *gpu,
    ]
    budgets = [("/apis/policy/v1/poddisruptionbudgets", json_)]
    pods = [("/api/v1/pods", json_)]
    operator = [
        (
            path(
                "/apis/apps/v1/deployments",
                labelSelector="app.kubernetes.io/component=gpu-operator",
                limit="500",
            ),
            json_,
        )
    ]
    declared = "--slurpfile d $W/declared.json"
    m = f"--rawfile m {matrix}"
    gpu_nodes = f"$K get nodes -l {GPU_SELECTOR} -o json"
    pdbs_pods = "$K get pdb -A -o json > /dev/null; $K get pods -A -o json > /dev/null"
    jq = {name: f"jq -r -f $W/jq/{name}.jq" for name in JQ}
    return [
        Command(
            "audit",
            ["audit", "--matrix", matrix, "-o", "text"],
            [*resources, *gpu],
            f"{gpu_nodes} | {jq['audit']} {m}",
        ),
        Command(
            "status",
            ["status", "--matrix", matrix],
            [*resources, *live, *budgets, *pods],
            f"{pdbs_pods}; {gpu_nodes} | {jq['status']} {m}",
        ),
        Command(
            "report", ["report", "--matrix", matrix], [*resources, *gpu], f"{gpu_nodes} | {jq['report']} {m}"
        ),
        Command(
            "diff",
            ["diff", "--from", fleet, "-o", "text"],
            [
                (f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", json_),
                *resources,
                ("/api/v1/nodes", METADATA_LIST),
            ],
            f"$K get pdb -n {NAMESPACE} -o json > /dev/null; $K get nodes -o json | {jq['diff']} {declared}",
        ),
        Command(
            "plan",
            ["plan", "--from", fleet, "--matrix", matrix],
            [*operator, *live, *pods, *budgets],
            f"{pdbs_pods}; {gpu_nodes} | {jq['plan']} {declared}",
        ),
        Command(
            "explain",
            ["explain", "-n", NAMESPACE, "-o", "text"],
            [(f"/api/v1/namespaces/{NAMESPACE}/pods", json_), ("/api/v1/nodes", METADATA_LIST)],
            f"$K get nodes -o json | {jq['explain']} --slurpfile p <($K get pods -n {NAMESPACE} -o json)",
        ),
    ]


# The lab's script: one kubectl per GPU node, its tag, the audit's verdict.
LOOP = (
    f'for n in $($K get nodes -l {GPU_SELECTOR} -o name); do $K get "$n" -o json; done'
    ' | jq -r -f "$W/jq/tag.jq" --rawfile m "$W/matrix/support-matrix.csv"'
)

# Runs one command with its output discarded: wall seconds, the peak RSS (KiB) of its largest process,
# and the CPU seconds of the whole tree (what the load of a shared machine does not add to).
WRAPPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=False)
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(seconds, peak MiB, CPU seconds) of `argv` in a fresh wrapper process."""
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv], env=env, cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024, float(out[2])


@dataclass
class Figures:
    times: dict[str, list[float]] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, seconds: float, peak: float, cpu: float) -> None:
        self.times.setdefault(key, []).append(seconds)
        self.peaks[key] = max(self.peaks.get(key, 0.0), peak)
        self.cpu.setdefault(key, []).append(cpu)

    def median(self, key: str) -> float:
        return statistics.median(self.times[key])

    def median_cpu(self, key: str) -> float:
        return statistics.median(self.cpu[key])


def measure(
    cluster: Cluster,
    work: Path,
    kubectl: Path,
    env: dict[str, str],
    runs: int,
    *,
    loop: bool,
    before: Path | None,
) -> Figures:
    figures = Figures()
    # Another gpudrv's source tree (--before), run by this interpreter: the same commands, for comparison.
    old = [sys.executable, "-m", "reconciler"]
    old_env = {**env, "PYTHONPATH": str(before)}
    bash_env = {**env, "K": str(kubectl), "W": str(work)}
    for run in range(runs):
        # The fixed cost: interpreter, imports, kubeconfig, one small request.
        figures.add("fixed", *timed([str(GPUDRV), "tag", node_name(0)], env, work))
        if before is not None:
            figures.add("fixed/before", *timed([*old, "tag", node_name(0)], old_env, work))
        for command in commands(work):
            figures.add(f"{command.name}/gpudrv", *timed([str(GPUDRV), *command.args], env, work))
            if before is not None:
                figures.add(f"{command.name}/before", *timed([*old, *command.args], old_env, work))
            figures.add(f"{command.name}/raw", *timed(cluster.curl(command.requests), env, work))
            figures.add(f"{command.name}/kubectl", *timed(["bash", "-c", command.kubectl], bash_env, work))
        log(f"  run {run + 1}/{runs} done")
    if loop:
        log("  the per-node loop (one kubectl get node per GPU node)")
        figures.add("loop", *timed(["bash", "-c", LOOP], bash_env, work))
    return figures


def table(size: int, figures: Figures) -> list[str]:
    lines = [
        f"{size:,} nodes        gpudrv s  CPU s  raw s  x raw  kubectl+jq s  kubectl/gpudrv"
        + ("  loop s  loop/gpudrv" if "loop" in figures.times else "")
        + "  gpudrv MiB  kubectl+jq MiB"
    ]
    for command in ("audit", "status", "report", "diff", "plan", "explain"):
        ours, raw, kubectl = (figures.median(f"{command}/{kind}") for kind in ("gpudrv", "raw", "kubectl"))
        loop = (
            f"  {figures.median('loop'):6.1f}  {figures.median('loop') / ours:11.0f}x"
            if "loop" in figures.times
            else ""
        )
        peaks = f"{figures.peaks[f'{command}/gpudrv']:10.0f}  {figures.peaks[f'{command}/kubectl']:14.0f}"
        ratios = f"{ours / raw:5.2f}  {kubectl:12.2f}  {kubectl / ours:13.1f}x"
        cpu = figures.median_cpu(f"{command}/gpudrv")
        lines.append(f"  {command:<16}{ours:8.2f} {cpu:6.2f} {raw:6.2f} {ratios}{loop}  {peaks}")
    fixed, cpu, peak = figures.median("fixed"), figures.median_cpu("fixed"), figures.peaks["fixed"]
    lines.append(f"  fixed cost (gpudrv tag NODE): {fixed:.2f} s ({cpu:.2f} s CPU), {peak:.0f} MiB")
    if "fixed/before" in figures.times:
        lines.append("  --before        s    MiB  before/now")
        for key in ("fixed", "audit", "status", "report", "diff", "plan", "explain"):
            now, then = (key, f"{key}/before") if key == "fixed" else (f"{key}/gpudrv", f"{key}/before")
            ratio = figures.median(then) / figures.median(now)
            lines.append(
                f"    {key:<10}{figures.median(then):6.2f} {figures.peaks[then]:6.0f} {ratio:10.1f}x"
            )
    return lines


# --- request forms: what the API server costs for each way of asking for the GPU nodes -------------------


def fetch_all(cluster: Cluster, base: str, query: dict[str, str], accept: str, gzip: bool) -> tuple[int, int]:
    """Every page of a list, bytes only, no parsing: (requests, bytes on the wire)."""
    conn = cluster.connection()
    token, requests, size = "", 0, 0
    headers = {"Accept": accept, **({"Accept-Encoding": "gzip"} if gzip else {})}
    try:
        while True:
            conn.request(
                "GET", path(base, **query, **({"continue": token} if token else {})), headers=headers
            )
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"{base} {query}: HTTP {response.status} {body[:200]!r}")
            requests, size = requests + 1, size + len(body)
            if response.getheader("Content-Encoding") == "gzip":
                import gzip as gz

                body = gz.decompress(body)
            head = body[:4096].decode(errors="replace")  # the list's metadata comes before its items
            marker = '"continue":"'
            token = head.split(marker, 1)[1].split('"', 1)[0] if marker in head else ""
            if not token:
                return requests, size
    finally:
        conn.close()


FORMS: list[tuple[str, str, dict[str, str], bool]] = [
    ("metadata, limit 500 (gpudrv before)", METADATA_LIST, {"limit": "500"}, False),
    ("metadata, limit 5000", METADATA_LIST, {"limit": "5000"}, False),
    ("metadata, one request (gpudrv now)", METADATA_LIST, {}, False),
    ("metadata, one request, resourceVersion=0", METADATA_LIST, {"resourceVersion": "0"}, False),
    (
        "metadata, limit 500, resourceVersion=0",
        METADATA_LIST,
        {"limit": "500", "resourceVersion": "0"},
        False,
    ),
    (
        "metadata, limit 500, rv=0, match=NotOlderThan",
        METADATA_LIST,
        {"limit": "500", "resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"},
        False,
    ),
    ("metadata, one request, gzip", METADATA_LIST, {}, True),
    ("full objects, limit 500", "application/json", {"limit": "500"}, False),
    ("full objects, one request", "application/json", {}, False),
    ("full objects, limit 500, gzip (kubectl)", "application/json", {"limit": "500"}, True),
    (
        "metadata, cordoned only (fieldSelector)",
        METADATA_LIST,
        {"fieldSelector": "spec.unschedulable=true"},
        False,
    ),
]


def forms(cluster: Cluster, size: int, runs: int) -> list[str]:
    """Each form of the GPU node list, `runs` times in turn (interleaved: load drifts hit all alike)."""
    times: dict[str, list[float]] = {name: [] for name, *_ in FORMS}
    sizes: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        for name, accept, query, gzip in FORMS:
            started = time.perf_counter()
            sizes[name] = fetch_all(
                cluster, "/api/v1/nodes", {"labelSelector": GPU_SELECTOR, **query}, accept, gzip
            )
            times[name].append(time.perf_counter() - started)
    lines = [f"{size:,} GPU nodes, one list                   requests   MiB sent   median s"]
    for name, *_ in FORMS:
        requests, sent = sizes[name]
        lines.append(
            f"  {name:<45} {requests:>4} {sent / 2**20:10.1f} {statistics.median(times[name]):10.3f}"
        )
    return lines


# --- main ------------------------------------------------------------------------------------------------


def cluster_up(env: dict[str, str]) -> tuple[Path, Path, bool]:
    """(kubeconfig, kubectl, was it running already)."""
    running = (
        subprocess.run([str(CLUSTER), "status"], env=env, capture_output=True, check=False).returncode == 0
    )
    up = subprocess.run([str(CLUSTER), "up"], env=env, capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise SystemExit(f"scripts/cluster up failed:\n{up.stderr[-2000:]}")
    bins = subprocess.run([str(CLUSTER), "build"], env=env, capture_output=True, text=True, check=True)
    return Path(up.stdout.split()[-1]), Path(bins.stdout.split()[-1]) / "kubectl", running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,5000,10000", help="fleet sizes, smallest first")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command per size (medians)")
    parser.add_argument(
        "--loop-at", type=int, default=1000, help="the fleet size for the per-node loop (0: none)"
    )
    parser.add_argument("--forms", action="store_true", help="also time each form of the node list request")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and its nodes running")
    parser.add_argument(
        "--work", type=Path, help="keep the matrix, the fleet in git and the jq programs here"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="also time the gpudrv in this source tree, e.g. git archive BASE | tar -x -C DIR",
    )
    args = parser.parse_args()
    missing = [tool for tool in ("curl", "jq", "git") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"needs {', '.join(missing)}: apt-get install -y {' '.join(missing)}")
    if not GPUDRV.exists():
        raise SystemExit(f"no gpudrv beside {sys.executable}: pip install -e . in this venv")

    state = os.environ.get("GPUDRV_CLUSTER_STATE") or str(Path.home() / ".cache" / "gpudrv" / "state-bench")
    env = {**os.environ, "GPUDRV_CLUSTER_STATE": state, "GPUDRV_CLUSTER_CONTROLLERS": "*,-ttl-controller"}
    env.pop("GPUDRV_CLUSTER_AUDIT", None)
    log(f"control plane in {state}")
    kubeconfig, kubectl, was_running = cluster_up(env)
    env = {**env, "KUBECONFIG": str(kubeconfig)}
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    report: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpudrv-fleet-") as folder:
        work = args.work or Path(folder)
        if work.exists() and args.work:
            shutil.rmtree(work)
        cluster = Cluster.load(kubeconfig, work / "certs")
        scene(cluster, work)
        try:
            for size in sorted(int(part) for part in args.nodes.split(",")):
                log(f"{size:,} nodes: creating the missing ones")
                created = create_nodes(cluster, size)
                log(f"  created in {created:.0f} s; settled after {settle(cluster):.0f} s more")
                if args.forms:
                    report += [*forms(cluster, size, args.runs), ""]
                    print("\n".join(report[-len(FORMS) - 2 :]), flush=True)
                figures = measure(
                    cluster, work, kubectl, env, args.runs, loop=size == args.loop_at, before=args.before
                )
                report += [*table(size, figures), ""]
                print("\n".join(table(size, figures)), flush=True)
        finally:
            if not args.keep and not was_running:
                subprocess.run([str(CLUSTER), "down"], env=env, capture_output=True, check=False)
    machine = f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    print(f"\n# {args.runs} runs each, medians; {machine}\n" + "\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
