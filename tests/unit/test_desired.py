"""The one desired state (core/contract/desired.py, adapters/desired.py): the precedence rule of the
operator release on plain data, and each source's own error line for a release that is no release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters import desired
from reconciler.core.contract.desired import Candidate, OperatorVersion, VersionFrom, decide
from reconciler.errors import GpudrvError
from tests import fleets

FLAG = Candidate("v26.3.3", "--operator-version")
CONFIG = Candidate("v25.10.1", "gpudrv.yaml")
CHART = Candidate("v25.3.4", "fleet/helmrelease.yaml:14")
LIVE = Candidate("v26.7.0", "the GPU Operator's Deployment in the cluster at https://x")


class Live:
    """The running operator's release, and whether it was asked (asking costs a request)."""

    def __init__(self, found: Candidate | None) -> None:
        self.found, self.asked = found, 0

    def __call__(self) -> Candidate | None:
        self.asked += 1
        return self.found


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ((FLAG, CONFIG, CHART), (FLAG, VersionFrom.FLAG)),
        ((None, CONFIG, CHART), (CONFIG, VersionFrom.CONFIG)),
        ((None, None, CHART), (CHART, VersionFrom.CHART)),
    ],
)
def test_the_first_source_that_names_a_release_wins_and_the_cluster_is_not_asked(
    given: tuple[Candidate | None, ...], wanted: tuple[Candidate, VersionFrom]
) -> None:
    live = Live(LIVE)
    flag, config, chart = given
    assert decide(flag, config, chart, live) == OperatorVersion(wanted[0].value, wanted[1], wanted[0].origin)
    assert live.asked == 0


def test_the_running_operator_decides_only_when_nothing_pins_a_release() -> None:
    live = Live(LIVE)
    assert decide(None, None, None, live) == OperatorVersion(LIVE.value, VersionFrom.LIVE, LIVE.origin)
    assert live.asked == 1
    assert decide(None, None, None, Live(None)) == OperatorVersion(None, VersionFrom.NEWEST)
    assert decide(None, None, None) == OperatorVersion(None, VersionFrom.NEWEST)


def test_provenance_in_words_and_as_json() -> None:
    version = decide(None, None, CHART)
    assert version.text() == "v25.3.4 (chart, fleet/helmrelease.yaml:14)"
    assert version.as_json() == {"version": "v25.3.4", "from": "chart", "origin": "fleet/helmrelease.yaml:14"}
    assert decide(None, None, None).text() == "the newest rule"


def fleet(tmp_path: Path) -> Path:
    fleets.cluster_policy(tmp_path)
    return tmp_path / fleets.FOLDER


def test_a_bad_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    with pytest.raises(GpudrvError, match=r"^--operator-version: .*pass a released version"):
        desired.from_git(fleet(tmp_path), desired.Pins(flag="v99"), quiet=True)


def test_a_bad_operator_version_in_gpudrv_yaml_is_blamed_on_the_file_not_the_flag(tmp_path: Path) -> None:
    with pytest.raises(GpudrvError) as caught:
        desired.from_git(fleet(tmp_path), desired.Pins(config="v99", config_origin="gpudrv.yaml"), quiet=True)
    assert str(caught.value).startswith("gpudrv.yaml: operatorVersion 'v99': ")
    assert "--operator-version" not in str(caught.value)


def test_a_bad_chart_version_is_blamed_on_its_line(tmp_path: Path) -> None:
    fleets.flux(tmp_path)
    release = tmp_path / fleets.FOLDER / "helmrelease.yaml"
    release.write_text(release.read_text().replace("v25.3.4", "v12.0.0"))
    with pytest.raises(GpudrvError) as caught:
        desired.from_git(tmp_path / fleets.FOLDER, desired.Pins(), quiet=True)
    line = next(i for i, text in enumerate(release.read_text().splitlines(), 1) if "v12.0.0" in text)
    assert str(caught.value).startswith(f"{release}:{line}: the chart version v12.0.0: ")
    assert "--operator-version" not in str(caught.value)


def test_lab_mode_reads_no_resource_and_no_release(tmp_path: Path) -> None:
    fleets.lab(tmp_path)
    state = desired.from_git(tmp_path / fleets.FOLDER, desired.Pins(), quiet=True)
    assert (str(state.mode), state.operator, state.declared, state.rendered) == ("lab", False, (), ())
    assert json.loads(json.dumps(state.as_json()))["operator"] == {
        "version": None,
        "from": "newest",
        "origin": None,
    }
