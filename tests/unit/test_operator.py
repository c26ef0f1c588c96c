"""The GPU Operator's driver contract on plain data: resources, selection, overlap, images, mixed OS."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.files import operator_contract
from reconciler.core.contract import driver_images, operator
from reconciler.core.contract.operator import Contract, ContractError, Kind, Mode, ResourceError
from reconciler.core.images import os_tags, tags
from reconciler.core.images.tags import Node

RULES = operator_contract.rules()
NEWEST = RULES.newest
UBUNTU = ("ubuntu", "22.04", "5.15.0-119-generic")
RHEL = ("rhel", "9.4", "5.14.0-427.13.1.el9_4.x86_64")


def gpu(name: str, os: tuple[str, str, str] = UBUNTU, **extra: str) -> Node:
    os_id, version, kernel = os
    labels = {tags.GPU_PRESENT: "true", tags.OS_ID: os_id, tags.OS_VERSION_ID: version, tags.KERNEL: kernel}
    labels[operator.OS_VERSION_MAJOR] = version.split(".")[0]
    return Node(name, {**labels, **extra})


def policy(**driver: Any) -> dict[str, Any]:
    spec = {"usePrecompiled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "550"}
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"driver": {**spec, **driver}}}  # fmt: skip


def nvd(name: str, selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "usePrecompiled": True,
        "repository": "nvcr.io/nvidia",
        "image": "driver",
        "version": "550",
    }
    if selector is not None:
        body["nodeSelector"] = selector
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name},
            "spec": {**body, **spec}}  # fmt: skip


def build(*documents: dict[str, Any], release: str | None = None) -> Contract:
    rule = RULES.for_version(release) if release else NEWEST
    parsed = [operator.resource(document) for document in documents]
    return operator.contract(parsed, rule, None if release is None else os_tags.parse_release(release))


# --- reading resources ---------------------------------------------------------------------------------


def test_cluster_policy_fields() -> None:
    item = operator.resource(policy(upgradePolicy={"autoUpgrade": True, "maxParallelUpgrades": 2}))
    assert (item.kind, item.name, item.version, item.precompiled) == (
        Kind.CLUSTER_POLICY,
        "cluster-policy",
        "550",
        True,
    )
    assert (item.repository, item.image, item.use_driver_crd, item.enabled) == (
        "nvcr.io/nvidia",
        "driver",
        False,
        True,
    )
    assert item.upgrade_policy == {"autoUpgrade": True, "maxParallelUpgrades": 2}


def test_nvidiadriver_defaults_as_the_crd_sets_them() -> None:
    document = nvd("pool", {"pool": "a"})
    del document["spec"]["image"]
    item = operator.resource(document)
    assert (item.image, item.driver_type, item.default, item.node_selector) == (
        operator.NVIDIADRIVER_IMAGE, "gpu", False, {"pool": "a"},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        (policy(version=550), ("spec", "driver", "version"), 'must be a string; quote it: "550"'),
        (policy(usePrecompiled="yes"), ("spec", "driver", "usePrecompiled"), "must be true or false"),
        (nvd("a", {"pool": 1}), ("spec", "nodeSelector", "pool"), "must be a string"),
        ({**policy(), "spec": ["x"]}, ("spec",), "must be a mapping"),
        ({**nvd("a"), "metadata": {}}, ("metadata",), "without metadata.name"),
    ],
)
def test_malformed_resources_name_the_field(
    document: dict[str, Any], path: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ResourceError, match=message) as caught:
        operator.resource(document)
    assert caught.value.path == path


# --- the contract in force -----------------------------------------------------------------------------


def test_no_resources_is_the_lab() -> None:
    assert build().mode is Mode.LAB


def test_cluster_policy_drives_every_gpu_node() -> None:
    contract = build(policy())
    assert contract.mode is Mode.CLUSTER_POLICY
    assert contract.governing(gpu("a")) is contract.policy
    assert contract.governing(Node("cpu", {})) is None


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ((policy(usePrecompiled=False),), "does not set usePrecompiled: true"),
        ((policy(usePrecompiled=None),), "outside gpudrv's gate"),
        ((policy(enabled=False),), "installs no driver"),
        ((policy(version=None, repository=None),), "no version"),
        ((policy(version=None),), "version not set"),
        ((policy(repository=None),), "repository not set: the operator would pull '/driver:550'"),
        ((policy(version="sha256:abc"),), "digest"),
        ((policy(useNvidiaDriverCRD=True),), "no NVIDIADriver is declared"),
        ((nvd("a", usePrecompiled=False),), "NVIDIADriver/a does not set usePrecompiled"),
        ((nvd("a", version=None),), "version not set"),
        ((nvd("a", repository=None),), "repository not set"),
        ((nvd("a", default=True), nvd("b", default=True)), "both default: true"),
        ((policy(), {**policy(), "metadata": {"name": "second"}}), "acts on one ClusterPolicy"),
    ],
)
def test_contracts_gpudrv_refuses(documents: tuple[dict[str, Any], ...], message: str) -> None:
    with pytest.raises(ContractError, match=message):
        build(*documents)


def test_image_with_its_own_tag_needs_no_version() -> None:
    contract = build(policy(repository=None, version=None, image="registry.local:5000/nv/driver:550"))
    want = driver_images.want_of(contract, gpu("a"))
    assert want.image == "registry.local:5000/nv/driver:550-5.15.0-119-generic-ubuntu22.04"
    assert want.tag == "550-5.15.0-119-generic-ubuntu22.04"


def test_live_cluster_policies_the_oldest_is_active() -> None:
    older = operator.resource(
        {**policy(version="535"), "metadata": {"name": "b", "creationTimestamp": "2025-01-01T00:00:00Z"}}
    )
    newer = operator.resource(
        {**policy(), "metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    )
    contract = operator.contract([newer, older], NEWEST)
    assert contract.policy == older


def test_cluster_policy_with_the_driver_crd_hands_over_to_nvidiadrivers() -> None:
    contract = build(policy(useNvidiaDriverCRD=True, usePrecompiled=False), nvd("all"))
    assert contract.mode is Mode.NVIDIA_DRIVER
    assert [item.name for item in contract.drivers] == ["all"]


# --- selection -----------------------------------------------------------------------------------------


def test_nodeselector_is_exact_pairs_on_gpu_nodes() -> None:
    contract = build(nvd("ubuntu", {tags.OS_ID: "ubuntu"}), nvd("rhel", {tags.OS_ID: "rhel"}))
    assert contract.governing(gpu("u")).name == "ubuntu"  # type: ignore[union-attr]
    assert contract.governing(gpu("r", RHEL)).name == "rhel"  # type: ignore[union-attr]
    assert contract.governing(gpu("s", ("sles", "15.6", "6.4.0"))) is None
    assert contract.governing(Node("cpu", {tags.OS_ID: "ubuntu"})) is None


def test_no_nodeselector_means_every_gpu_node() -> None:
    contract = build(nvd("all"))
    assert contract.governing(gpu("a")).name == "all"  # type: ignore[union-attr]


def test_overlap_names_both_and_the_node() -> None:
    contract = build(nvd("ubuntu", {tags.OS_ID: "ubuntu"}), nvd("pool-a", {"pool": "a"}))
    with pytest.raises(
        ContractError, match=r"node n1 is selected by both NVIDIADriver/ubuntu and NVIDIADriver/pool-a"
    ):
        contract.governing(gpu("n1", pool="a"))


def test_the_default_nvidiadriver_takes_what_no_other_selects() -> None:
    contract = build(nvd("default", default=True, version="535"), nvd("rhel", {tags.OS_ID: "rhel"}))
    assert contract.governing(gpu("u")).name == "default"  # type: ignore[union-attr]
    assert contract.governing(gpu("r", RHEL)).name == "rhel"  # type: ignore[union-attr]


def test_before_v26_7_0_default_does_not_exist_and_the_driver_selects_every_gpu_node() -> None:
    documents = (nvd("default", default=True, version="535"), nvd("rhel", {tags.OS_ID: "rhel"}))
    old = build(*documents, release="v25.3.4")
    assert old.governing(gpu("u")).name == "default"  # type: ignore[union-attr]
    with pytest.raises(ContractError, match="ConflictingNodeSelector"):
        old.governing(gpu("r", RHEL))  # both select it: the operator deploys neither
    # two "default" ones are no special case there, just two NVIDIADrivers for every node
    two = build(nvd("a", default=True), nvd("b", default=True), release="v25.3.4")
    with pytest.raises(ContractError, match="selected by both"):
        two.governing(gpu("u"))


def test_from_v26_7_0_a_default_nvidiadriver_with_a_node_selector_is_refused() -> None:
    with pytest.raises(ContractError, match="must not use nodeSelector"):
        build(nvd("default", {tags.OS_ID: "ubuntu"}, default=True), release="v26.7.0")


# --- images --------------------------------------------------------------------------------------------


def test_nvidiadriver_images_are_per_node_os() -> None:
    contract = build(nvd("ubuntu", {tags.OS_ID: "ubuntu"}), nvd("rhel", {tags.OS_ID: "rhel"}, version="570"))
    found = driver_images.wants(contract, [gpu("r", RHEL), gpu("u"), Node("cpu", {})])
    assert [(want.node.name, want.image) for want in found.wants] == [
        ("r", "nvcr.io/nvidia/driver:570-5.14.0-427.13.1.el9_4.x86_64-rhel9"),
        ("u", "nvcr.io/nvidia/driver:550-5.15.0-119-generic-ubuntu22.04"),
    ]
    assert found.notes == ()


def test_the_release_decides_the_os_tag() -> None:
    old = build(nvd("all"), release="v26.3.3")
    assert driver_images.want_of(old, gpu("r", RHEL)).tag == "550-5.14.0-427.13.1.el9_4.x86_64-rhel9.4"


def test_v26_7_pools_need_the_major_version_label_for_cut_tags() -> None:
    node = gpu("r", RHEL)
    bare = Node("r", {k: v for k, v in node.labels.items() if k != operator.OS_VERSION_MAJOR})
    assert "VERSION_ID.major is missing" in (driver_images.want_of(build(nvd("all")), bare).reason or "")
    assert driver_images.want_of(build(nvd("all"), release="v26.3.3"), bare).reason is None
    assert (
        driver_images.want_of(build(policy()), bare).reason is None
    )  # ClusterPolicy pools go by kernel only


def test_unselected_and_unlabelled_nodes_have_a_reason() -> None:
    contract = build(nvd("rhel", {tags.OS_ID: "rhel"}))
    assert "no NVIDIADriver selects it" in (driver_images.want_of(contract, gpu("u")).reason or "")
    unlabelled = Node("x", {tags.GPU_PRESENT: "true", tags.OS_ID: "rhel"})
    assert "VERSION_ID is missing" in (driver_images.want_of(contract, unlabelled).reason or "")


def test_a_kernel_the_operator_cannot_tag_is_a_reason() -> None:
    contract = build(nvd("all"))
    want = driver_images.want_of(contract, gpu("k", ("ubuntu", "22.04", "5.15+weird")))
    assert want.tag is None and f"is not {tags.KERNEL_SHAPE}" in (want.reason or "")


def test_lab_mode_reads_the_driver_label() -> None:
    node = gpu("lab", **{tags.DRIVER_MAJOR: "535"})
    assert driver_images.want_of(build(), node).tag == "535-5.15.0-119-generic-ubuntu22.04"
    assert driver_images.want_of(build(), node).image is None


# --- the mixed-OS ClusterPolicy trap -------------------------------------------------------------------


def test_single_os_cluster_policy_has_no_note() -> None:
    found = driver_images.wants(
        build(policy()), [gpu("a"), gpu("b", ("ubuntu", "22.04", "6.8.0-45-generic"))]
    )
    assert found.notes == ()
    assert [want.tag for want in found.wants] == [
        "550-5.15.0-119-generic-ubuntu22.04",
        "550-6.8.0-45-generic-ubuntu22.04",
    ]


def test_mixed_os_cluster_policy_names_the_wrong_images() -> None:
    found = driver_images.wants(build(policy()), [gpu("u1"), gpu("r1", RHEL)])
    (note,) = found.notes
    assert note.nodes == ("r1", "u1")
    assert (
        "If it reads a rhel9 node: u1 pulls nvcr.io/nvidia/driver:550-5.15.0-119-generic-rhel9"
        in note.message
    )
    assert (
        "If it reads a ubuntu22.04 node: r1 pulls "
        "nvcr.io/nvidia/driver:550-5.14.0-427.13.1.el9_4.x86_64-ubuntu22.04" in note.message
    )
    assert "one NVIDIADriver per OS" in note.message
    # Each node is still audited for the image it really needs.
    assert [want.tag for want in found.wants] == [
        "550-5.14.0-427.13.1.el9_4.x86_64-rhel9",
        "550-5.15.0-119-generic-ubuntu22.04",
    ]


def test_one_kernel_on_two_os_versions_stops_the_operator() -> None:
    kernel = "5.15.0-119-generic"
    found = driver_images.wants(build(policy()), [gpu("a"), gpu("b", ("ubuntu", "22.10", kernel))])
    assert any(
        "different OS versions found for the same kernel version" in note.message for note in found.notes
    )


def test_the_mixed_os_check_counts_major_only_tags_as_one_os() -> None:
    nodes = [gpu("a", RHEL), gpu("b", ("rhel", "9.6", "5.14.0-570.el9_6.x86_64"))]
    assert driver_images.wants(build(policy()), nodes).notes == ()
    assert len(driver_images.wants(build(policy(), release="v26.3.3"), nodes).notes) == 1
