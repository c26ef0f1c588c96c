"""Where the CUDA gate goes in a lab plan: before the cordon gate, only before the upgrade began."""

from __future__ import annotations

from reconciler.commands.cuda_gates import with_gate
from reconciler.core.contract.driver_images import Want
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.core.cuda.cuda_gate import platform
from reconciler.core.images.tags import Node
from reconciler.core.rollout import rollout
from reconciler.core.upgrades.upgrade import ORDER, Driver, Gate, GateName, NodePlan, State

CUDA = Gate(GateName.CUDA, False, "pod ml/train image reg/cuda:12.8 needs ...")
IMAGE = Gate(GateName.IMAGE, True, "535-... is in matrix/support-matrix.csv on main")
CORDON = Gate(GateName.CORDON, True, "schedulable")
TARGET = Driver("535", "161", "08")


def test_the_gate_goes_before_the_cordon_gate() -> None:
    plan = NodePlan("gpu-a", TARGET, target_tag="535-k-os", gates=(IMAGE, CORDON))
    gated = with_gate(plan, CUDA)
    assert [gate.name for gate in gated.gates] == [GateName.IMAGE, GateName.CUDA, GateName.CORDON]
    assert gated.blocked


def test_a_node_already_under_way_or_left_alone_keeps_its_plan() -> None:
    started = NodePlan(
        "gpu-a", TARGET, target_tag="t", steps=ORDER[3:], state=State.POD_DELETION, gates=(IMAGE,)
    )
    assert with_gate(started, CUDA) == started
    skipped = NodePlan("gpu-a", TARGET, target_tag="t", gates=(Gate(GateName.SKIP, False, "skip label"),))
    assert with_gate(skipped, CUDA) == skipped
    no_tag = NodePlan("gpu-a", TARGET, gates=(Gate(GateName.IMAGE, False, "no target tag: no kernel"),))
    assert with_gate(no_tag, CUDA) == no_tag
    plain = NodePlan("gpu-a", TARGET, target_tag="t", gates=(IMAGE,))
    assert with_gate(plain, None) == plain


def test_the_platform_is_the_nodes_architecture() -> None:
    assert platform({"kubernetes.io/arch": "arm64"}) == "linux/arm64"
    assert platform({}) == "linux/amd64"


def test_the_nodes_a_driver_resource_moves() -> None:
    policy = DriverResource(Kind.CLUSTER_POLICY, "cluster-policy", version="535")
    unset = DriverResource(Kind.CLUSTER_POLICY, "cluster-policy")
    wants = [
        Want(Node("a", {"nvidia.com/cuda.driver-version.major": "570"}), policy),
        Want(Node("b", {"nvidia.com/cuda.driver.major": "535"}), policy),  # already there (the lab's key)
        Want(Node("c", {}), policy),  # no driver label: it moves
        Want(Node("d", {"nvidia.com/cuda.driver.major": "570"}), None),  # no resource selects it
        Want(Node("e", {"nvidia.com/cuda.driver.major": "570"}), unset),  # no version: nothing to move to
    ]
    assert rollout.moving(wants) == {"a": "535", "c": "535"}
