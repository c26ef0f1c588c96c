"""Helm's value merge and the GPU Operator chart's driver rendering, on plain data (issue 29).

tests/helm/test_chart_differential.py holds the same functions to the real `helm template`."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from reconciler.adapters.helm import chart_data
from reconciler.core.contract import helm_chart, helm_values
from reconciler.core.contract.helm_chart import merge, render

CHARTS = chart_data.charts()


def driver(rendered: helm_chart.Rendered) -> dict[str, Any]:
    assert rendered.cluster_policy is not None, rendered.problems
    spec: dict[str, Any] = rendered.cluster_policy["spec"]["driver"]
    return spec


# --------------------------------------------------------------------------
# merge and coalesce
# --------------------------------------------------------------------------


def test_merge_maps_deeply_later_layers_win() -> None:
    a = {"driver": {"version": "550", "upgradePolicy": {"autoUpgrade": True, "drain": {"enable": False}}}}
    b = {"driver": {"upgradePolicy": {"drain": {"enable": True}}, "image": "driver"}}
    assert merge(a, b) == {
        "driver": {
            "version": "550",
            "image": "driver",
            "upgradePolicy": {"autoUpgrade": True, "drain": {"enable": True}},
        }
    }


def test_merge_replaces_what_is_not_two_maps() -> None:
    assert merge({"a": {"b": 1}}, {"a": "x"}) == {"a": "x"}
    assert merge({"a": "x"}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_merge_keeps_a_null_and_does_not_touch_its_inputs() -> None:
    a = {"driver": {"version": "550"}}
    merged = merge(a, {"driver": {"version": None}})
    assert merged == {"driver": {"version": None}}
    assert a == {"driver": {"version": "550"}}
    merged["driver"]["image"] = "x"
    assert a == {"driver": {"version": "550"}}


def test_coalesce_a_null_deletes_the_chart_default() -> None:
    defaults = {"driver": {"version": "580.82.07", "image": "driver"}, "top": 1}
    assert helm_values.coalesce({"driver": {"version": None}, "top": None}, defaults) == {
        "driver": {"image": "driver"}
    }


def test_coalesce_keeps_a_null_with_no_default_and_the_users_side_of_a_type_clash() -> None:
    defaults = {"driver": {"image": "driver", "upgradePolicy": {"a": 1}}}
    values = {"driver": {"extra": None, "image": {"x": 1}, "upgradePolicy": "off"}}
    assert helm_values.coalesce(values, defaults) == {
        "driver": {"extra": None, "image": {"x": 1}, "upgradePolicy": "off"}
    }


def test_a_null_in_a_later_layer_deletes_the_default_even_after_an_earlier_value() -> None:
    r = render(merge({"driver": {"version": "550"}}, {"driver": {"version": None}}), "v25.3.4", CHARTS)
    assert "version" not in driver(r)


# --------------------------------------------------------------------------
# What a value's text becomes
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (550, "550"),
        (550.90, "550.9"),
        (550.0, "550"),
        (1000000, "1e+06"),
        (123456, "123456"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (12345678.5, "1.23456785e+07"),
        (True, "true"),
        (None, ""),
        ("580.82.07", "580.82.07"),
        ({"b": 1, "a": "x"}, "map[a:x b:1]"),
        (["a", 2, None], "[a 2 <nil>]"),
    ],
)
def test_go_text(value: Any, text: str) -> None:
    assert helm_values.go_text(value) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("550", 550),
        ("550.9", 550.9),
        ("580.82.07", "580.82.07"),
        ("1e+06", 1e6),
        ("0x1f", 31),
        ("0755", 493),
        ("1_000", 1000),
        ("yes", True),
        ("Off", False),
        ("~", None),
        ("", None),
        ("25%", "25%"),
        ("2024-01-02", "2024-01-02"),
        ("nvcr.io/nvidia", "nvcr.io/nvidia"),
        ("-1", -1),
        ("+.5", 0.5),
    ],
)
def test_resolve_plain_as_go_yaml_v2(text: str, value: Any) -> None:
    got = helm_values.resolve_plain(text)
    assert got == value
    assert type(got) is type(value)


def test_resolve_plain_special_floats() -> None:
    assert math.isnan(helm_values.resolve_plain(".nan"))
    assert helm_values.resolve_plain("-.inf") == -math.inf


# --------------------------------------------------------------------------
# render: the ClusterPolicy
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "default"),
    [
        ("v25.3.4", "580.82.07"),
        ("v25.10.0", "580.95.05"),
        ("v25.10.1", "580.105.08"),
        ("v26.3.0", "580.126.20"),
        ("v26.3.3", "580.126.20"),
        ("v26.7.0", "595.91.07"),
    ],
)
def test_defaults_render_the_charts_driver(version: str, default: str) -> None:
    r = render({}, version, CHARTS)
    assert r.cluster_policy is not None
    assert r.cluster_policy["apiVersion"] == "nvidia.com/v1"
    assert r.cluster_policy["kind"] == "ClusterPolicy"
    assert r.cluster_policy["metadata"] == {"name": "cluster-policy"}
    assert r.nvidia_driver is None
    assert (r.problems, r.notes) == ((), ())
    d = driver(r)
    assert {k: d[k] for k in ("enabled", "useNvidiaDriverCRD", "usePrecompiled", "version")} == {
        "enabled": True,
        "useNvidiaDriverCRD": False,
        "usePrecompiled": False,
        "version": default,
    }
    assert (d["repository"], d["image"], d["kernelModuleType"]) == ("nvcr.io/nvidia", "driver", "auto")
    assert d["upgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "25%",
        "waitForCompletion": {"timeoutSeconds": 0},
        "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
    }


def test_cluster_policy_version_is_quoted_but_a_float_has_lost_its_zero() -> None:
    assert driver(render({"driver": {"version": 550}}, "v25.3.4", CHARTS))["version"] == "550"
    r = render({"driver": {"version": 550.90}}, "v25.3.4", CHARTS)
    assert driver(r)["version"] == "550.9"
    assert r.problems == ()
    assert any("driver.version is the number 550.9" in n for n in r.notes)


def test_empty_repository_image_version_are_left_out() -> None:
    d = driver(render({"driver": {"repository": "", "image": None, "version": 0}}, "v25.3.4", CHARTS))
    assert not {"repository", "image", "version"} & d.keys()


def test_upgrade_policy_quirks() -> None:
    policy = {
        "maxUnavailable": 0,
        "maxParallelUpgrades": 0,
        "autoUpgrade": False,
        "gpuPodDeletion": {"force": True, "timeoutSeconds": 60},
        "drain": {"enable": True, "podSelector": "app=train"},
        "podDeletion": {"force": False},
    }
    r = render({"driver": {"upgradePolicy": policy}}, "v25.3.4", CHARTS)
    up = driver(r)["upgradePolicy"]
    assert up["maxUnavailable"] == "25%"  # `default "25%"` takes 0 for empty
    assert up["maxParallelUpgrades"] == 0
    assert up["autoUpgrade"] is False
    assert up["podDeletion"] == {"force": True, "timeoutSeconds": 60, "deleteEmptyDir": False}
    assert up["drain"]["podSelector"] == "app=train"
    assert any("maxUnavailable 0 renders as 25%" in n for n in r.notes)
    assert any("podDeletion is ignored" in n for n in r.notes)


def test_max_unavailable_string_zero_is_not_empty_and_retypes() -> None:
    up = driver(render({"driver": {"upgradePolicy": {"maxUnavailable": "0"}}}, "v25.3.4", CHARTS))
    assert up["upgradePolicy"]["maxUnavailable"] == 0


def test_upgrade_policy_null_leaves_the_block_out() -> None:
    assert "upgradePolicy" not in driver(render({"driver": {"upgradePolicy": None}}, "v26.7.0", CHARTS))


def test_a_nil_parent_fails_the_render_like_helm() -> None:
    r = render({"driver": {"upgradePolicy": {"drain": None}}}, "v25.3.4", CHARTS)
    assert (r.cluster_policy, r.nvidia_driver) == (None, None)
    assert r.problems == (
        "helm template fails: templates/clusterpolicy.yaml:227: <.Values.driver.upgradePolicy.drain.enable>:"
        " nil pointer evaluating interface {}.enable",
    )


def test_v26_leaves_the_image_fields_out_of_the_cluster_policy_when_the_crd_is_on() -> None:
    values = {"driver": {"nvidiaDriverCRD": {"enabled": True}, "usePrecompiled": True}}
    d = driver(render(values, "v26.7.0", CHARTS))
    assert set(d) == {"enabled", "useNvidiaDriverCRD", "upgradePolicy"}
    assert set(driver(render(values, "v25.3.4", CHARTS))) >= {
        "repository",
        "image",
        "version",
        "usePrecompiled",
    }


def test_v26_cluster_policy_deploy_cr_off_and_the_validations() -> None:
    assert render({"clusterPolicy": {"deployCR": False}}, "v26.7.0", CHARTS).cluster_policy is None
    r = render({"gpuCluster": {"deployCR": True}}, "v26.7.0", CHARTS)
    assert r.cluster_policy is None
    assert "cannot both be true" in r.problems[0]
    r = render({"gpuCluster": {"deployCR": True}, "clusterPolicy": {"deployCR": False}}, "v26.7.0", CHARTS)
    assert "the NVIDIADriver CRD must be enabled" in r.problems[0]


def test_types_the_crd_refuses() -> None:
    r = render({"driver": {"usePrecompiled": "maybe", "kernelModuleType": "closed"}}, "v25.3.4", CHARTS)
    assert driver(r)["usePrecompiled"] == "maybe"
    assert any(
        'spec.driver.usePrecompiled in body must be of type boolean: "string"' in p for p in r.problems
    )
    assert any('spec.driver.kernelModuleType: Unsupported value: "closed"' in p for p in r.problems)


def test_a_value_that_breaks_the_yaml_is_a_problem() -> None:
    r = render({"driver": {"repository": "registry: x"}}, "v25.3.4", CHARTS)
    assert any("does not read back as one YAML value" in p for p in r.problems)


# --------------------------------------------------------------------------
# render: the default NVIDIADriver
# --------------------------------------------------------------------------

CRD_ON = {"driver": {"nvidiaDriverCRD": {"enabled": True}}}


@pytest.mark.parametrize("version_value", ["550", 550])
def test_v25_default_nvidia_driver_version_renders_as_an_integer(version_value: Any) -> None:
    r = render(merge(CRD_ON, {"driver": {"version": version_value}}), "v25.3.4", CHARTS)
    assert r.nvidia_driver is not None
    assert r.nvidia_driver["spec"]["version"] == 550
    assert type(r.nvidia_driver["spec"]["version"]) is int
    assert r.problems == (
        'NVIDIADriver default: spec.version: Invalid value: "integer": spec.version in body must be of type '
        'string: "integer" (.Values.driver.version, templates/nvidiadriver.yaml:9)',
    )


def test_v25_float_version_and_a_dotted_one() -> None:
    r = render(merge(CRD_ON, {"driver": {"version": 550.90}}), "v25.3.4", CHARTS)
    assert r.nvidia_driver is not None and r.nvidia_driver["spec"]["version"] == 550.9
    assert 'must be of type string: "number"' in r.problems[0]
    r = render(merge(CRD_ON, {"driver": {"version": "580.82.07"}}), "v25.3.4", CHARTS)
    assert r.nvidia_driver is not None and r.nvidia_driver["spec"]["version"] == "580.82.07"
    assert r.problems == ()


def test_v26_default_nvidia_driver_quotes_and_is_the_default() -> None:
    r = render(merge(CRD_ON, {"driver": {"version": 550}}), "v26.7.0", CHARTS)
    assert r.nvidia_driver is not None
    spec = r.nvidia_driver["spec"]
    assert (spec["version"], spec["default"], spec["driverType"]) == ("550", True, "gpu")
    assert "nodeSelector" not in spec
    assert spec["upgradePolicy"]["maxUnavailable"] == "25%"
    assert r.problems == ()


def test_v25_node_selector_and_deploy_default_cr() -> None:
    values = merge(CRD_ON, {"driver": {"nvidiaDriverCRD": {"nodeSelector": {"pool": "a100"}}}})
    r = render(values, "v25.3.4", CHARTS)
    assert r.nvidia_driver is not None
    assert r.nvidia_driver["metadata"] == {"name": "default"}
    assert r.nvidia_driver["apiVersion"] == "nvidia.com/v1alpha1"
    assert r.nvidia_driver["spec"]["nodeSelector"] == {"pool": "a100"}
    assert "default" not in r.nvidia_driver["spec"]
    off = render(
        merge(CRD_ON, {"driver": {"nvidiaDriverCRD": {"deployDefaultCR": False}}}), "v25.3.4", CHARTS
    )
    assert off.nvidia_driver is None
    assert any("renders no default NVIDIADriver" in n for n in off.notes)


def test_v26_driver_disabled_renders_no_nvidia_driver_v25_does() -> None:
    values = merge(CRD_ON, {"driver": {"enabled": False}})
    assert render(values, "v26.7.0", CHARTS).nvidia_driver is None
    assert render(values, "v25.3.4", CHARTS).nvidia_driver is not None


@pytest.mark.parametrize(
    ("version", "default", "used"),
    [("v25.10.1", "580.105.08", "25.10.1"), ("v26.3.3", "580.126.20", "26.3.2")],
)
def test_a_values_file_at_v25_10_1_and_v26_3_3(version: str, default: str, used: str) -> None:
    # A values file with the CRD on and no driver.version: the default NVIDIADriver gets the chart's version.
    values = {"driver": {"nvidiaDriverCRD": {"enabled": True}, "usePrecompiled": True}}
    r = render(values, version, CHARTS)
    assert (r.chart_version, r.problems, r.notes) == (used, (), ())
    assert r.nvidia_driver is not None
    assert r.nvidia_driver["spec"]["version"] == default
    assert r.nvidia_driver["spec"]["usePrecompiled"] is True
    assert driver(r)["version"] == default
    # From v25.10.1 the NVIDIADriver template is guarded by driver.enabled (nvidiadriver.yaml:1).
    off = render(merge(values, {"driver": {"enabled": False}}), version, CHARTS)
    assert off.nvidia_driver is None
    assert driver(off)["enabled"] is False


def test_v25_10_0_has_no_driver_enabled_guard_yet() -> None:
    values = merge(CRD_ON, {"driver": {"enabled": False}})
    r = render(values, "v25.10.0", CHARTS)
    assert r.nvidia_driver is not None and r.nvidia_driver["spec"]["version"] == "580.95.05"


# --------------------------------------------------------------------------
# Chart versions and the data
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "used", "note"),
    [
        ("v25.3.4", "25.3.4", None),
        ("26.7.0", "26.7.0", None),
        ("v25.10.0", "25.10.0", None),
        ("v26.3.1", "26.3.1", None),
        ("v26.3.2", "26.3.2", None),
        ("v26.3.3", "26.3.2", None),  # same_content: differs from v26.3.2 only in lines gpudrv does not read
        ("v26.7.2", "26.7.0", "not modelled: read with v26.7.0's templates, the nearest older"),
        ("v27.0.0", "26.7.0", "not modelled: read with v26.7.0's templates, the nearest older"),
        ("v26.3.4", "26.3.2", "not modelled: read with v26.3.2's templates, the nearest older"),
        ("v25.11.0", "25.10.1", "not modelled: read with v25.10.1's templates, the nearest older"),
        ("v25.3.3", "25.3.4", "not modelled: read with v25.3.4's templates, the oldest known"),
        ("v24.9.0", "25.3.4", "not modelled: read with v25.3.4's templates, the oldest known"),
        ("main", "26.7.0", "not X.Y.Z"),
    ],
)
def test_unmodelled_versions_use_the_nearest_older_chart_and_say_so(
    asked: str, used: str, note: str | None
) -> None:
    r = render({}, asked, CHARTS)
    assert r.chart_version == used
    if note is None:
        assert r.notes == ()
    else:
        assert len(r.notes) == 1 and note in r.notes[0]


def test_parse_charts_refuses_bad_data() -> None:
    with pytest.raises(helm_chart.ChartDataError, match="charts"):
        helm_chart.parse_charts({"charts": []})
    with pytest.raises(helm_chart.ChartDataError, match=r"charts\[0\].version"):
        helm_chart.parse_charts({"charts": [{"version": "x", "source": "s"}]})
    raw = json.loads(chart_data.CHART_FILE.read_text())["charts"][0]
    with pytest.raises(helm_chart.ChartDataError, match=r"charts\[0\].same_content"):
        helm_chart.parse_charts({"charts": [{**raw, "same_content": ["26.3"]}]})


def test_every_default_leaf_has_a_values_line() -> None:
    def leaves(tree: Any, prefix: str = "") -> list[str]:
        if isinstance(tree, dict) and tree:
            return [p for k, v in tree.items() for p in [f"{prefix}{k}", *leaves(v, f"{prefix}{k}.")]]
        return []

    for chart in CHARTS:
        assert set(leaves(chart.defaults)) == set(chart.default_lines), chart.version
