"""Which declared fields differ from the live resource, and which other field managers own them."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.cluster.driver_resources import Change, refuse_owned
from reconciler.core.contract import field_owners
from reconciler.core.contract.field_owners import Difference, Owned
from reconciler.core.contract.operator import DriverResource, Kind
from reconciler.errors import GpudrvError


def managed(manager: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"manager": manager, "operation": "Apply", "fieldsV1": fields, **extra}


VERSION_OWNED = {"f:spec": {"f:driver": {"f:version": {}, "f:usePrecompiled": {}}}}


def test_equal_specs_have_no_difference_even_with_defaults_the_cluster_added() -> None:
    desired = {"driver": {"version": "550", "usePrecompiled": True}}
    live = {"driver": {"version": "550", "usePrecompiled": True, "imagePullPolicy": "IfNotPresent"}}
    assert field_owners.differences(desired, live) == []


def test_a_changed_leaf_is_one_difference_with_both_values() -> None:
    found = field_owners.differences(
        {"driver": {"version": "570"}}, {"driver": {"version": "550"}}, ("spec",)
    )
    assert found == [Difference(("spec", "driver", "version"), "570", "550")]
    assert found[0].dotted == "spec.driver.version"


def test_a_missing_field_and_a_type_change_are_differences() -> None:
    found = field_owners.differences({"a": 1, "b": True, "c": [1, 2]}, {"b": 1, "c": [1, 2]})
    assert [(d.path, d.live) for d in found] == [(("a",), None), (("b",), 1)]


def test_lists_compare_whole_and_numbers_as_json_numbers() -> None:
    assert field_owners.differences({"l": [{"x": 1}]}, {"l": [{"x": 1.0}]}) == []
    assert len(field_owners.differences({"l": [1, 2]}, {"l": [2, 1]})) == 1
    assert field_owners.differences({"m": {"k": "v"}}, {"m": "not a map"})[0].path == ("m",)


def test_owners_are_the_other_managers_of_the_path_and_not_gpudrv_or_status() -> None:
    fields = [
        managed("helm", VERSION_OWNED, operation="Update"),
        managed("gpudrv", VERSION_OWNED),
        managed("gpu-operator", {"f:status": {"f:state": {}}}, subresource="status"),
        managed("argocd-controller", {"f:spec": {"f:driver": {"f:repository": {}}}}),
    ]
    assert field_owners.owners(fields, ("spec", "driver", "version")) == ("helm",)
    assert field_owners.owners(fields, ("spec", "driver", "repository")) == ("argocd-controller",)
    assert field_owners.owners(fields, ("spec", "driver", "image")) == ()


def test_owning_a_list_or_a_map_owns_what_is_under_it() -> None:
    fields = [managed("kustomize-controller", {"f:spec": {"f:driver": {"f:env": {}}}})]
    assert field_owners.owners(fields, ("spec", "driver", "env")) == ("kustomize-controller",)


def test_malformed_managed_fields_own_nothing() -> None:
    for junk in (None, "x", [1, None, {"manager": 3}, {"manager": "m", "fieldsV1": "no"}]):
        assert field_owners.owners(junk, ("spec", "driver", "version")) == ()


def test_owned_by_others_splits_what_gpudrv_may_apply_from_what_it_must_not() -> None:
    desired = {"driver": {"version": "570", "repository": "r2"}}
    live = {"driver": {"version": "550", "repository": "r1"}}
    fields = [
        managed("helm", VERSION_OWNED),
        managed("gpudrv", {"f:spec": {"f:driver": {"f:repository": {}}}}),
    ]
    found, owned = field_owners.owned_by_others(desired, live, fields)
    assert [d.dotted for d in found] == ["spec.driver.version", "spec.driver.repository"]
    assert [(o.difference.dotted, o.managers) for o in owned] == [("spec.driver.version", ("helm",))]
    assert field_owners.manager_list(owned) == ("helm",)


def test_same_keeps_booleans_apart_from_numbers() -> None:
    assert not field_owners.same(True, 1)
    assert not field_owners.same(0, False)
    assert field_owners.same({"a": [True]}, {"a": [True]})
    assert not field_owners.same("1", 1)


# --- what operator-mode apply says about them (adapters/cluster/driver_resources.py) -------------------

DRIVER = DriverResource(Kind.NVIDIA_DRIVER, "pool-a", version="570", origin="fleet/driver.yaml:3")
BUMP = Difference(("spec", "version"), "570", "550")


def test_a_change_says_what_it_changes_in_a_few_words() -> None:
    assert Change(DRIVER, True, (BUMP,), ()).what() == "spec.version '550' -> '570'"
    assert Change(DRIVER, False, (), ()).what() == "not in the cluster yet"
    many = tuple(Difference(("spec", f"f{i}"), i, None) for i in range(5))
    assert Change(DRIVER, True, many, ()).what().endswith("and 2 more")
    assert not Change(DRIVER, True, (), ()).needed and Change(DRIVER, False, (), ()).needed


def test_a_field_another_manager_owns_is_refused_in_one_line_naming_it() -> None:
    owned = Change(DRIVER, True, (BUMP,), (Owned(BUMP, ("helm", "argocd-controller")),))
    with pytest.raises(GpudrvError) as caught:
        refuse_owned([Change(DRIVER, True, (), ()), owned])
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(
        "NVIDIADriver/pool-a: spec.version is '550' in the cluster and '570' in fleet/driver.yaml:3, "
        "and field managers 'helm', 'argocd-controller' own it"
    )
    assert "gpudrv apply --hold before it, gpudrv apply --await-sync after it" in text
    refuse_owned([Change(DRIVER, True, (BUMP,), ())])  # gpudrv's own fields: no refusal
