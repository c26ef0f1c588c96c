"""gpudrv's server-side applies are never forced (issue 38 item 3): lab mode's PodDisruptionBudgets as the
operator mode's driver resources. A field another field manager owns makes the API server refuse the
apply (409); its conflicts, read from the Status (causes, else the message), are one line naming each
field and its manager (core/contract/field_owners.py), and in lab mode no budget and no node changes."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters import kube
from reconciler.adapters.cluster import operator_fleet
from reconciler.adapters.cluster.fleet import Fleet
from reconciler.commands import apply, upgrades
from reconciler.core.contract import field_owners
from reconciler.core.contract.field_owners import Conflict
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.core.views.diff import Budget
from reconciler.errors import GpudrvError
from tests.unit.fake_kube import Call, gateway, refused

CAUSE = field_owners.FIELD_MANAGER_CONFLICT

# --- the conflicts in a 409, from plain data ---------------------------------------------------------------


def test_the_causes_name_each_field_and_its_manager() -> None:
    causes = [
        (CAUSE, 'conflict with "helm" using policy/v1', ".spec.minAvailable"),
        (CAUSE, 'conflict with "argocd-controller"', ".spec.selector.matchLabels.app"),
        (CAUSE, 'conflict with "helm" using policy/v1', ".spec.minAvailable"),  # once
        ("FieldValueInvalid", 'conflict with "nobody"', ".spec.other"),  # not an ownership conflict
    ]
    assert field_owners.apply_conflicts(causes, "ignored when the causes say it") == (
        Conflict("spec.minAvailable", "helm"),
        Conflict("spec.selector.matchLabels.app", "argocd-controller"),
    )


def test_a_manager_that_wrote_with_an_update_or_on_a_subresource_is_named_by_its_name() -> None:
    causes = [
        (CAUSE, 'conflict with "kubectl-client-side-apply" using policy/v1 at 2026-01-02T03:04:05Z', ".a"),
        (CAUSE, 'conflict with "kube-controller-manager" with subresource "status"', ".spec.b"),
        (CAUSE, 'conflict with "odd \\"name\\""', ".spec.c"),  # Go's %q escapes a quote
    ]
    assert [c.manager for c in field_owners.apply_conflicts(causes)] == [
        "kubectl-client-side-apply",
        "kube-controller-manager",
        'odd "name"',
    ]


def test_without_causes_the_message_names_them_one_conflict() -> None:
    message = 'Apply failed with 1 conflict: conflict with "helm" using policy/v1: .spec.minAvailable'
    assert field_owners.apply_conflicts([], message) == (Conflict("spec.minAvailable", "helm"),)


def test_without_causes_the_message_names_them_several_per_manager() -> None:
    message = (
        'Apply failed with 3 conflicts: conflicts with "argocd-controller":\n- .spec.maxUnavailable\n'
        'conflicts with "helm" using policy/v1 at 2026-01-02T03:04:05Z:\n- .spec.minAvailable\n'
        "- .spec.selector.matchLabels.app"
    )
    assert field_owners.apply_conflicts([], message) == (
        Conflict("spec.maxUnavailable", "argocd-controller"),
        Conflict("spec.minAvailable", "helm"),
        Conflict("spec.selector.matchLabels.app", "helm"),
    )


@pytest.mark.parametrize("message", ["", "Operation cannot be fulfilled: the object has been modified"])
def test_a_409_that_names_no_owner_has_no_conflicts(message: str) -> None:
    assert field_owners.apply_conflicts([("", "", "")], message) == ()


# --- the line gpudrv prints --------------------------------------------------------------------------------


def test_the_refusal_is_one_line_with_each_manager_and_its_fields() -> None:
    conflicts = (
        Conflict("spec.minAvailable", "helm"),
        Conflict("spec.maxUnavailable", "argocd-controller"),
        Conflict("spec.selector", "helm"),
    )
    assert field_owners.refusal("PDB ml/train", conflicts, "the server's words", "Do this.") == (
        "PDB ml/train: field manager 'helm' owns spec.minAvailable, spec.selector; field manager "
        "'argocd-controller' owns spec.maxUnavailable: gpudrv does not take fields from another "
        "manager (no forced apply). Do this."
    )


def test_a_refusal_without_named_owners_gives_the_servers_words() -> None:
    assert field_owners.refusal("PDB ml/train", (), "Apply failed", "Do this.") == (
        "PDB ml/train: the API server refused gpudrv's server-side apply (Apply failed): gpudrv does not "
        "take fields from another manager (no forced apply). Do this."
    )


def test_owned_by_is_the_phrase_both_modes_say() -> None:
    assert field_owners.owned_by(["helm"]) == "field manager 'helm' owns"
    assert field_owners.owned_by(["helm", "flux"]) == "field managers 'helm', 'flux' own"


# --- the requests, through the gateway (its own parsing of the 409) ----------------------------------------

HELM_OWNS = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'Apply failed with 1 conflict: conflict with "helm" using policy/v1: .spec.minAvailable',
    "reason": "Conflict",
    "details": {
        "name": "train",
        "group": "policy",
        "kind": "poddisruptionbudgets",
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "helm" using policy/v1',
                "field": ".spec.minAvailable",
            }
        ],
    },
    "code": 409,
}


def _live(name: str, min_available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "generation": 1},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "x"}}},
        "status": {"observedGeneration": 1, "currentHealthy": 2, "disruptionsAllowed": 1},
    }


def _cluster(owned: str | None, live: list[dict[str, Any]]) -> tuple[Fleet, list[Call]]:
    """A fleet whose budgets are `live`; an apply to `owned` is refused as helm's."""

    def respond(call: Call) -> Any:
        if call.method == "GET":
            return {"kind": "PodDisruptionBudgetList", "metadata": {}, "items": live}
        if call.path.endswith(f"/{owned}"):
            return refused(409, "Conflict", HELM_OWNS)
        return {}

    connected, fake = gateway(respond)
    return Fleet(connected), fake.calls


def _patches(calls: list[Call]) -> list[tuple[str, dict[str, Any]]]:
    return [(call.path.rsplit("/", 1)[1], call.query) for call in calls if call.method == "PATCH"]


def test_a_budget_is_applied_without_force_and_a_field_helm_owns_is_named() -> None:
    fleet, calls = _cluster("train", [])
    with pytest.raises(GpudrvError) as caught:
        fleet.apply_budget("ml", "train", {"minAvailable": 2}, ref="PDB ml/train", advice="Do this.")
    assert str(caught.value) == (
        "PDB ml/train: field manager 'helm' owns spec.minAvailable: gpudrv does not take fields from "
        "another manager (no forced apply). Do this."
    )
    (call,) = calls  # one request: a refusal is not retried
    assert (call.method, call.path) == ("PATCH", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train")
    assert call.query == {"fieldManager": "gpudrv"} and call.content_type == "application/apply-patch+yaml"
    assert call.body["spec"] == {"minAvailable": 2}


def test_a_dry_run_asks_the_server_to_write_nothing() -> None:
    fleet, calls = _cluster(None, [])
    fleet.apply_budget("ml", "train", {"minAvailable": 2}, ref="PDB ml/train", advice="", dry_run=True)
    assert _patches(calls) == [("train", {"fieldManager": "gpudrv", "dryRun": "All"})]


def test_the_operators_driver_resource_is_refused_in_the_same_words() -> None:
    connected, fake = gateway(lambda call: refused(409, "Conflict", HELM_OWNS))
    driver = DriverResource(Kind.NVIDIA_DRIVER, "pool-a", version="570")
    with pytest.raises(GpudrvError) as caught:
        operator_fleet.apply_resource(connected, driver)
    assert str(caught.value).startswith(
        "NVIDIADriver/pool-a: field manager 'helm' owns spec.minAvailable: gpudrv does not take fields "
        "from another manager (no forced apply). Change it there, or stage the rollout around"
    )
    assert fake.calls[0].query == {"fieldManager": "gpudrv"}


# --- lab mode's apply: every budget checked before any is written ------------------------------------------


def _declared(*names: str) -> upgrades.Declared:
    spec = {"minAvailable": 2, "selector": {"matchLabels": {"app": "x"}}}
    return upgrades.Declared([], [Budget("ml", name, spec, f"w/{name}.yaml:3") for name in names])


def test_lab_apply_writes_no_budget_when_one_is_another_managers() -> None:
    fleet, calls = _cluster("train", [_live("serve", 1), _live("train", 1)])
    with pytest.raises(GpudrvError) as caught:
        apply._sync_budgets(fleet, _declared("serve", "train"))
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(
        "PDB ml/train (minAvailable 1 -> 2; w/train.yaml:3): field manager 'helm' owns spec.minAvailable: "
        "gpudrv does not take fields from another manager (no forced apply)"
    )
    assert line.endswith("the budget and the nodes are left as they were")
    dry = {"fieldManager": "gpudrv", "dryRun": "All"}
    assert _patches(calls) == [("serve", dry), ("train", dry)]  # serve was not written either


def test_lab_apply_writes_its_own_budgets_after_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    """gpudrv's own budgets (one it created, one whose field it took by a forced apply before): the
    server finds no conflict, so each is checked, then written, without force."""
    fleet, calls = _cluster(None, [_live("serve", 1)])  # train is absent: the apply creates it
    apply._sync_budgets(fleet, _declared("serve", "train"))
    dry, real = {"fieldManager": "gpudrv", "dryRun": "All"}, {"fieldManager": "gpudrv"}
    assert _patches(calls) == [("serve", dry), ("train", dry), ("serve", real), ("train", real)]
    assert capsys.readouterr().out.splitlines() == [
        "applied PDB ml/serve: minAvailable 1 -> 2 (server-side, field manager gpudrv)",
        "applied PDB ml/train: absent live (server-side, field manager gpudrv)",
    ]


def test_lab_apply_sends_nothing_for_budgets_as_declared() -> None:
    fleet, calls = _cluster("train", [_live("train", 2)])
    apply._sync_budgets(fleet, _declared("train"))
    assert _patches(calls) == []


def test_the_gateway_keeps_each_cause_whole() -> None:
    connected, _ = gateway(lambda call: refused(409, "Conflict", HELM_OWNS))
    with pytest.raises(kube.Conflict) as caught:
        connected.write("PATCH", kube.BUDGETS, namespace="ml", name="train", body={})
    assert caught.value.cause_details == (
        ("FieldManagerConflict", 'conflict with "helm" using policy/v1', ".spec.minAvailable"),
    )
