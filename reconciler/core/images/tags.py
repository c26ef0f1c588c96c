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

# Field patterns; schemas/matrix-row.schema.json and schemas/node-manifest.schema.json carry the same
# ones (unit tests keep them equal).
BRANCH_PATTERN = r"^[0-9]+$"
# A kernel is what NFD's kernel-version.full reports, the one rule for every kernel gpudrv reads (node
# labels, the next-kernel label, matrix rows, preflight --kernel, the probe). NFD: /proc/sys/kernel/
# osrelease with every character outside [-A-Za-z0-9_.] replaced by '_' and '-_.' trimmed from both ends
# (node-feature-discovery v0.17.3 source/kernel/version.go:38-44, read at :59-65), published only when it
# is a valid label value, at most 63 characters (pkg/nfd-worker/nfd-worker.go:617-623). Linux's release
# starts VERSION.PATCHLEVEL.SUBLEVEL (the kernel Makefile's KERNELVERSION, SUBLEVEL 0 in a .0 release:
# `6.8.0`), so `5.15`, `garbage` or a pasted image tag is no kernel.
KERNEL_PATTERN = r"^[0-9]+\.[0-9]+\.[0-9]+([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
KERNEL_LENGTH = 63
KERNEL_SHAPE = (
    "a release as NFD's kernel-version.full reports it, like 5.15.0-119-generic: "
    f"VERSION.PATCHLEVEL.SUBLEVEL, then letters, digits, '.', '_', '-', at most {KERNEL_LENGTH} characters"
)
# An os tag is what the GPU Operator appends: os-release ID then VERSION_ID (or its major part), with no
# separator (gpu-operator controllers/object_controls.go kernelFullVersion: fmt.Sprintf("%s%s", osName,
# osVersion); per release: reconciler/data/os-tag-rules.json), from NFD's system-os_release labels.
# os-release(5): ID names the OS "excluding any version information", VERSION_ID is "mostly numeric"
# and excludes the OS name; both are label values (lowercase here, ending with a letter or digit). So an
# ID starting and ending with a letter, then a VERSION_ID starting with a digit: `ubuntu22.04`, `rhel9`,
# `opensuse-leap15.5`; not `ubuntu-22.04`, `22.04` or `ubuntu`.
OS_TAG_PATTERN = r"^[a-z]([a-z0-9._-]*[a-z])?[0-9]([a-z0-9._-]*[a-z0-9])?$"
OS_TAG_SHAPE = (
    "<ID><VERSION_ID> as the GPU Operator makes it: os-release ID, then VERSION_ID with nothing between, "
    "like ubuntu22.04 or rhel9"
)
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
    """Is `kernel` a kernel as NFD's kernel-version.full reports one (KERNEL_PATTERN, KERNEL_LENGTH)?"""
    return len(kernel) <= KERNEL_LENGTH and _full(KERNEL_PATTERN, kernel)


def kernel_problem(kernel: str) -> str | None:
    """Why `kernel` is no kernel NFD reports (so no image is built for it), or None when it is one."""
    if not kernel:
        return "empty kernel"
    if valid_kernel(kernel):
        return None
    return f"kernel {kernel!r} is not {KERNEL_SHAPE}{_pasted_tag(kernel)}"


def os_tag_problem(os_tag: str) -> str | None:
    """Why `os_tag` is no os tag the GPU Operator makes, or None when it is one."""
    if not os_tag:
        return "empty os tag"
    if _full(OS_TAG_PATTERN, os_tag):
        return None
    joined = re.fullmatch(r"([a-z]+)[-_.]([0-9][a-z0-9._-]*)", os_tag)
    hint = f" ({joined[1]}{joined[2]}?)" if joined and _full(OS_TAG_PATTERN, joined[1] + joined[2]) else ""
    return f"os tag {os_tag!r} is not {OS_TAG_SHAPE}{hint}"


def _pasted_tag(text: str) -> str:
    """A hint when `text` is a whole image tag `<branch>-<kernel>-<os tag>`: the kernel inside it."""
    branch, _, rest = text.partition("-")
    kernel, _, os_part = rest.rpartition("-")
    if _full(BRANCH_PATTERN, branch) and valid_kernel(kernel) and _full(OS_TAG_PATTERN, os_part):
        return f"; it is a whole image tag: its kernel is {kernel}"
    return ""


def invalid_tag_reason(tag: str) -> str:
    return f"tag {tag!r} is not a valid image tag (at most 128 characters: letters, digits, '.', '_', '-')"


def image_key(node: Node, os_tagger: Callable[[str, str], str] = os_tag) -> ImageKey:
    """The image a node needs, from its labels; raises TagError naming the label at fault.
    `os_tagger` is the os-tag rule of the operator release in force (ValueError: it refuses the value)."""
    branch = label(node, DRIVER_MAJOR, BRANCH_PATTERN, "is not a driver branch (digits only)")
    kernel = kernel_label(node, KERNEL)
    key = ImageKey(branch, kernel, node_os_tag(node, os_tagger))
    if not valid_tag(key.tag):
        raise TagError(node.name, invalid_tag_reason(key.tag))
    return key


def node_os_tag(node: Node, os_tagger: Callable[[str, str], str] = os_tag) -> str:
    os_id = label(node, OS_ID, OS_RELEASE_PATTERN, "is not an os-release ID (lowercase a-z, 0-9, . _ -)")
    version = label(node, OS_VERSION_ID, OS_RELEASE_PATTERN, "is not an os-release VERSION_ID")
    try:
        made = os_tagger(os_id, version)
    except ValueError as exc:
        raise TagError(node.name, f"label {OS_VERSION_ID}={version!r}: {exc}") from None
    problem = os_tag_problem(made)
    if problem is not None:  # the operator would ask for an image no matrix row can name
        raise TagError(node.name, f"labels {OS_ID}={os_id!r} and {OS_VERSION_ID}={version!r}: {problem}")
    return made


def next_kernel(node: Node) -> str | None:
    """The kernel the node boots next when it differs from the one it runs, or None; TagError when the
    label is there but cannot be part of an image tag."""
    if NEXT_KERNEL not in node.labels:
        return None
    value = kernel_label(node, NEXT_KERNEL)
    return None if value == node.labels.get(KERNEL) else value


def kernel_label(node: Node, key: str) -> str:
    """A kernel label's value (KERNEL, NEXT_KERNEL), checked by the one kernel rule; TagError when it
    is missing, empty or no kernel NFD reports."""
    value = _present(node, key)
    if not valid_kernel(value):
        raise TagError(node.name, f"label {key}={value!r} is not {KERNEL_SHAPE}")
    return value


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
    value = _present(node, key)
    if not _full(pattern, value):
        raise TagError(node.name, f"label {key}={value!r} {complaint}")
    return value


def _present(node: Node, key: str) -> str:
    if key not in node.labels:
        raise TagError(node.name, f"label {key} is missing")
    value = node.labels[key]
    if value == "":
        raise TagError(node.name, f"label {key} is empty")
    return value


def _full(pattern: str, value: str) -> bool:
    # re.fullmatch plus \Z semantics: '$' alone would accept a trailing newline.
    return re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is not None
