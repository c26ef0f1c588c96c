"""The CUDA gate on plain data: the driver's CUDA bounds, the verdict at both ends, the pods' gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.core.cuda import cuda, cuda_gate, cuda_require, cuda_workloads, on_nodes
from reconciler.core.cuda.cuda import Version
from reconciler.core.cuda.cuda_gate import Bounds, BranchTable, ImageRead, PodImage, State
from reconciler.core.images.tags import Node
from reconciler.core.upgrades.budget import Pod
from reconciler.core.upgrades.upgrade import GateName

DATA = Path(__file__).resolve().parents[2] / "reconciler" / "data"
# NVIDIA's CUDA 12.8.1 image's requirement, shortened to two of its brand alternatives.
REQUIRE_128 = (
    "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
)


@pytest.fixture(scope="module")
def table() -> BranchTable:
    return cuda_gate.parse_table(json.loads((DATA / "driver-cuda.json").read_text()))


@pytest.fixture(scope="module")
def compat() -> cuda.Table:
    return cuda.parse_table(json.loads((DATA / "cuda-compat.json").read_text()))


def image(*env: str) -> cuda_require.ImageRequirements:
    return cuda_require.image_requirements(env)


def test_the_table_gives_exact_rows_and_neighbour_bounds(table: BranchTable) -> None:
    assert str(table.bounds(535)) == "CUDA 12.2"
    assert table.bounds(535).exact
    assert str(table.bounds(545)) == "CUDA 12.3 to 12.4"  # its own low, R550's high
    assert str(table.bounds(565)) == "CUDA 12.6 to 12.7"  # R560's low, its own high
    assert str(table.bounds(418)) == "CUDA 11.4 or earlier"
    assert str(table.bounds(700)) == "CUDA 13.3 or later"


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"branches": [{"branch": "x", "source": ["u"]}]},
        {"branches": [{"branch": "550", "cuda_at_least": "12.4"}]},
        {"branches": [{"branch": "550", "cuda_at_least": "twelve", "source": ["u"]}]},
        {"branches": [{"branch": "550", "source": ["u"]}, {"branch": "550", "source": ["u"]}]},
    ],
)
def test_a_malformed_table_is_refused(document: object) -> None:
    with pytest.raises(ValueError):
        cuda_gate.parse_table(document)


def test_a_downgrade_below_the_requirement_breaks(table: BranchTable) -> None:
    target = cuda_gate.driver("535.161.08", table, {})
    assert target is not None
    verdict = cuda_gate.judge(image(REQUIRE_128), target)
    assert verdict.state is State.BREAKS
    assert "cuda>=12.8" in verdict.message and "cuda=12.2" in verdict.message
    assert "driver 535.161.08 (CUDA 12.2" in verdict.message


def test_a_driver_that_reports_enough_passes(table: BranchTable) -> None:
    for version in ("570.86.10", "575", "580.65.06"):
        target = cuda_gate.driver(version, table, {})
        assert target is not None
        assert cuda_gate.judge(image(REQUIRE_128), target).state is State.OK


def test_bounds_that_straddle_the_requirement_are_unknown(table: BranchTable) -> None:
    target = cuda_gate.driver("565", table, {})
    assert target is not None
    verdict = cuda_gate.judge(image("CUDA_VERSION=12.7.0"), target)  # R565 is 12.6 or 12.7
    assert verdict.state is State.UNKNOWN
    assert "cannot confirm" in verdict.message


def test_a_node_showing_the_version_wins_over_the_table(table: BranchTable) -> None:
    labels = {"nvidia.com/cuda.driver-version.major": "565", cuda_gate.CUDA_FULL: "12.7"}
    seen = cuda_gate.observed([("gpu-b", labels), ("gpu-a", labels)])
    assert seen == {565: (Version.parse("12.7"), "gpu-a")}
    target = cuda_gate.driver("565", table, seen)
    assert target is not None
    assert cuda_gate.judge(image("CUDA_VERSION=12.7.0"), target).state is State.OK
    assert "gpu-a" in target.source


def test_disabled_and_requirement_free_images_pass(table: BranchTable) -> None:
    target = cuda_gate.driver("470", table, {})
    assert target is not None
    assert cuda_gate.judge(image(REQUIRE_128, "NVIDIA_DISABLE_REQUIRE=true"), target).state is State.OK
    assert cuda_gate.judge(image("PATH=/usr/bin"), target).state is State.OK


def test_a_malformed_requirement_breaks_on_any_driver(table: BranchTable) -> None:
    target = cuda_gate.driver("610", table, {})
    assert target is not None
    verdict = cuda_gate.judge(image("NVIDIA_REQUIRE_CUDA=cuda>>12"), target)
    assert verdict.state is State.BREAKS
    assert "any driver" in verdict.message


def test_a_branch_must_lead_the_version(table: BranchTable) -> None:
    assert cuda_gate.driver("latest", table, {}) is None
    assert cuda_gate.driver("", table, {}) is None


def gpu_pod(name: str, *images: str, phase: str = "Running") -> Pod:
    return Pod("ml", name, owner_kind="Job", gpu=True, phase=phase, gpu_images=images)


def test_the_gate_names_pod_image_requirement_and_driver(table: BranchTable, compat: cuda.Table) -> None:
    pods = [gpu_pod("train", "reg/cuda:12.8"), gpu_pod("old", "reg/cuda:12.8", phase="Succeeded")]
    found = cuda_gate.pod_images(pods)
    assert found == [PodImage("ml/train", "reg/cuda:12.8")]
    target = cuda_gate.driver("535", table, {})
    assert target is not None
    reads = {"reg/cuda:12.8": ImageRead(image(REQUIRE_128))}
    result = cuda_gate.gate(cuda_gate.checks(found, target, reads, compat), target)
    assert result.name is GateName.CUDA and not result.ok
    assert result.detail.startswith("pod ml/train image reg/cuda:12.8 needs NVIDIA_REQUIRE_CUDA cuda>=12.8")
    assert "driver 535" in result.detail


def test_an_unread_image_refuses_the_driver_unless_allowed(table: BranchTable, compat: cuda.Table) -> None:
    target = cuda_gate.driver("570", table, {})
    assert target is not None
    found = cuda_gate.pod_images([gpu_pod("infer", "private/app:1")])
    reads = {"private/app:1": ImageRead(None, "config not read: registry private answered 401")}
    refused = cuda_gate.gate(cuda_gate.checks(found, target, reads, compat), target)
    assert not refused.ok  # fail closed: an image the gate could not read is no pass
    assert refused.detail.startswith("not verified (pass --allow-unverified-images to let it through): ")
    assert (
        "pod ml/infer image private/app:1 (config not read: registry private answered 401" in refused.detail
    )
    assert not cuda_gate.unchecked([refused])
    allowed = cuda_gate.gate(cuda_gate.checks(found, target, reads, compat), target, allow_unverified=True)
    assert allowed.ok
    assert "0 GPU pod images accept" in allowed.detail
    assert (
        "not verified, let through by --allow-unverified-images: pod ml/infer image private/app:1"
        in allowed.detail
    )
    assert cuda_gate.unchecked([allowed])


def test_a_failed_read_refuses_even_where_the_table_would_pass(
    table: BranchTable, compat: cuda.Table
) -> None:
    known = next(iter(compat.images))
    target = cuda_gate.driver("580", table, {})  # new enough for every CUDA image the table names
    assert target is not None
    found = cuda_gate.pod_images([gpu_pod("ngc", known)])
    failed = {known: ImageRead(None, "config not read: timed out after 10s")}
    checked = cuda_gate.checks(found, target, failed, compat)
    assert checked[0].state is State.OK and checked[0].unverified  # the table's verdict, but unread
    result = cuda_gate.gate(checked, target)
    assert not result.ok and "timed out after 10s" in result.detail
    offline = cuda_gate.checks(found, target, {}, compat)  # --registry-images off: the table, by choice
    assert offline[0].state is State.OK and not offline[0].unverified
    assert cuda_gate.gate(offline, target).ok


def test_offline_an_image_the_table_does_not_know_is_not_verified(
    table: BranchTable, compat: cuda.Table
) -> None:
    target = cuda_gate.driver("570", table, {})
    assert target is not None
    found = cuda_gate.pod_images([gpu_pod("infer", "private/app:1")])
    result = cuda_gate.gate(cuda_gate.checks(found, target, {}, compat), target)
    assert (
        not result.ok
        and "not read: --registry-images off; not in data/cuda-compat.json either" in result.detail
    )


def test_an_unread_ngc_image_falls_back_to_the_table(table: BranchTable, compat: cuda.Table) -> None:
    known = next(iter(compat.images))  # an NGC image the sourced table names
    need = compat.need(known)
    assert need is not None
    low = f"{need.floor.major - 1}"  # a branch under its CUDA family's minimum
    target = cuda_gate.driver(low, table, {})
    assert target is not None
    found = cuda_gate.pod_images([gpu_pod("ngc", known)])
    checked = cuda_gate.checks(found, target, {}, compat)
    assert checked[0].fallback and checked[0].state is State.BREAKS
    assert "data/cuda-compat.json" in checked[0].message
    assert not cuda_gate.gate(checked, target).ok


def test_no_gpu_pod_passes_plainly(table: BranchTable, compat: cuda.Table) -> None:
    target = cuda_gate.driver("550", table, {})
    assert target is not None
    result = cuda_gate.gate(cuda_gate.checks([], target, {}, compat), target)
    assert result.ok and result.detail == "no GPU pod on the node"
    assert Bounds(1, None, None).__str__() == "a CUDA version no source states"


def lab_node(name: str, major: str, minor: str, rev: str, **extra: str) -> Node:
    labels = {"nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor}
    return Node(name, {**labels, "nvidia.com/cuda.driver.rev": rev, **extra})


def test_explain_findings_group_nodes_by_driver(table: BranchTable, compat: cuda.Table) -> None:
    nodes = [
        lab_node("a", "535", "183", "06"),
        lab_node("b", "535", "183", "06"),
        lab_node("c", "570", "86", "10"),
        lab_node("d", "560", "35", "03", **{cuda_gate.CUDA_FULL: "12.7"}),  # GFD shows its CUDA
    ]
    reads = {
        "reg/cuda:12.8": ImageRead(image(REQUIRE_128)),
        "reg/cuda:12.7": ImageRead(image("CUDA_VERSION=12.7.1")),
    }
    found = on_nodes.node_findings(["reg/cuda:12.8", "reg/cuda:12.7"], nodes, reads, (table, compat))
    errors = [(f.image, f.nodes) for f in found if f.severity is cuda.Severity.ERROR]
    assert errors == [("reg/cuda:12.8", ("a", "b")), ("reg/cuda:12.8", ("d",)), ("reg/cuda:12.7", ("a", "b"))]
    assert not [f for f in found if f.severity is cuda.Severity.WARNING]  # d's label settles 12.7
    assert "driver 535.183.06 (CUDA 12.2" in found[0].message and found[0].message.endswith("on a, b")


def test_explain_names_every_image_it_could_not_read(table: BranchTable, compat: cuda.Table) -> None:
    nodes = [lab_node("a", "550", "90", "07")]
    known = next(iter(compat.images))
    reads = {
        "private/app:1": ImageRead(None, "config not read: registry private answered 401"),
        known: ImageRead(None, "config not read: down"),  # the table judges it, and it is named
    }
    found = on_nodes.node_findings(list(reads), nodes, reads, (table, compat))
    assert [(f.severity, f.image) for f in found] == [
        (cuda.Severity.WARNING, "private/app:1"),
        (cuda.Severity.WARNING, known),
    ]
    assert (
        "was not read from its registry (config not read: registry private answered 401" in found[0].message
    )
    assert "not in data/cuda-compat.json either" in found[0].message
    assert found[1].message.endswith("(config not read: down; judged by data/cuda-compat.json)")


# --- the fleet page's rows ----------------------------------------------------------------------


def test_the_fleet_rows_judge_each_pod_now_and_at_its_nodes_move(
    table: BranchTable, compat: cuda.Table
) -> None:
    nodes = [
        lab_node("a", "570", "86", "10"),
        lab_node("b", "570", "86", "10"),
        lab_node("arm", "570", "86", "10", **{cuda_gate.ARCH: "arm64"}),
    ]
    pods = {
        "a": [gpu_pod("train-a", "reg/cuda:12.8")],
        "b": [gpu_pod("train-b", "reg/cuda:12.8"), gpu_pod("done", "reg/cuda:12.8", phase="Succeeded")],
        "arm": [gpu_pod("train-arm", "reg/cuda:12.8")],
    }
    reads = {
        ("reg/cuda:12.8", "linux/amd64"): ImageRead(image(REQUIRE_128)),
        ("reg/cuda:12.8", "linux/arm64"): ImageRead(None, "config not read: no linux/arm64 manifest"),
    }
    rows = cuda_workloads.rows(nodes, pods, reads, {"b": "535"}, (table, compat))
    summary = [(row.state, row.when, row.nodes, row.pods) for row in rows]
    assert summary == [
        (State.BREAKS, "535", ("b",), ("ml/train-b",)),  # the move breaks it: first
        (None, cuda_workloads.NOW, ("arm",), ("ml/train-arm",)),  # its platform's config was not read
        (
            State.OK,
            cuda_workloads.NOW,
            ("a", "b"),
            ("ml/train-a", "ml/train-b"),
        ),  # a finished pod is not judged
    ]
    assert rows[0].driver == "driver 535 (CUDA 12.2, data/driver-cuda.json)"
    assert "unsatisfied condition: cuda>=12.8" in rows[0].message
    assert "no linux/arm64 manifest" in rows[1].message


def test_the_fleet_rows_of_a_node_without_a_driver_or_gpu_pods(
    table: BranchTable, compat: cuda.Table
) -> None:
    bare = Node("bare", {})  # no driver label: nothing to judge now
    pods = {"bare": [gpu_pod("x", "reg/cuda:12.8")], "idle": []}
    reads = {("reg/cuda:12.8", "linux/amd64"): ImageRead(image(REQUIRE_128))}
    assert (
        cuda_workloads.rows([bare, lab_node("idle", "550", "90", "07")], pods, reads, {}, (table, compat))
        == ()
    )
    [moved] = cuda_workloads.rows([bare], pods, reads, {"bare": "575"}, (table, compat))
    assert (moved.state, moved.when) == (State.OK, "575")
