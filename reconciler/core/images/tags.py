"""Node facts and the precompiled driver image tag they call for.

The tag is `<driver branch>-<kernel>-<os tag>`, built from separate labels and never parsed back
from a tag in general (kernels contain hyphens).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

GPU_PRESENT = "nvidia.com/gpu.present"
DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
DRIVER_MINOR = "nvidia.com/cuda.driver.minor"
DRIVER_REV = "nvidia.com/cuda.driver.rev"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
OS_ID = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_ID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
# The kernel a node boots next, published by `gpudrv probe` through NFD's local source (core/boot/nfd.py);
# absent when the next kernel is the running one.
NEXT_KERNEL = "gpudrv.dev/kernel-version.next"

# The newest GPU Operator rule (v26.7.0 getOSTag) keeps only the major version for these distributions;
# reconciler/data/os-tag-rules.json has the rule of every release (a unit test keeps the two equal).
MAJOR_ONLY_OS = frozenset({"rhel", "rocky", "ol"})

# Field patterns; schemas/matrix-row.schema.json carries the same ones (a unit test keeps them equal).
BRANCH_PATTERN = r"^[0-9]+$"
KERNEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
OS_TAG_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
# An OCI tag: at most 128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'.
TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
TAG_LENGTH = 128
OS_RELEASE_PATTERN = r"^[a-z0-9._-]+$"


@dataclass(frozen=True)
class Node:
    """A node as gpudrv sees it: a name and its labels; `origin` is `file:line` for manifests."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    origin: str | None = None

    @property
    def gpu_present(self) -> bool:
        return self.labels.get(GPU_PRESENT) == "true"


class TagError(ValueError):
    """A node's labels do not give a valid tag; `reason` names the label and what is wrong."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"node {node}: {reason}")
        self.node = node
        self.reason = reason


@dataclass(frozen=True, order=True)
class ImageKey:
    """One precompiled driver image: the three parts of its tag."""

    driver_branch: str
    kernel: str
    os_tag: str

    @property
    def tag(self) -> str:
        return f"{self.driver_branch}-{self.kernel}-{self.os_tag}"

    def as_csv(self) -> str:
        return f"{self.driver_branch},{self.kernel},{self.os_tag}"


def os_tag(os_id: str, version_id: str) -> str:
    """`ubuntu` + `22.04` gives `ubuntu22.04`; rhel, rocky and ol keep the major version (`rhel9`)."""
    if os_id in MAJOR_ONLY_OS:
        version_id = version_id.split(".", 1)[0]
    return f"{os_id}{version_id}"


def valid_tag(tag: str) -> bool:
    return _full(TAG_PATTERN, tag)


def valid_kernel(kernel: str) -> bool:
    """Can `kernel` be part of an image tag (the kernel label's pattern, no longer than a tag)?"""
    return _full(KERNEL_PATTERN, kernel) and len(kernel) <= TAG_LENGTH


def kernel_problem(kernel: str) -> str | None:
    """Why `kernel` cannot be part of an image tag, or None when it can (as NFD's kernel-version.full
    spells a kernel, and no longer than a whole tag may be)."""
    if not kernel:
        return "empty kernel"
    if not valid_kernel(kernel):
        return (
            f"kernel {kernel!r} cannot be part of an image tag (letters, digits, '.', '_', '-', "
            f"starting with a letter or digit, at most {TAG_LENGTH} characters)"
        )
    return None


def invalid_tag_reason(tag: str) -> str:
    return f"tag {tag!r} is not a valid image tag (at most 128 characters: letters, digits, '.', '_', '-')"


def image_key(node: Node, os_tagger: Callable[[str, str], str] = os_tag) -> ImageKey:
    """The image a node needs, from its labels; raises TagError naming the label at fault.
    `os_tagger` is the os-tag rule of the operator release in force (ValueError: it refuses the value)."""
    branch = label(node, DRIVER_MAJOR, BRANCH_PATTERN, "is not a driver branch (digits only)")
    kernel = label(node, KERNEL, KERNEL_PATTERN, "cannot be part of an image tag")
    key = ImageKey(branch, kernel, node_os_tag(node, os_tagger))
    if not valid_tag(key.tag):
        raise TagError(node.name, invalid_tag_reason(key.tag))
    return key


def node_os_tag(node: Node, os_tagger: Callable[[str, str], str] = os_tag) -> str:
    os_id = label(node, OS_ID, OS_RELEASE_PATTERN, "is not an os-release ID (lowercase a-z, 0-9, . _ -)")
    version = label(node, OS_VERSION_ID, OS_RELEASE_PATTERN, "is not an os-release VERSION_ID")
    try:
        return os_tagger(os_id, version)
    except ValueError as exc:
        raise TagError(node.name, f"label {OS_VERSION_ID}={version!r}: {exc}") from None


def next_kernel(node: Node) -> str | None:
    """The kernel the node boots next when it differs from the one it runs, or None; TagError when the
    label is there but cannot be part of an image tag."""
    if NEXT_KERNEL not in node.labels:
        return None
    value = label(node, NEXT_KERNEL, KERNEL_PATTERN, "cannot be part of an image tag")
    return None if value == node.labels.get(KERNEL) else value


def rebooted(node: Node, kernel: str) -> Node:
    """The node as NFD will label it once it runs `kernel`: the running-kernel label moved, the next
    one gone."""
    labels = {key: value for key, value in node.labels.items() if key != NEXT_KERNEL}
    labels[KERNEL] = kernel
    return Node(node.name, labels, node.origin)


def tag(node: Node) -> str:
    return image_key(node).tag


def label(node: Node, key: str, pattern: str, complaint: str) -> str:
    """The label's value, checked against `pattern`; TagError when it is missing, empty or off."""
    if key not in node.labels:
        raise TagError(node.name, f"label {key} is missing")
    value = node.labels[key]
    if value == "":
        raise TagError(node.name, f"label {key} is empty")
    if not _full(pattern, value):
        raise TagError(node.name, f"label {key}={value!r} {complaint}")
    return value


def _full(pattern: str, value: str) -> bool:
    # re.fullmatch plus \Z semantics: '$' alone would accept a trailing newline.
    return re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is not None
