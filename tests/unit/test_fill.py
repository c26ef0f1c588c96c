"""gpudrv matrix fill's plan and its output, on plain data (core/audit/fill.py, render/fill.py)."""

from __future__ import annotations

from pathlib import Path

import jsonschema

from reconciler.adapters.files import schemas
from reconciler.core.audit import fill
from reconciler.core.audit.audit import AuditResult, Finding, Status, audit
from reconciler.core.audit.fill import Action, Done, Fill
from reconciler.core.images import tags
from reconciler.core.images.oci_image import Transfer
from reconciler.core.images.registry import parse_repository
from reconciler.render.fill import as_json, as_text, closing, notes, summary
from tests.schemas import output_schema
from tests.unit.test_audit import gpu

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = parse_repository("nvcr.io/nvidia/driver")
TARGET = parse_repository("registry.example.com/nvidia/driver")
NOW = "550-6.8.0-52-generic-ubuntu22.04"
OTHER = "550-5.15.0-119-generic-ubuntu22.04"
LATER = "550-6.8.0-60-generic-ubuntu22.04"
ROW_SCHEMA = schemas.load("matrix-row")


def fleet_result():  # type: ignore[no-untyped-def]
    """a and b run 6.8.0-52 (not in the matrix); c runs 5.15.0-119 (in it) and boots 6.8.0-60 next;
    d runs 6.8.0-52 too and boots 6.8.0-60 next."""
    nodes = [
        gpu("b", kernel="6.8.0-52-generic"),
        gpu("a", kernel="6.8.0-52-generic"),
        gpu("c", **{tags.NEXT_KERNEL: "6.8.0-60-generic"}),
        gpu("d", kernel="6.8.0-52-generic", **{tags.NEXT_KERNEL: "6.8.0-60-generic"}),
    ]
    return audit(nodes, frozenset({OTHER}))


def test_needs_are_the_distinct_missing_images_with_the_nodes_that_lack_them() -> None:
    wanted, refused = fill.needs(fleet_result(), ROW_SCHEMA)
    assert refused == []
    assert [(need.tag, need.nodes, need.next_only) for need in wanted] == [
        (NOW, ("a", "b", "d"), False),
        (LATER, ("c", "d"), True),
    ]
    assert wanted[1].kernels == ("6.8.0-60-generic",)
    assert wanted[0].key == tags.ImageKey("550", "6.8.0-52-generic", "ubuntu22.04")


def test_a_tag_that_is_no_matrix_row_cannot_be_filled() -> None:
    """An operator image tag the matrix's row schema refuses (here an os tag with a capital letter)."""
    finding = Finding("x", Status.MISSING, "550-6.8.0-52-generic-Ubuntu22.04")
    wanted, refused = fill.needs(AuditResult(("x",), (finding,)), ROW_SCHEMA)
    assert wanted == []
    assert [(item.tag, item.nodes) for item in refused] == [("550-6.8.0-52-generic-Ubuntu22.04", ("x",))]
    assert refused[0].reason


def test_plan_adds_what_the_target_has_copies_what_upstream_has_builds_the_rest() -> None:
    wanted, _ = fill.needs(fleet_result(), ROW_SCHEMA)
    extra = fill.Need(tags.ImageKey("570", "6.8.0-52-generic", "ubuntu22.04"), ("e",), False)
    wanted.append(extra)
    in_target = {NOW: True, LATER: False, extra.tag: False}
    assert fill.lacking(wanted, in_target) == [LATER, extra.tag]
    steps = fill.plan(wanted, in_target, {LATER: "sha256:" + "a" * 64, extra.tag: None})
    assert [(step.need.tag, step.action, step.digest) for step in steps] == [
        (NOW, Action.ADD, None),
        (LATER, Action.COPY, "sha256:" + "a" * 64),
        (extra.tag, Action.BUILD, None),
    ]


def planned(dry_run: bool = False) -> Fill:
    wanted, _ = fill.needs(fleet_result(), ROW_SCHEMA)
    extra = fill.Need(tags.ImageKey("570", "6.8.0-52-generic", "ubuntu22.04"), ("e",), False)
    steps = fill.plan([*wanted, extra], {NOW: True}, {LATER: "sha256:" + "b" * 64, extra.tag: None})
    return Fill(UPSTREAM, TARGET, "matrix/support-matrix.csv", 4, tuple(steps), dry_run=dry_run)


def test_a_dry_run_prints_the_plan_and_exits_one_when_something_needs_a_build() -> None:
    result = planned(dry_run=True)
    assert not result.ok
    assert as_text(result).splitlines() == [
        f"ADD {NOW}: {TARGET} has it, the matrix lacks the row; for 3 nodes (a, b, d)",
        f"COPY {LATER} from {UPSTREAM} (sha256:bbbbbbbbbbbb) to {TARGET}, for 2 nodes (c, d), at their next "
        "reboot (kernel 6.8.0-60-generic)",
        f"BUILD 570-6.8.0-52-generic-ubuntu22.04: not in {UPSTREAM} nor {TARGET}; for 1 node (e)",
        "dry run: 1 to copy, 1 row to add, 1 to build; nothing written",
    ]


def carried_out(error: str | None = None) -> Fill:
    result = planned()
    add, copy, _ = result.steps
    sent = Transfer(manifests=3, blobs_sent=4, blobs_present=2, bytes_sent=3 << 20)
    copied = Done(copy, error=error) if error else Done(copy, line=4, added=True, sent=sent)
    return Fill(**{**result.__dict__, "done": (Done(add, line=3, added=True), copied)})


def test_after_the_copies_each_image_says_what_was_sent_and_where_its_row_is() -> None:
    result = carried_out()
    assert result.sent() == Transfer(3, 4, 0, 2, 3 << 20)
    assert as_text(result).splitlines() == [
        f"{TARGET} has {NOW}; added the row at matrix/support-matrix.csv:3",
        f"copied {LATER} to {TARGET} (sha256:bbbbbbbbbbbb; 4 blobs sent (3.0 MiB), 2 already there); "
        "added the row at matrix/support-matrix.csv:4",
        f"BUILD 570-6.8.0-52-generic-ubuntu22.04: not in {UPSTREAM} nor {TARGET}; for 1 node (e)",
        "filled 2 of 3 images; 1 to build; 3.0 MiB sent "
        "(gpudrv matrix fill -o github-matrix: the build plan)",
    ]


def test_a_failed_copy_is_one_line_and_not_ok() -> None:
    result = carried_out(error="registry registry.example.com: refuses pushes\nto nvidia/driver")
    lines = as_text(result).splitlines()
    assert lines[1] == f"FAILED {LATER}: registry registry.example.com: refuses pushes\\nto nvidia/driver"
    assert lines[-1].startswith("filled 1 of 3 images; 1 failed, 1 to build")
    assert not result.ok


def test_everything_filled_is_ok_and_nothing_to_fill_says_so() -> None:
    result = carried_out()
    assert not result.ok  # the BUILD
    done = Fill(**{**result.__dict__, "steps": result.steps[:2]})
    assert done.ok
    empty = Fill(UPSTREAM, TARGET, "m.csv", 3, ())
    assert empty.ok
    assert as_text(empty) == "nothing to fill: 3 GPU nodes, each with its image in the matrix"


def test_json_follows_its_schema_and_names_the_open_images() -> None:
    schema = output_schema("matrix-fill")
    for result in (planned(dry_run=True), carried_out(), carried_out(error="refused")):
        document = as_json(result)
        jsonschema.validate(document, schema)
        assert document["ok"] is result.ok
    document = as_json(carried_out(error="refused"))
    assert [(item["status"], item["tag"]) for item in document["findings"]] == [
        ("FAILED", LATER),
        ("BUILD", "570-6.8.0-52-generic-ubuntu22.04"),
    ]
    assert document["images"][0]["line"] == 3
    copied = as_json(carried_out())["images"][1]
    assert copied["sent"] == {"manifests": 3, "blobs": 4, "mounted": 0, "present": 2, "bytes": 3 << 20}


def test_github_annotations_escape_outside_text() -> None:
    result = carried_out(error="::error::forged\n##[warning]x")
    commands = [note.command() for note in notes(result)]
    assert all("\n" not in command for command in commands)
    assert "forged%0A##\\[warning]x" in commands[0]
    assert closing(result).startswith("filled 1 of 3 images")
    markdown = summary(result).markdown()
    assert "**COPY**" not in markdown and "**FAILED**" in markdown and "**ADDED**" in markdown


def test_nodes_that_pull_from_another_repository_get_a_note() -> None:
    """On a GPU Operator fleet the driver resource names the repository; filling another one does not
    reach the nodes until it names the target."""
    finding = Finding("x", Status.MISSING, NOW, image=f"nvcr.io/nvidia/driver:{NOW}")
    wanted, _ = fill.needs(AuditResult(("x",), (finding,)), ROW_SCHEMA)
    assert wanted[0].pulled_from == ("nvcr.io/nvidia/driver",)
    result = Fill(UPSTREAM, TARGET, "m.csv", 1, tuple(fill.plan(wanted, {NOW: True}, {})), dry_run=True)
    assert result.elsewhere() == ["nvcr.io/nvidia/driver"]
    assert (
        f"note: nodes pull from nvcr.io/nvidia/driver, not {TARGET}: the driver resource must name {TARGET} "
        "for the filled images to reach them"
    ) in as_text(result).splitlines()
    here = Finding("x", Status.MISSING, NOW, image=f"{TARGET}:{NOW}")
    wanted, _ = fill.needs(AuditResult(("x",), (here,)), ROW_SCHEMA)
    assert Fill(UPSTREAM, TARGET, "m.csv", 1, tuple(fill.plan(wanted, {}, {}))).elsewhere() == []
