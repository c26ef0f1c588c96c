"""Where a GitOps repository keeps the operator's Helm values and which wins (core/contract/helm_sources.py),
on plain data."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.contract import helm_sources as hs


def _set(name: str, raw: str, string: bool = False, into: dict[str, Any] | None = None) -> dict[str, Any]:
    values = into if into is not None else {}
    hs.set_value(values, name, raw, string=string)
    return values


@pytest.mark.parametrize(
    ("raw", "typed"),
    [
        ("550", 550),
        ("0", 0),
        ("0550", "0550"),  # a leading zero keeps the text (strvals typedVal)
        ("550.90", "550.90"),  # --set parses no floats
        ("TRUE", True),
        ("false", False),
        ("null", None),
        ("-3", -3),
        ("v25.3.4", "v25.3.4"),
    ],
)
def test_set_types_a_value_as_helm_set_does(raw: str, typed: object) -> None:
    assert _set("driver.version", raw) == {"driver": {"version": typed}}


def test_set_string_keeps_the_text() -> None:
    assert _set("driver.version", "550", string=True) == {"driver": {"version": "550"}}


def test_set_makes_maps_and_replaces_a_scalar_on_the_way() -> None:
    values = _set("driver.upgradePolicy.drain.enable", "true", into={"driver": {"upgradePolicy": "x"}})
    assert values == {"driver": {"upgradePolicy": {"drain": {"enable": True}}}}


def test_an_escaped_dot_is_part_of_the_key_and_braces_make_a_list() -> None:
    assert _set("node\\.label.x", "{a,1}") == {"node.label": {"x": ["a", 1]}}


@pytest.mark.parametrize("name", ["tolerations[0].key", "a=b", "a,b"])
def test_list_indexes_and_several_assignments_are_unsupported(name: str) -> None:
    with pytest.raises(hs.Unsupported):
        _set(name, "x")


def test_a_comma_in_a_value_is_another_assignment() -> None:
    with pytest.raises(hs.Unsupported):
        _set("a", "x,b=y")
    assert _set("a", "x\\,y") == {"a": "x,y"}


def _ref(index: int, target: str = "") -> hs.FluxReference:
    return hs.FluxReference(index, "ConfigMap", f"values-{index}", target_path=target)


def test_flux_later_references_win_then_inline_values() -> None:
    first = hs.Resolved(_ref(0), values={"driver": {"version": "535", "usePrecompiled": True}})
    second = hs.Resolved(_ref(1), values={"driver": {"version": "550", "repository": "r"}})
    merged = hs.flux_values([first, second], {"driver": {"repository": "inline"}})
    assert merged == {"driver": {"version": "550", "usePrecompiled": True, "repository": "inline"}}


def test_flux_a_target_path_wins_over_inline_values_too() -> None:
    target = hs.Resolved(_ref(0, "driver.version"), text="570")
    later = hs.Resolved(_ref(1), values={"driver": {"version": "535"}})
    merged = hs.flux_values([target, later], {"driver": {"version": "550"}})
    assert merged == {"driver": {"version": 570}}  # typed as --set types it


def test_flux_a_quoted_target_path_value_is_a_string() -> None:
    merged = hs.flux_values([hs.Resolved(_ref(0, "driver.version"), text='"570"')], {})
    assert merged == {"driver": {"version": "570"}}


def test_flux_a_null_survives_the_merge_to_delete_the_chart_default() -> None:
    merged = hs.flux_values(
        [hs.Resolved(_ref(0), values={"driver": {"repository": "r"}})], {"driver": {"repository": None}}
    )
    assert merged == {"driver": {"repository": None}}


def _release(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "op"},
        "spec": spec,
    }


def test_flux_release_reads_the_chart_and_the_references() -> None:
    release = hs.flux_release(
        _release(
            chart={
                "spec": {
                    "chart": "gpu-operator",
                    "version": "v25.3.4",
                    "sourceRef": {"kind": "HelmRepository"},
                }
            },
            valuesFrom=[{"kind": "Secret", "name": "s", "valuesKey": "k", "optional": True}],
            values={"driver": {"version": "550"}},
        )
    )
    assert (release.chart, release.version, release.source_kind, release.chart_ref) == (
        "gpu-operator",
        "v25.3.4",
        "HelmRepository",
        None,
    )
    assert release.values_from == (hs.FluxReference(0, "Secret", "s", "k", "", True),)
    assert hs.flux_release(_release(chartRef={"kind": "OCIRepository", "name": "o"})).chart_ref == (
        "OCIRepository",
        "o",
    )


def test_flux_a_reference_needs_a_kind_and_a_name() -> None:
    with pytest.raises(hs.SpecError) as caught:
        hs.flux_release(_release(valuesFrom=[{"kind": "Deployment", "name": "x"}]))
    assert caught.value.path == ("spec", "valuesFrom", 0)


def _source(**helm: Any) -> hs.ArgoSource:
    document = {"spec": {"source": {"chart": "gpu-operator", "targetRevision": "v26.7.0", "helm": helm}}}
    return hs.argo_sources(document)[0]


def test_argo_parameters_beat_values_object_which_beats_value_files() -> None:
    source = _source(
        valuesObject={"driver": {"version": "560", "image": "object"}},
        parameters=[{"name": "driver.version", "value": "570", "forceString": True}],
    )
    files = [{"driver": {"version": "535", "image": "file", "repository": "file"}}]
    extra = hs.argo_extra(source, None)
    assert extra is not None
    values, skipped = hs.argo_values([*files, extra], source.parameters)
    assert values == {"driver": {"version": "570", "image": "object", "repository": "file"}}
    assert skipped == ()


def test_argo_values_object_replaces_the_values_string() -> None:
    source = _source(values="driver: {version: '535'}", valuesObject={"driver": {"image": "x"}})
    assert hs.argo_extra(source, {"driver": {"version": "535"}}) == {"driver": {"image": "x"}}
    assert hs.argo_extra(_source(values="a: 1"), {"a": 1}) == {"a": 1}


def test_argo_the_last_parameter_of_a_name_wins_and_set_string_comes_after_set() -> None:
    source = _source(
        parameters=[
            {"name": "driver.version", "value": "535"},
            {"name": "driver.image", "value": "0550", "forceString": True},
            {"name": "driver.version", "value": "550"},
            {"name": "driver.usePrecompiled", "value": True},
        ]
    )
    values, _ = hs.argo_values([], source.parameters)
    assert values == {"driver": {"version": 550, "image": "0550", "usePrecompiled": True}}


def test_argo_a_parameter_gpudrv_cannot_follow_is_skipped_outside_the_driver_keys_only() -> None:
    values, skipped = hs.argo_values(
        [], _source(parameters=[{"name": "tolerations[0].key", "value": "x"}]).parameters
    )
    assert (values, [p.name for p in skipped]) == ({}, ["tolerations[0].key"])
    with pytest.raises(hs.Unsupported):
        hs.argo_values([], _source(parameters=[{"name": "driver.env[0].name", "value": "x"}]).parameters)


def test_argo_sources_reads_multiple_sources_with_refs() -> None:
    document = {
        "spec": {
            "sources": [
                {
                    "chart": "gpu-operator",
                    "repoURL": "https://helm.ngc.nvidia.com/nvidia",
                    "targetRevision": "v25.3.4",
                    "helm": {"valueFiles": ["$values/gpu/values.yaml"], "ignoreMissingValueFiles": True},
                },
                {"repoURL": "https://github.com/acme/fleet.git", "ref": "values"},
            ]
        }
    }
    chart, values = hs.argo_sources(document)
    assert (chart.path, chart.value_files, chart.ignore_missing) == (
        ("spec", "sources", 0),
        ("$values/gpu/values.yaml",),
        True,
    )
    assert (values.ref, values.chart) == ("values", "")


def test_argo_values_must_be_a_string() -> None:
    with pytest.raises(hs.SpecError) as caught:
        _source(values={"driver": {}})
    assert caught.value.path == ("spec", "source", "helm", "values")


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("gpu-operator", True),
        ("./deployments/gpu-operator", True),
        ("oci://nvcr.io/nvidia/gpu-operator", True),
        ("kured", False),
    ],
)
def test_the_operator_chart_by_name(name: str, ours: bool) -> None:
    assert hs.is_operator_chart(name) is ours


@pytest.mark.parametrize(
    ("written", "exact"),
    [("v25.3.4", "v25.3.4"), ("25.3.4", "25.3.4"), ("v25.x", None), (">=25.3.0", None), (None, None)],
)
def test_only_one_release_is_a_pinned_version(written: str | None, exact: str | None) -> None:
    assert hs.exact_release(written) == exact


# --- the chart version a HelmRelease or an Application pins (issue 38) ----------------------------------

LINES = ((24, 9), (25, 3), (25, 10), (26, 3), (26, 7))


@pytest.mark.parametrize(
    ("written", "pinned"),
    [
        ("v25.3.4", "v25.3.4"),
        ("25.10.1", "25.10.1"),
        (" v26.7.0 ", "v26.7.0"),
        ("v99", "v99"),  # a release line gpudrv does not know: pinned, so the rule refuses it
        ("v26.9", "v26.9"),
        ("99.0.0", "99.0.0"),  # one release gpudrv does not know: the same
        ("v25.3", None),  # lines it knows: a range, as before
        ("v26", None),
        (">=25.3.0 <26", None),
        (">=v25.3.0", None),
        ("25.x", None),
        ("*", None),
        ("~25.3", None),
        ("^25", None),
        ("1.2 - 1.4.5", None),
        ("25.3.x || 25.10.x", None),
        ("v25.3.4-rc.1", None),
        (None, None),
        ("", None),
    ],
)
def test_what_a_chart_version_pins(written: str | None, pinned: str | None) -> None:
    assert hs.chart_pin(written, LINES) == (pinned, None)


@pytest.mark.parametrize("written", ["latest", "banana", "stable", "v1.2.3.4", "25.3 ||", ">=", "1.2.3 -"])
def test_what_is_no_chart_version_at_all(written: str) -> None:
    pinned, problem = hs.chart_pin(written, LINES)
    assert (
        pinned is None
        and problem == "is neither a version nor a version range (as Flux and Argo CD read one)"
    )
    assert not hs.is_version_or_range(written)
