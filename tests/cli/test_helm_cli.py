"""The GPU Operator installed with Helm, offline: a Flux HelmRelease (the bundled fleet), an Argo CD
Application (values string, valuesObject, parameters, valueFiles), gpudrv.yaml's values files, the
chart version as the operator version, and the bad inputs (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_operator_cli import edit, one_line_error
from tests.conftest import run_gpudrv, run_main

FLEET = "clusters/gpu-operator-helm"
RELEASE = f"{FLEET}/helmrelease.yaml"
MATRIX = "matrix/gpu-operator-helm.csv"
TAG_0 = "550-5.14.0-427.13.1.el9_4.x86_64-rhel9.4"


def audit(root: Path, *args: str, fleet: str = FLEET) -> subprocess.CompletedProcess[str]:
    return run_main("audit", "--from", fleet, "--matrix", MATRIX, *args, cwd=root)


def tag(root: Path, *args: str, fleet: str = FLEET) -> str:
    result = run_main("tag", "helm-rhel-0", "--from", fleet, *args, cwd=root)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_helmrelease_fleet_passes_with_the_real_entry_point(lab: Path) -> None:
    result = run_gpudrv("audit", "--from", FLEET, "--matrix", MATRIX, cwd=lab)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"OK: 2 GPU nodes, 3 images in {MATRIX}\n",
        "",
    )


def test_inline_values_win_over_valuesfrom_and_the_origin_is_their_line(lab: Path) -> None:
    data = json.loads(audit(lab, "--operator-version", "v26.7.0", "-o", "json").stdout)
    (finding,) = data["findings"]
    # The ConfigMap says 535, the HelmRelease's values say 550: Flux merges spec.values last.
    assert finding["resource"] == {
        "kind": "ClusterPolicy",
        "name": "cluster-policy",
        "version": "550",
        "origin": f"{RELEASE}:23",
    }
    edit(lab / RELEASE, '  values:\n    driver:\n      version: "550"\n', "")
    assert tag(lab).startswith("535-")  # without it, the ConfigMap's


def test_a_null_in_the_values_deletes_the_chart_default(lab: Path) -> None:
    edit(lab / RELEASE, 'version: "550"', 'version: "550"\n      repository: null')
    result = audit(lab)
    assert result.returncode == 2
    assert "repository not set" in result.stderr, result.stderr


def test_the_chart_version_picks_the_os_tag_rule(lab: Path) -> None:
    assert tag(lab) == TAG_0
    edit(lab / RELEASE, "version: v25.3.4", "version: v26.7.0")
    assert tag(lab) == TAG_0.replace("rhel9.4", "rhel9")
    assert tag(lab, "--operator-version", "v25.10.1") == TAG_0  # the flag wins


def test_gpudrv_yaml_operator_version_wins_with_a_warning(lab: Path) -> None:
    (lab / "gpudrv.yaml").write_text("operatorVersion: v26.7.0\n")
    result = run_main("tag", "helm-rhel-0", "--from", FLEET, cwd=lab)
    assert result.stdout == TAG_0.replace("rhel9.4", "rhel9") + "\n"
    assert result.stderr == (
        "gpudrv: warning: gpudrv.yaml pins operatorVersion v26.7.0, but HelmRelease gpu-operator installs "
        f"chart v25.3.4 ({RELEASE}:14); the os-tag rule of v26.7.0 applies\n"
    )
    (lab / "gpudrv.yaml").write_text("operatorVersion: 25.3.4\n")
    same = run_main("tag", "helm-rhel-0", "--from", FLEET, cwd=lab)
    assert (same.stdout, same.stderr) == (TAG_0 + "\n", "")


def test_the_integer_version_the_crd_refuses_is_a_finding(lab: Path) -> None:
    edit(lab / RELEASE, 'version: "550"', 'version: "550"\n      nvidiaDriverCRD:\n        enabled: true')
    result = audit(lab)
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"fleet: {RELEASE}:23: HelmRelease gpu-operator: NVIDIADriver default")
    assert "must be of type string" in line


def test_a_chart_that_is_not_the_operators_is_ignored_with_a_note(lab: Path) -> None:
    (lab / FLEET / "kured.yaml").write_text(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: kured}\n"
        "spec:\n  chart:\n    spec: {chart: kured, version: 5.6.0}\n"
    )
    result = audit(lab)
    assert (result.returncode, result.stderr) == (
        0,
        f"gpudrv: note: {FLEET}/kured.yaml:1: HelmRelease kured installs chart 'kured', not gpu-operator: "
        "ignored\n",
    )


def test_a_chart_range_is_a_note_and_the_newest_rule(lab: Path) -> None:
    edit(lab / RELEASE, "version: v25.3.4", 'version: ">=v25.3.0"')
    result = run_main("tag", "helm-rhel-0", "--from", FLEET, cwd=lab)
    assert result.stdout == TAG_0.replace("rhel9.4", "rhel9") + "\n"
    assert (
        "the gpu-operator chart version is not pinned here ('>=v25.3.0' is not one release)" in result.stderr
    )


@pytest.mark.parametrize("version", ["latest", "banana"])
def test_a_chart_version_that_is_no_version_is_one_line_at_its_line(lab: Path, version: str) -> None:
    # Flux cannot resolve it either (semver.NewConstraint fails): no rule is read from it (issue 38).
    edit(lab / RELEASE, "version: v25.3.4", f"version: {version}")
    for result in (audit(lab), run_main("tag", "helm-rhel-0", "--from", FLEET, cwd=lab)):
        one_line_error(
            result,
            f"gpudrv: {RELEASE}:14: HelmRelease gpu-operator: chart version {version!r} is neither a version "
            "nor a version range",
        )


@pytest.mark.parametrize("version", ["v99", "99.0.0", "v26.9"])
def test_a_chart_version_of_a_release_gpudrv_does_not_know_is_one_line(lab: Path, version: str) -> None:
    edit(lab / RELEASE, "version: v25.3.4", f"version: {version}")
    what = "release line" if version.count(".") < 2 else "release"
    one_line_error(
        audit(lab),
        f"gpudrv: {RELEASE}:14: the chart version {version}: unknown GPU Operator {what} '{version}'",
    )
    # A stronger pin decides the rule: the chart is rendered with the newest chart gpudrv models, noted.
    result = audit(lab, "--operator-version", "v25.3.4")
    assert result.returncode == 0, result.stderr
    assert "read as v26.7.0" in result.stderr or "is not modelled" in result.stderr


def test_an_oci_tag_latest_is_a_moving_tag_noted_not_refused(lab: Path) -> None:
    release = (lab / RELEASE).read_text()
    chart = release[release.index("  chart:\n") : release.index("  valuesFrom:")]
    (lab / RELEASE).write_text(
        release.replace(chart, "  chartRef: {kind: OCIRepository, name: gpu-operator}\n")
    )
    (lab / FLEET / "oci.yaml").write_text(
        "apiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: OCIRepository\nmetadata: {name: gpu-operator}\n"
        "spec:\n  url: oci://registry.example.com/charts/gpu-operator\n  ref: {tag: latest}\n"
    )
    result = run_main("tag", "helm-rhel-0", "--from", FLEET, cwd=lab)
    assert result.stdout == TAG_0.replace("rhel9.4", "rhel9") + "\n"  # the newest rule, as for a range
    assert "the gpu-operator chart version is not pinned here ('latest' is not one release)" in result.stderr


def test_a_rendered_and_a_declared_cluster_policy_are_two(lab: Path) -> None:
    (lab / FLEET / "cluster-policy.yaml").write_text(
        (lab / "clusters/gpu-operator/cluster-policy.yaml").read_text()
    )
    one_line_error(audit(lab), "acts on one ClusterPolicy and ignores the others")


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (
            ("  values.yaml: |\n", "  values.yaml: |\n    driver: [\n"),
            (f"{FLEET}/values.yaml:", "not a Helm values file"),
        ),
        (
            ("name: gpu-operator-values\n", "name: other\n"),
            (f"{RELEASE}:19:", "valuesFrom ConfigMap gpu-operator-values is not in"),
        ),
        (("data:\n  values.yaml", "data:\n  other.yaml"), (f"{RELEASE}:19:", "has no key 'values.yaml'")),
    ],
)
def test_bad_values_are_one_line(lab: Path, change: tuple[str, str], fragments: tuple[str, ...]) -> None:
    edit(lab / FLEET / "values.yaml", *change)
    one_line_error(audit(lab), *fragments)


def test_an_optional_reference_that_is_missing_is_left_out(lab: Path) -> None:
    edit(lab / FLEET / "values.yaml", "name: gpu-operator-values\n", "name: other\n")
    edit(lab / RELEASE, "name: gpu-operator-values\n", "name: gpu-operator-values\n      optional: true\n")
    result = audit(lab)
    # Without the ConfigMap's usePrecompiled the chart compiles the driver: outside gpudrv's gate.
    note, error = result.stderr.splitlines()
    assert "valuesFrom ConfigMap gpu-operator-values is not in" in note and "optional: left out" in note
    assert result.returncode == 2 and "does not set usePrecompiled: true" in error


# --- Argo CD -------------------------------------------------------------------------------------------

APPLICATION = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: gpu-operator
spec:
  project: default
  sources:
    - repoURL: https://helm.ngc.nvidia.com/nvidia
      chart: gpu-operator
      targetRevision: v25.3.4
      helm:
        valueFiles:
          - $fleet/argo/values.yaml
        values: |
          driver:
            version: "560"
{extra}
    - repoURL: https://github.com/acme/fleet.git
      ref: fleet
  destination:
    server: https://kubernetes.default.svc
    namespace: gpu-operator
"""


@pytest.fixture
def argo(lab: Path) -> Path:
    """A repository whose fleet folder holds an Application with its values file under argo/."""
    subprocess.run(["git", "init", "-q"], cwd=lab, check=True)
    folder = lab / "clusters/argo"
    (folder / "nodes").mkdir(parents=True)
    for node in (lab / FLEET / "nodes").iterdir():
        (folder / "nodes" / node.name).write_text(node.read_text())
    (lab / "argo").mkdir()
    (lab / "argo/values.yaml").write_text('driver:\n  usePrecompiled: true\n  version: "535"\n')
    write_app(lab, "")
    return lab


def write_app(root: Path, extra: str) -> None:
    (root / "clusters/argo/app.yaml").write_text(APPLICATION.format(extra=extra))


def argo_tag(root: Path) -> subprocess.CompletedProcess[str]:
    return run_main("tag", "helm-rhel-0", "--from", "clusters/argo", cwd=root)


def test_argo_the_values_string_wins_over_value_files(argo: Path) -> None:
    result = argo_tag(argo)
    assert (result.stdout, result.stderr) == (TAG_0.replace("550", "560") + "\n", "")


def test_argo_values_object_replaces_the_values_string(argo: Path) -> None:
    write_app(argo, "        valuesObject:\n          driver: {image: mine}")
    result = argo_tag(argo)
    assert result.stdout == TAG_0.replace("550", "535") + "\n"  # values ignored: the file's 535
    assert "helm.values is ignored: valuesObject replaces it" in result.stderr
    data = json.loads(
        run_main("tag", "helm-rhel-0", "--from", "clusters/argo", "-o", "json", cwd=argo).stdout
    )
    assert data["image"].startswith("nvcr.io/nvidia/mine:535-")


def test_argo_parameters_win_over_everything(argo: Path) -> None:
    write_app(
        argo, '        parameters:\n          - {name: driver.version, value: "570", forceString: true}'
    )
    assert argo_tag(argo).stdout == TAG_0.replace("550", "570") + "\n"
    data = json.loads(
        run_main("audit", "--from", "clusters/argo", "--matrix", MATRIX, "-o", "json", cwd=argo).stdout
    )
    assert data["findings"][0]["resource"]["origin"] == "clusters/argo/app.yaml:18"


def test_argo_target_revision_is_the_operator_version(argo: Path) -> None:
    edit(argo / "clusters/argo/app.yaml", "targetRevision: v25.3.4", "targetRevision: v26.7.0")
    assert argo_tag(argo).stdout == TAG_0.replace("550", "560").replace("rhel9.4", "rhel9") + "\n"


@pytest.mark.parametrize(
    ("revision", "fragment"),
    [
        (
            "latest",
            "Application gpu-operator: chart version 'latest' is neither a version nor a version range",
        ),
        (
            "banana",
            "Application gpu-operator: chart version 'banana' is neither a version nor a version range",
        ),
        ("v99", "the chart version v99: unknown GPU Operator release line 'v99'"),
    ],
)
def test_argo_a_target_revision_that_names_no_release_is_one_line(
    argo: Path, revision: str, fragment: str
) -> None:
    # Argo CD refuses the first two itself ("invalid revision"); v99 names releases gpudrv does not know.
    edit(argo / "clusters/argo/app.yaml", "targetRevision: v25.3.4", f"targetRevision: {revision}")
    one_line_error(argo_tag(argo), f"gpudrv: clusters/argo/app.yaml:10: {fragment}")


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("$fleet/argo/values.yaml", "$fleet/../outside.yaml", ("app.yaml:13:", "outside the repository")),
        (
            "$fleet/argo/values.yaml",
            "$fleet/argo/missing.yaml",
            ("app.yaml:13:", "no such file in the repository"),
        ),
        (
            "$fleet/argo/values.yaml",
            "$other/values.yaml",
            ("app.yaml:13:", "no source in spec.sources has ref: other"),
        ),
        ("$fleet/argo/values.yaml", "values-prod.yaml", ("app.yaml:13:", "inside the chart package")),
    ],
)
def test_argo_value_files_outside_or_missing_are_one_line(
    argo: Path, old: str, new: str, fragments: tuple[str, ...]
) -> None:
    edit(argo / "clusters/argo/app.yaml", old, new)
    one_line_error(argo_tag(argo), *fragments)


def test_argo_ignore_missing_value_files(argo: Path) -> None:
    edit(argo / "clusters/argo/app.yaml", "$fleet/argo/values.yaml", "$fleet/argo/missing.yaml")
    write = (
        (argo / "clusters/argo/app.yaml")
        .read_text()
        .replace("        values: |", "        ignoreMissingValueFiles: true\n        values: |")
    )
    (argo / "clusters/argo/app.yaml").write_text(write)
    one_line_error(argo_tag(argo), "does not set usePrecompiled: true")  # the file with it was left out


def test_argo_a_ref_to_another_repository_is_refused(argo: Path) -> None:
    subprocess.run(["git", "remote", "add", "origin", "git@github.com:acme/other.git"], cwd=argo, check=True)
    one_line_error(argo_tag(argo), "ref fleet is https://github.com/acme/fleet.git, not this repository")
    subprocess.run(
        ["git", "remote", "set-url", "origin", "git@github.com:acme/fleet.git"], cwd=argo, check=True
    )
    assert argo_tag(argo).returncode == 0


# --- gpudrv.yaml's helm: ---------------------------------------------------------------------------------


def test_gpudrv_yaml_values_files_and_chart_version(lab: Path) -> None:
    (lab / "values").mkdir()
    (lab / "values/base.yaml").write_text('driver:\n  usePrecompiled: true\n  version: "535"\n')
    (lab / "values/prod.yaml").write_text('driver:\n  version: "550"\n')
    (lab / "gpudrv.yaml").write_text(
        "helm:\n  valuesFiles: [values/base.yaml, values/prod.yaml]\n  chartVersion: v26.7.0\n"
    )
    (lab / "plain").mkdir()
    (lab / "plain/node.yaml").write_text((lab / FLEET / "nodes/helm-rhel-0.yaml").read_text())
    result = run_main("tag", "helm-rhel-0", "--from", "plain", cwd=lab)
    assert (result.stdout, result.stderr) == (TAG_0.replace("rhel9.4", "rhel9") + "\n", "")
    (lab / "values/prod.yaml").write_text("driver: [\n")
    one_line_error(
        run_main("tag", "helm-rhel-0", "--from", "plain", cwd=lab), "values/prod.yaml:", "not a Helm"
    )
