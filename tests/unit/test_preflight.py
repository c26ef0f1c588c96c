"""gpudrv preflight's pure core on plain data: each GPU node moved to kernel K under the driver contract
in force (lab, ClusterPolicy, NVIDIADriver), grouped by pool, with the operator release's os-tag rule."""

from __future__ import annotations

import pytest

from reconciler.adapters.files import operator_contract
from reconciler.core.audit import preflight
from reconciler.core.audit.audit import Status
from reconciler.core.contract import driver_images, operator
from reconciler.core.contract.operator import Contract, Mode, resource
from reconciler.core.images import os_tags, tags
from reconciler.core.images.tags import KERNEL, NEXT_KERNEL, OS_ID, OS_VERSION_ID, Node
from tests.unit.test_operator import nvd, policy

RULES = operator_contract.rules()
NEWEST = RULES.newest
LAB = Contract(Mode.LAB, NEWEST)
K = "6.8.0-60-generic"
MAJOR = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"


def gpu(name: str, branch: str = "550", os_id: str = "ubuntu", version: str = "22.04", **more: str) -> Node:
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/cuda.driver.major": branch,
        KERNEL: "5.15.0-119-generic",
        OS_ID: os_id,
        OS_VERSION_ID: version,
        MAJOR: version.split(".", maxsplit=1)[0],
        **more,
    }
    return Node(name, labels, f"nodes/{name}.yaml:1")


def test_kernel_problem() -> None:
    for good in ("6.8.0-60-generic", "5.14.0-427.13.1.el9_4.x86_64", "6.8.0-" + "a" * 57):
        assert tags.kernel_problem(good) is None
    bad_ones = ("6.8.0 60", "-6.8", ".6", "6.8\n", "6.8.0-" + "a" * 58, "6.8:0", "6/8", "6.8", "garbage")
    for bad in (*bad_ones, "550-6.8.0-60-generic-ubuntu24.04"):
        problem = tags.kernel_problem(bad)
        assert problem is not None and repr(bad) in problem
    assert tags.kernel_problem("") == "empty kernel"


def test_lab_pools_by_os_and_driver_on_the_kernel() -> None:
    nodes = [
        gpu("c", "535"),
        gpu("a"),
        gpu("b", **{NEXT_KERNEL: "6.9.0-1-generic"}),  # K replaces its next kernel too
        gpu("d", version="24.04"),
        Node("cpu", {KERNEL: "5.15.0-119-generic"}),  # no GPU: not looked at
    ]
    present = frozenset({f"550-{K}-ubuntu22.04"})
    result = preflight.check(LAB, nodes, K, present)
    assert result.checked == ("a", "b", "c", "d")
    assert [(p.os_tag, p.driver, p.tag, p.names, p.ready) for p in result.pools] == [
        ("ubuntu22.04", "535", f"535-{K}-ubuntu22.04", ("c",), False),
        ("ubuntu22.04", "550", f"550-{K}-ubuntu22.04", ("a", "b"), True),
        ("ubuntu24.04", "550", f"550-{K}-ubuntu24.04", ("d",), False),
    ]
    assert [pool.names for pool in result.missing] == [("c",), ("d",)]
    assert (result.missing_nodes, result.ok, result.mode) == (2, False, Mode.LAB)
    assert all(pool.image is None and pool.resource is None for pool in result.pools)


def test_every_pool_ready_is_ok() -> None:
    tags = frozenset({f"550-{K}-ubuntu22.04", f"535-{K}-ubuntu22.04"})
    result = preflight.check(LAB, [gpu("a"), gpu("b", "535")], K, tags)
    assert result.ok and not result.missing and len(result.pools) == 2


def test_a_node_without_a_tag_is_invalid_as_audit_says() -> None:
    bad = gpu("x", os_id="Ubuntu\n::warning::x")
    result = preflight.check(LAB, [bad, gpu("a")], K, frozenset({f"550-{K}-ubuntu22.04"}))
    [finding] = result.invalid
    assert finding.status is Status.INVALID and finding.node == "x"
    assert finding.line() == (
        "x INVALID label feature.node.kubernetes.io/system-os_release.ID='Ubuntu\\n::warning::x' is not an "
        "os-release ID (lowercase a-z, 0-9, . _ -)"
    )
    assert [pool.names for pool in result.pools] == [("a",)]
    assert not result.ok


def cluster_policy(**driver: str) -> Contract:
    return operator.contract([resource(policy(**driver))], NEWEST)


def test_cluster_policy_gives_its_version_to_every_node() -> None:
    contract = cluster_policy(version="570")
    result = preflight.check(contract, [gpu("a", "535"), gpu("b", "550")], K, frozenset())
    [pool] = result.pools
    assert (pool.driver, pool.names, pool.resource and pool.resource.ref) == (
        "570",
        ("a", "b"),
        "ClusterPolicy/cluster-policy",
    )
    assert pool.image == f"nvcr.io/nvidia/driver:570-{K}-ubuntu22.04"
    assert pool.tag == f"570-{K}-ubuntu22.04"
    assert (result.mode, result.notes) == (Mode.CLUSTER_POLICY, ())


def test_cluster_policy_on_two_os_versions_and_one_kernel_is_a_fleet_problem() -> None:
    # Ubuntu 22.04's HWE kernel is 24.04's: on K the operator's kernel map sees one kernel, two OSes.
    nodes = [gpu("a"), gpu("b", version="24.04")]
    result = preflight.check(
        cluster_policy(), nodes, K, frozenset({f"550-{K}-ubuntu22.04", f"550-{K}-ubuntu24.04"})
    )
    assert not result.missing and not result.invalid
    assert any(
        f"kernel {K} runs on a (ubuntu22.04) and on b (ubuntu24.04)" in n.message for n in result.notes
    )
    assert not result.ok


def nvidia_drivers(*documents: dict[str, object], release: str | None = None) -> Contract:
    rule = NEWEST if release is None else RULES.for_version(release)
    found = None if release is None else os_tags.parse_release(release)
    return operator.contract([resource(document) for document in documents], rule, found)


def test_nvidia_driver_pools_each_with_its_resource() -> None:
    contract = nvidia_drivers(
        nvd("ubuntu", {OS_ID: "ubuntu"}, version="535"), nvd("rhel", {OS_ID: "rhel"}, version="550")
    )
    nodes = [gpu("u0", "535"), gpu("r0", "535", "rhel", "9.4"), gpu("u1", "535")]
    result = preflight.check(contract, nodes, K, frozenset({f"535-{K}-ubuntu22.04"}))
    assert [(p.os_tag, p.driver, p.resource and p.resource.ref, p.names, p.ready) for p in result.pools] == [
        ("rhel9", "550", "NVIDIADriver/rhel", ("r0",), False),
        ("ubuntu22.04", "535", "NVIDIADriver/ubuntu", ("u0", "u1"), True),
    ]
    assert result.missing[0].wanted == f"nvcr.io/nvidia/driver:550-{K}-rhel9"


def test_an_nvidia_driver_that_selects_by_kernel_is_chosen_again_on_the_new_kernel() -> None:
    contract = nvidia_drivers(
        nvd("old-kernel", {KERNEL: "5.15.0-119-generic"}, version="535"),
        nvd("new-kernel", {KERNEL: K}, version="570"),
    )
    result = preflight.check(contract, [gpu("a", "535")], K, frozenset())
    [pool] = result.pools
    assert (pool.resource and pool.resource.name, pool.tag) == ("new-kernel", f"570-{K}-ubuntu22.04")


def test_no_nvidia_driver_selects_the_node_on_the_new_kernel() -> None:
    contract = nvidia_drivers(nvd("old-kernel", {KERNEL: "5.15.0-119-generic"}, version="535"))
    [finding] = preflight.check(contract, [gpu("a", "535")], K, frozenset()).invalid
    assert finding.detail == "no NVIDIADriver selects it: the operator deploys no driver there"


@pytest.mark.parametrize(
    ("release", "os_tag"),
    [("v25.10.1", "rhel9.4"), ("v26.3.0", "rhel9.4"), ("v26.7.0", "rhel9"), (None, "rhel9")],
)
def test_the_os_tag_rule_of_the_operator_release(release: str | None, os_tag: str) -> None:
    contract = nvidia_drivers(nvd("rhel", {OS_ID: "rhel"}), release=release)
    [pool] = preflight.check(contract, [gpu("r", os_id="rhel", version="9.4")], K, frozenset()).pools
    assert (pool.os_tag, pool.tag) == (os_tag, f"550-{K}-{os_tag}")


def test_a_major_only_pool_skips_a_node_without_the_major_label() -> None:
    # v26.7.0+: an NVIDIADriver pool whose os tag keeps only the major selects nodes by VERSION_ID.major.
    node = gpu("r", os_id="rhel", version="9.4")
    bare = Node(node.name, {k: v for k, v in node.labels.items() if k != MAJOR}, node.origin)
    [finding] = preflight.check(nvidia_drivers(nvd("rhel", {OS_ID: "rhel"})), [bare], K, frozenset()).invalid
    assert f"label {MAJOR} is missing" in finding.detail


def test_the_registry_names_the_reference_it_looked_up() -> None:
    found = driver_images.wants(LAB, preflight.on_kernel([gpu("a")], K))
    result = preflight.decide(found, K, frozenset(), "registry.example.com/nvidia/driver")
    [pool] = result.pools
    assert pool.wanted == f"registry.example.com/nvidia/driver:550-{K}-ubuntu22.04"


def test_on_kernel_moves_the_running_kernel_and_drops_the_next() -> None:
    [moved] = preflight.on_kernel([gpu("a", **{NEXT_KERNEL: "6.9.0-1-generic"})], K)
    assert moved.labels[KERNEL] == K and NEXT_KERNEL not in moved.labels
