"""The GPU Operator's driver contract: which driver resource governs a GPU node (the image it pulls
there is core/contract/driver_images.py).

Every rule here was read from NVIDIA/gpu-operator (docs/operator-contract.md gives file and line):
- ClusterPolicy (nvidia.com/v1) drives every GPU node unless `spec.driver.useNvidiaDriverCRD` is true;
  then each NVIDIADriver (nvidia.com/v1alpha1) drives the GPU nodes its nodeSelector matches (exact
  key=value pairs; no nodeSelector: every GPU node), from v26.7.0 a `default: true` one the nodes no
  other matches (before v26.7.0 the field does not exist, and it selects like any other),
  and two matching one node is refused.
- A precompiled image is `<repository>/<image>:<version>-<kernel-version.full>-<os tag>`, the kernel
  label raw, the os tag by the release's rule (os_tags). ClusterPolicy takes the os tag of ONE GPU
  node, whichever its cached list returns first, for every kernel pool; NVIDIADriver computes it per pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from reconciler.core.images.os_tags import Release, Rule
from reconciler.core.images.tags import Node

NVIDIADRIVER_IMAGE = "nvcr.io/nvidia/driver"  # the CRD's default for spec.image
OS_VERSION_MAJOR = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
MAJOR_LABEL_POOLS: Release = (26, 7, 0)  # NVIDIADriver pools select cut os tags by VERSION_ID.major
# NVIDIADriver spec.default exists from v26.7.0 (api/nvidia/v1alpha1/nvidiadriver_types.go:50-53 there,
# internal/nvidiadriver/nvidiadriver.go:104-117). Before, the CRD has no such field (the API server
# prunes it) and an NVIDIADriver without a nodeSelector selects every GPU node (v25.3.4
# nvidiadriver_types.go:515-525), overlapping any other (internal/validator/validator.go:47-71).
DEFAULT_DRIVERS: Release = (26, 7, 0)
Path = tuple[str | int, ...]


class Kind(StrEnum):
    CLUSTER_POLICY = "ClusterPolicy"
    NVIDIA_DRIVER = "NVIDIADriver"


API_VERSIONS: Mapping[Kind, str] = {
    Kind.CLUSTER_POLICY: "nvidia.com/v1",
    Kind.NVIDIA_DRIVER: "nvidia.com/v1alpha1",
}
PLURALS: Mapping[Kind, str] = {Kind.CLUSTER_POLICY: "clusterpolicies", Kind.NVIDIA_DRIVER: "nvidiadrivers"}


class Mode(StrEnum):
    LAB = "lab"  # no operator resources: the driver is the node's own nvidia.com/cuda.driver.major label
    CLUSTER_POLICY = "ClusterPolicy"
    NVIDIA_DRIVER = "NVIDIADriver"


class ResourceError(ValueError):
    """A driver resource that is not shaped as the operator's CRD wants; `path` leads to the culprit."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class ContractError(ValueError):
    """Resources the operator would refuse, or that gpudrv cannot gate; `origin` is `file:line`."""

    def __init__(self, message: str, origin: str | None = None) -> None:
        super().__init__(f"{origin}: {message}" if origin else message)
        self.origin = origin
        self.reason = message


@dataclass(frozen=True)
class DriverResource:
    kind: Kind
    name: str
    version: str = ""
    precompiled: bool = False
    repository: str = ""
    image: str = ""
    node_selector: Mapping[str, str] | None = None  # NVIDIADriver only; None: every GPU node
    driver_type: str = "gpu"
    use_driver_crd: bool = False  # ClusterPolicy only
    enabled: bool = True  # ClusterPolicy only
    default: bool = False  # NVIDIADriver only (v26.7.0+)
    upgrade_policy: Mapping[str, Any] = field(default_factory=dict)
    created: str = ""  # creationTimestamp, live only: the oldest ClusterPolicy is the active one
    spec: Mapping[str, Any] = field(default_factory=dict)  # as declared, for the diff
    origin: str | None = None  # file:line of the document, or None live
    version_origin: str | None = None  # file:line of its version field

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def where(self) -> str:
        return f"{self.ref} ({self.origin})" if self.origin else self.ref

    def selects(self, node: Node) -> bool:
        """Does this NVIDIADriver's nodeSelector pick the GPU node (exact key=value pairs)?"""
        selector = self.node_selector or {}
        return node.gpu_present and all(node.labels.get(key) == value for key, value in selector.items())


# --- reading a resource document (the adapter maps paths to lines) -----------------------------------


def resource(document: Mapping[str, Any]) -> DriverResource:
    kind = Kind(str(document.get("kind")))
    metadata = _mapping(document.get("metadata"), ("metadata",))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ResourceError(("metadata",), f"{kind} without metadata.name")
    spec = _mapping(document.get("spec"), ("spec",))
    created = str(metadata.get("creationTimestamp") or "")
    if kind is Kind.CLUSTER_POLICY:
        base: Path = ("spec", "driver")
        driver = _mapping(spec.get("driver"), base)
        return DriverResource(
            kind,
            name,
            **_driver_fields(driver, base),
            use_driver_crd=_flag(driver, "useNvidiaDriverCRD", base, False),
            enabled=_flag(driver, "enabled", base, True),
            created=created,
            spec=dict(spec),
        )
    base = ("spec",)
    fields = _driver_fields(spec, base)
    fields["image"] = fields["image"] or NVIDIADRIVER_IMAGE
    return DriverResource(
        kind,
        name,
        **fields,
        node_selector=_selector(spec.get("nodeSelector"), (*base, "nodeSelector")),
        driver_type=_string(spec, "driverType", base) or "gpu",
        default=_flag(spec, "default", base, False),
        created=created,
        spec=dict(spec),
    )


def version_path(kind: Kind) -> Path:
    return ("spec", "driver", "version") if kind is Kind.CLUSTER_POLICY else ("spec", "version")


def _driver_fields(spec: Mapping[str, Any], base: Path) -> dict[str, Any]:
    return {
        "version": _string(spec, "version", base),
        "precompiled": _flag(spec, "usePrecompiled", base, False),
        "repository": _string(spec, "repository", base),
        "image": _string(spec, "image", base),
        "upgrade_policy": _mapping(spec.get("upgradePolicy"), (*base, "upgradePolicy")),
    }


def _mapping(value: Any, path: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ResourceError(path, f"{_dotted(path)} must be a mapping")
    return value


def _string(spec: Mapping[str, Any], key: str, base: Path) -> str:
    value = spec.get(key)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ResourceError((*base, key), f'{_dotted((*base, key))} must be a string; quote it: "{value}"')
    return value


def _flag(spec: Mapping[str, Any], key: str, base: Path, default: bool) -> bool:
    value = spec.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ResourceError((*base, key), f"{_dotted((*base, key))} must be true or false, not {value!r}")
    return value


def _selector(value: Any, path: Path) -> dict[str, str] | None:
    if value is None:
        return None
    selector = _mapping(value, path)
    for key, item in selector.items():
        if not isinstance(item, str):
            raise ResourceError((*path, key), f'{_dotted((*path, key))} must be a string; quote it: "{item}"')
    return {str(key): item for key, item in selector.items()}


def _dotted(path: Path) -> str:
    return ".".join(str(part) for part in path)


# --- the contract in force ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Contract:
    mode: Mode
    rule: Rule
    release: Release | None = None  # the operator release the rule is for; None: the newest known
    policy: DriverResource | None = None  # the active ClusterPolicy
    drivers: tuple[DriverResource, ...] = ()  # NVIDIADrivers in force

    @property
    def resources(self) -> tuple[DriverResource, ...]:
        return (
            (self.policy, *self.drivers) if self.mode is Mode.CLUSTER_POLICY and self.policy else self.drivers
        )

    def governing(self, node: Node) -> DriverResource | None:
        """The resource that decides the node's driver; ContractError when two NVIDIADrivers both claim it."""
        if self.mode is Mode.CLUSTER_POLICY:
            return self.policy if node.gpu_present else None
        claims = [driver for driver in self.drivers if not self.is_default(driver) and driver.selects(node)]
        if len(claims) > 1:
            first, second = claims[0], claims[1]
            raise ContractError(
                f"node {node.name} is selected by both {first.where} and {second.where}: the GPU Operator "
                "refuses NVIDIADrivers whose nodeSelectors overlap (ConflictingNodeSelector) and deploys "
                "neither; narrow one nodeSelector",
                second.version_origin or second.origin,
            )
        if claims:
            return claims[0]
        fallback = [driver for driver in self.drivers if self.is_default(driver)]
        return fallback[0] if fallback and node.gpu_present else None

    @property
    def has_default_drivers(self) -> bool:
        """Does this operator release know NVIDIADriver spec.default (None: the newest rule)?"""
        return self.release is None or self.release >= DEFAULT_DRIVERS

    def is_default(self, driver: DriverResource) -> bool:
        return driver.default and self.has_default_drivers


def contract(resources: Sequence[DriverResource], rule: Rule, release: Release | None = None) -> Contract:
    """The resources the operator would act on, checked: one active ClusterPolicy, precompiled drivers
    with a version, no two default NVIDIADrivers. ContractError names the resource and its line."""
    policies = [item for item in resources if item.kind is Kind.CLUSTER_POLICY]
    drivers = tuple(item for item in resources if item.kind is Kind.NVIDIA_DRIVER)
    policy = _active_policy(policies)
    if policy is None and not drivers:
        return Contract(Mode.LAB, rule, release)
    if policy is not None and not policy.use_driver_crd:
        _check_gated(policy)
        return Contract(Mode.CLUSTER_POLICY, rule, release, policy)
    if not drivers:
        assert policy is not None
        raise ContractError(
            f"{policy.ref} sets spec.driver.useNvidiaDriverCRD: true, but no NVIDIADriver is declared: "
            "the operator would deploy no driver",
            policy.origin,
        )
    for driver in drivers:
        _check_gated(driver)
    defaults = [driver for driver in drivers if driver.default]
    if release is not None and release < DEFAULT_DRIVERS:
        defaults = []  # no such field before v26.7.0: each is an NVIDIADriver like any other
    for driver in defaults:
        if driver.node_selector:  # v26.7.0 nvidiadriver_types.go:43-45, a CEL rule of the CRD
            raise ContractError(
                f"{driver.where} is default: true and has a nodeSelector: the API server refuses it "
                "(default NVIDIADriver must not use nodeSelector)",
                driver.origin,
            )
    if len(defaults) > 1:
        raise ContractError(
            f"{defaults[0].where} and {defaults[1].where} are both default: true; the operator allows one",
            defaults[1].origin,
        )
    return Contract(Mode.NVIDIA_DRIVER, rule, release, policy, drivers)


def _active_policy(policies: Sequence[DriverResource]) -> DriverResource | None:
    """The operator acts on the oldest ClusterPolicy (ties: the lowest name) and ignores the others.
    Manifests carry no creation time, so two of them in git are refused rather than guessed."""
    if len(policies) <= 1:
        return policies[0] if policies else None
    if all(policy.created for policy in policies):
        return min(policies, key=lambda policy: (policy.created, policy.name))
    first, second = policies[0], policies[1]
    raise ContractError(
        f"{first.where} and {second.where}: the GPU Operator acts on one ClusterPolicy and ignores the "
        "others; declare one",
        second.origin,
    )


def _check_gated(item: DriverResource) -> None:
    if item.kind is Kind.CLUSTER_POLICY and not item.enabled:
        raise ContractError(
            f"{item.ref} sets spec.driver.enabled: false: the operator installs no driver, so there is no "
            "driver image to gate",
            item.origin,
        )
    if not item.precompiled:
        raise ContractError(
            f"{item.ref} does not set usePrecompiled: true: its driver is compiled on each node at start, "
            "outside gpudrv's gate (gpudrv checks precompiled driver images only)",
            item.origin,
        )
    problem = _image_spec_problem(item)
    if problem:
        raise ContractError(f"{item.ref}: {problem}", item.version_origin or item.origin)


def _image_spec_problem(item: DriverResource) -> str | None:
    if not item.repository and not item.version:
        if not item.image or ":" not in item.image.rsplit("/", 1)[-1]:
            return 'no version: set the driver branch (version: "550") with usePrecompiled: true'
        return None if "sha256:" not in item.image else _digest_problem()
    if item.version.startswith("sha256:") or "sha256:" in item.image:
        return _digest_problem()
    # Before v26.7.0 the operator joins what it has ("/driver:550"), which no runtime can pull; from
    # v26.7.0 it refuses the resource. Either way no node gets a driver: refuse it here too.
    missing = [name for name in ("repository", "image", "version") if not getattr(item, name)]
    if missing:
        return f"{' and '.join(missing)} not set: the operator would pull {image_base(item)!r}"
    return None


def _digest_problem() -> str:
    return "a digest cannot name a precompiled driver image: the tag carries the kernel and OS"


def with_origins(item: DriverResource, origin: str | None, version_origin: str | None) -> DriverResource:
    return replace(item, origin=origin, version_origin=version_origin)


def image_base(item: DriverResource) -> str:
    """`repository/image:version`, the reference before the kernel and os tag (or `image` alone)."""
    if not item.repository and not item.version:
        return item.image
    return f"{item.repository}/{item.image}:{item.version}"
