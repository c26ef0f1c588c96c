"""What `gpudrv init` puts in a new fleet repository, as plain data: the pin of the gpudrv it uses, the
Node manifests and driver resources of the fleet, and the support matrix's rows.

An example fleet is one GPU node (ubuntu 22.04, kernel 5.15.0-119-generic, driver 550) under an
NVIDIADriver for its OS, with the ClusterPolicy handing the driver to NVIDIADrivers
(`useNvidiaDriverCRD: true`): each NVIDIADriver computes its pool's os tag from its own nodes, so a
second OS is a second NVIDIADriver, never the ClusterPolicy's mixed-OS trap (docs/operator-contract.md).
From a live cluster the fleet is what runs there: its GPU nodes, the driver resources in force, and a
row for every image those nodes run (what runs is, by definition, built).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.core.contract.driver_images import Want
from reconciler.core.contract.operator import API_VERSIONS, OS_VERSION_MAJOR, Contract, DriverResource, Kind
from reconciler.core.images import tags
from reconciler.core.images.tags import ImageKey, Node

MATRIX_HEADER = "driver_branch,kernel,os_tag"
# Strings gpudrv writes unquoted in YAML: plain words no YAML 1.1 reader takes for a boolean or null.
PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9._/-]*$")
YAML_11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # a cluster's folder: a DNS label, like prod
PIN_PATTERN = re.compile(r"^(?P<repository>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<commit>[0-9a-f]{40})$")

# The labels gpudrv reads on a node (its image tag, its driver version, the operator's pool label).
GPUDRV_LABELS = (
    tags.GPU_PRESENT,
    tags.DRIVER_MAJOR,
    tags.DRIVER_MINOR,
    tags.DRIVER_REV,
    tags.KERNEL,
    tags.OS_ID,
    tags.OS_VERSION_ID,
    OS_VERSION_MAJOR,
)


@dataclass(frozen=True)
class Pin:
    """The gpudrv a fleet repository runs: its GitHub repository, the commit, and that commit's version."""

    repository: str
    commit: str
    version: str

    @property
    def action(self) -> str:
        return f"{self.repository}@{self.commit}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repository}"


def parse_pin(text: str, version: str) -> Pin | None:
    """`OWNER/NAME@COMMIT` (a full 40-digit commit SHA) as a Pin, or None."""
    found = PIN_PATTERN.match(text)
    return Pin(found["repository"], found["commit"], version) if found else None


# --- the fleet --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One manifest file of the fleet: its path under the cluster's folder, a comment, the document."""

    path: str
    comment: str
    document: Mapping[str, Any]


@dataclass(frozen=True)
class Fleet:
    documents: tuple[Document, ...]
    rows: tuple[ImageKey, ...]
    operator_version: str | None = None  # the release whose os-tag rule applies, when known


EXAMPLE_LABELS = {
    tags.GPU_PRESENT: "true",
    tags.DRIVER_MAJOR: "550",
    tags.DRIVER_MINOR: "90",
    tags.DRIVER_REV: "07",
    tags.KERNEL: "5.15.0-119-generic",
    tags.OS_ID: "ubuntu",
    tags.OS_VERSION_ID: "22.04",
    OS_VERSION_MAJOR: "22",
}


def example() -> Fleet:
    node = Node("gpu-node-0", EXAMPLE_LABELS)
    policy = {
        "apiVersion": API_VERSIONS[Kind.CLUSTER_POLICY],
        "kind": str(Kind.CLUSTER_POLICY),
        "metadata": {"name": "cluster-policy"},
        "spec": {"driver": {"useNvidiaDriverCRD": True}},
    }
    driver = {
        "apiVersion": API_VERSIONS[Kind.NVIDIA_DRIVER],
        "kind": str(Kind.NVIDIA_DRIVER),
        "metadata": {"name": "ubuntu22.04"},
        "spec": {
            "driverType": "gpu",
            "usePrecompiled": True,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": "550",
            "nodeSelector": {tags.OS_ID: "ubuntu", tags.OS_VERSION_ID: "22.04"},
        },
    }
    return Fleet(
        (
            Document(
                "cluster-policy.yaml",
                "The GPU Operator's ClusterPolicy hands the driver to the NVIDIADriver resources (with the\n"
                "Helm chart: --set driver.nvidiaDriverCRD.enabled=true). Only the fields gpudrv reads.",
                policy,
            ),
            Document(
                "nvidiadriver-ubuntu22.04.yaml",
                "One NVIDIADriver per OS: the operator computes each pool's os tag from that pool's own\n"
                "nodes. Precompiled images: <repository>/<image>:<version>-<kernel>-<os tag>.",
                driver,
            ),
            Document(
                "nodes/gpu-node-0.yaml",
                "An example GPU node: replace it with yours (the labels gpudrv reads, as NFD and GPU\n"
                "Feature Discovery set them), or start with gpudrv init --from-cluster.",
                node_document(node),
            ),
        ),
        (ImageKey("550", "5.15.0-119-generic", "ubuntu22.04"),),
    )


def node_document(node: Node, extra_labels: Iterable[str] = ()) -> dict[str, Any]:
    """A Node manifest with the labels gpudrv reads (and `extra_labels`, like the keys NVIDIADrivers
    select on), in that order; every other label is the cluster's own business."""
    keys = [*GPUDRV_LABELS, *sorted(set(extra_labels) - set(GPUDRV_LABELS))]
    labels = {key: node.labels[key] for key in keys if key in node.labels}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": labels}}


def resource_document(item: DriverResource) -> dict[str, Any]:
    """A live driver resource as a manifest: kind, name and spec; a ClusterPolicy's spec.driver only
    (the rest of it is the operator's other components, none of gpudrv's business)."""
    spec: Mapping[str, Any] = item.spec
    if item.kind is Kind.CLUSTER_POLICY:
        spec = {"driver": dict(spec.get("driver") or {})}
    return {
        "apiVersion": API_VERSIONS[item.kind],
        "kind": str(item.kind),
        "metadata": {"name": item.name},
        "spec": dict(spec),
    }


def live(contract: Contract, wants: Iterable[Want], source: str) -> Fleet:
    """The fleet as it runs: every GPU node, the driver resources in force, a row for each image."""
    found = list(wants)
    resources = [item for item in (contract.policy, *contract.drivers) if item is not None]
    selected = {key for item in contract.drivers for key in (item.node_selector or {})}
    documents = [
        Document(_resource_path(item), f"Read from {source} by gpudrv init.", resource_document(item))
        for item in resources
    ]
    documents += [
        Document(
            f"nodes/{want.node.name}.yaml",
            f"Read from {source} by gpudrv init.",
            node_document(want.node, selected),
        )
        for want in found
    ]
    rows = sorted({key for want in found if (key := key_of(want)) is not None})
    version = ".".join(map(str, contract.release)) if contract.release else None
    return Fleet(tuple(documents), tuple(rows), f"v{version}" if version else None)


def _resource_path(item: DriverResource) -> str:
    if item.kind is Kind.CLUSTER_POLICY:
        return "cluster-policy.yaml"
    return f"nvidiadriver-{item.name}.yaml"


def key_of(want: Want) -> ImageKey | None:
    """The matrix row of a node's image: the tag cut around the node's own kernel (the branch before
    it, the os tag after it); None when the node has no tag, or its tag carries no os tag."""
    kernel = want.node.labels.get(tags.KERNEL)
    if want.tag is None or not kernel:
        return None
    branch, middle, os_tag = want.tag.partition(f"-{kernel}-")
    if not middle or not branch or not os_tag:
        return None
    return ImageKey(branch, kernel, os_tag)


def matrix_text(rows: Iterable[ImageKey]) -> str:
    return "".join(f"{line}\n" for line in [MATRIX_HEADER, *(row.as_csv() for row in sorted(set(rows)))])
