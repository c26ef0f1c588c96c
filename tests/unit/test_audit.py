from reconciler.core.audit.audit import Status, audit
from reconciler.core.images import tags
from reconciler.core.images.tags import Node


def gpu(name: str, kernel: str = "5.15.0-119-generic", **extra: str) -> Node:
    labels = {
        tags.GPU_PRESENT: "true",
        tags.DRIVER_MAJOR: "550",
        tags.KERNEL: kernel,
        tags.OS_ID: "ubuntu",
        tags.OS_VERSION_ID: "22.04",
        **extra,
    }
    return Node(name, labels, origin=f"nodes/{name}.yaml:1")


MATRIX = frozenset({"550-5.15.0-119-generic-ubuntu22.04"})


def test_all_in_matrix_is_ok() -> None:
    result = audit([gpu("b"), gpu("a")], MATRIX)
    assert result.ok
    assert result.audited == ("a", "b")


def test_missing_and_invalid_in_node_name_order() -> None:
    broken = Node("c-node", {tags.GPU_PRESENT: "true", tags.DRIVER_MAJOR: "550"})
    result = audit([gpu("z-node", kernel="6.8.0-52-generic"), broken, gpu("a-node")], MATRIX)
    assert [f.line() for f in result.findings] == [
        f"c-node INVALID label {tags.KERNEL} is missing",
        "z-node MISSING 550-6.8.0-52-generic-ubuntu22.04",
    ]
    assert result.findings[1].status is Status.MISSING
    assert result.findings[1].origin == "nodes/z-node.yaml:1"


def test_nodes_without_gpu_present_true_are_not_audited() -> None:
    cpu = Node("cpu", {"kubernetes.io/os": "linux"})
    off = gpu("off", kernel="9.9", **{tags.GPU_PRESENT: "false"})
    result = audit([cpu, off, gpu("a")], MATRIX)
    assert result.ok
    assert result.audited == ("a",)


def test_empty_fleet_is_ok() -> None:
    assert audit([], frozenset()).ok
