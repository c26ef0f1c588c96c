"""The pure half of gpudrv init (reconciler/core/views/scaffold.py): pins, Node manifests, matrix rows."""

from __future__ import annotations

from reconciler.adapters.files.operator_contract import rules
from reconciler.core.contract.driver_images import Want
from reconciler.core.contract.operator import Contract, DriverResource, Kind, Mode
from reconciler.core.images.tags import ImageKey, Node
from reconciler.core.views import scaffold

KERNEL = "feature.node.kubernetes.io/kernel-version.full"
COMMIT = "a" * 40


def test_a_pin_is_owner_name_and_a_full_commit() -> None:
    pin = scaffold.parse_pin(f"acme/gpudrv@{COMMIT}", "0.1.0")
    assert pin == scaffold.Pin("acme/gpudrv", COMMIT, "0.1.0")
    assert (pin.action, pin.url) == (f"acme/gpudrv@{COMMIT}", "https://github.com/acme/gpudrv")
    for text in ("acme/gpudrv@v0.1.0", f"acme@{COMMIT}", f"acme/gpudrv@{COMMIT[:12]}", f"a/b/c@{COMMIT}"):
        assert scaffold.parse_pin(text, "0.1.0") is None


def test_the_row_of_an_image_is_cut_around_the_nodes_kernel() -> None:
    node = Node("n", {KERNEL: "5.14.0-427.13.1.el9_4.x86_64"})
    want = Want(node, tag="550-5.14.0-427.13.1.el9_4.x86_64-rhel9")
    assert scaffold.key_of(want) == ImageKey("550", "5.14.0-427.13.1.el9_4.x86_64", "rhel9")
    assert scaffold.key_of(Want(node, reason="no tag")) is None
    assert scaffold.key_of(Want(node, tag="550-5.14.0-427.13.1.el9_4.x86_64")) is None  # a digest: no os tag


def test_a_node_manifest_keeps_the_labels_gpudrv_reads_and_the_pool_keys() -> None:
    labels = {
        "kubernetes.io/hostname": "n",
        "pool": "a",
        "nvidia.com/gpu.present": "true",
        KERNEL: "6.8.0-45-generic",
    }
    assert scaffold.node_document(Node("n", labels), ["pool"]) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n",
            "labels": {"nvidia.com/gpu.present": "true", KERNEL: "6.8.0-45-generic", "pool": "a"},
        },
    }


def test_the_matrix_has_its_header_and_each_row_once_in_order() -> None:
    rows = [
        ImageKey("550", "6.8.0-45-generic", "ubuntu24.04"),
        ImageKey("535", "5.15.0-107-generic", "ubuntu22.04"),
    ]
    assert scaffold.matrix_text([*rows, rows[0]]) == (
        "driver_branch,kernel,os_tag\n535,5.15.0-107-generic,ubuntu22.04\n550,6.8.0-45-generic,ubuntu24.04\n"
    )
    assert scaffold.matrix_text([]) == "driver_branch,kernel,os_tag\n"


def test_a_live_fleet_writes_the_resources_in_force_and_a_policys_driver_only() -> None:
    policy = DriverResource(
        Kind.CLUSTER_POLICY,
        "cluster-policy",
        use_driver_crd=True,
        spec={"driver": {"useNvidiaDriverCRD": True}, "toolkit": {"enabled": True}},
    )
    driver = DriverResource(
        Kind.NVIDIA_DRIVER,
        "ubuntu",
        version="550",
        precompiled=True,
        node_selector={"pool": "a"},
        spec={"version": "550", "usePrecompiled": True, "nodeSelector": {"pool": "a"}},
    )
    contract = Contract(Mode.NVIDIA_DRIVER, rules().newest, (26, 3, 3), policy, (driver,))
    node = Node("n1", {KERNEL: "6.8.0-45-generic", "pool": "a", "other": "x"})
    fleet = scaffold.live(
        contract, [Want(node, driver, tag="550-6.8.0-45-generic-ubuntu24.04")], "the cluster"
    )
    assert [item.path for item in fleet.documents] == [
        "cluster-policy.yaml",
        "nvidiadriver-ubuntu.yaml",
        "nodes/n1.yaml",
    ]
    assert fleet.documents[0].document["spec"] == {"driver": {"useNvidiaDriverCRD": True}}
    assert fleet.documents[2].document["metadata"]["labels"] == {KERNEL: "6.8.0-45-generic", "pool": "a"}
    assert fleet.rows == (ImageKey("550", "6.8.0-45-generic", "ubuntu24.04"),)
    assert fleet.operator_version == "v26.3.3"
