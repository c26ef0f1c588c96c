"""The example build workflow gpudrv init writes (reconciler/data/scaffold/build.yml, issue 25): the
build job takes the plan's matrix, matrix values reach scripts only through `env:`, actions are pinned,
the fill's exit code 1 is expected. actionlint and zizmor check the scaffolded file in
test_workflows.py. The build itself needs Docker and NVIDIA's repositories: it does not run here."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.adapters.files import precompiled, scaffold
from reconciler.core.images import build_plan
from reconciler.core.images.tags import ImageKey
from tests.unit.test_workflows import PINNED

TEMPLATE = scaffold.TEMPLATES / "build.yml"
ACTION = "__ACTION__"


def flow() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe").load(TEMPLATE.read_text())
    return loaded


def step(job: str, name: str) -> dict[str, Any]:
    [found] = [step for step in flow()["jobs"][job]["steps"] if step.get("name") == name]
    return found


def run_step(job: str, name: str, cwd: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The step's script in bash as the runner runs it (-eo pipefail)."""
    script = step(job, name)["run"]
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )


def row() -> dict[str, str]:
    recipes = precompiled.recipes()
    key = ImageKey("580", "6.8.0-1015-aws", "ubuntu24.04")
    entries = build_plan.build_entries([key], "registry.example/nvidia/driver", recipes)
    [only] = build_plan.github_matrix(entries)["include"]
    return only


def test_the_build_job_takes_the_plans_matrix_and_is_skipped_when_it_is_empty() -> None:
    jobs = flow()["jobs"]
    assert jobs["plan"]["outputs"] == {
        "matrix": "${{ steps.fill.outputs.matrix }}",
        "builds": "${{ steps.fill.outputs.builds }}",
    }
    build = jobs["build"]
    assert build["needs"] == "plan"
    assert build["if"] == "${{ needs.plan.outputs.builds != '0' }}"
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert build["strategy"]["fail-fast"] is False  # one failed build does not cancel the others
    rows = jobs["rows"]
    assert rows["needs"] == ["plan", "build"]
    assert rows["if"] == "${{ !cancelled() && needs.plan.result == 'success' }}"


def test_matrix_values_reach_scripts_only_through_env_and_name_real_row_fields() -> None:
    fields = set(row())
    for job in flow()["jobs"].values():
        for each in job["steps"]:
            assert "${{" not in each.get("run", ""), f"{each['name']}: a template inside run:"
            for value in each.get("env", {}).values():
                for used in re.findall(r"matrix\.(\w+)", value):
                    assert used in fields, f"{each['name']}: matrix.{used} is not a field of a build row"


def test_the_build_passes_every_build_arg_of_the_row_by_its_upstream_name() -> None:
    build = step("build", "Build and push the image")
    passed = set(re.findall(r"--build-arg (\w+)=", build["run"]))
    upper = {name for name in row() if name.isupper()}
    assert upper <= passed
    assert passed == upper | {"DRIVER_VERSION", "GIT_COMMIT"}
    for name in upper:
        assert build["env"][name] == f"${{{{ matrix.{name} }}}}"
    assert build["env"]["DRIVER_VERSION"] == "${{ steps.version.outputs.driver-version }}"
    assert build["env"]["IMAGE"] == "${{ matrix.image }}"
    assert '--tag "$IMAGE"' in build["run"] and "--push" in build["run"]


def test_the_recipe_is_checked_out_at_the_commit_the_recipe_table_was_read_from() -> None:
    recipes = precompiled.recipes()
    checkout = step("build", "Check out NVIDIA's precompiled recipe")
    assert checkout["with"]["repository"] == recipes.repository
    assert checkout["with"]["ref"] == recipes.commit
    assert f"GIT_COMMIT={recipes.commit}" in step("build", "Build and push the image")["run"]


def test_actions_pinned_permissions_least_secrets_in_one_environment() -> None:
    document = flow()
    assert document["permissions"] == {"contents": "read"}
    text = TEMPLATE.read_text()
    for name, job in document["jobs"].items():
        assert job["environment"] == "registry-push", name
        assert job.get("permissions", {"contents": "read"}) in (
            {"contents": "read"},
            {"contents": "write", "pull-requests": "write"} if name == "rows" else {"contents": "read"},
        )
        for each in job["steps"]:
            uses = each.get("uses")
            if uses is None or uses == ACTION:
                continue
            assert PINNED.match(uses), f"{uses} is not pinned by commit SHA"
            line = next(line for line in text.splitlines() if uses in line)
            assert re.search(r"# v\d+\.\d+\.\d+$", line), line
            if uses.startswith("actions/checkout@"):
                assert each["with"]["persist-credentials"] is False
    assert "secrets.REGISTRY_AUTH" in text and "secrets." not in text.replace("secrets.REGISTRY_AUTH", "")


# --- the fill step's script, run with a stand-in gpudrv --------------------------------------------------


def run_fill(tmp_path: Path, status: int, stdout: str) -> tuple[subprocess.CompletedProcess[str], str]:
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "gpudrv"
    fake.write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$*" > "$RUNNER_TEMP/args"\n'
        'echo "550,5.15.0-119-generic,ubuntu22.04" >> matrix.csv\n'
        f"printf '%s' '{stdout}'\n"
        f"exit {status}\n"
    )
    fake.chmod(0o755)
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "matrix.csv").write_text("driver_branch,kernel,os_tag\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=fleet, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=fleet, check=True)
    temp = tmp_path / "runner"
    temp.mkdir()
    output = tmp_path / "output"
    output.touch()
    environment = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(temp),
        "GITHUB_OUTPUT": str(output),
        "UPSTREAM": "nvcr.io/nvidia/driver",
        "REGISTRY_AUTH_DATA": '{"auths": {}}',
    }
    result = run_step("plan", "Fill from upstream and plan the builds", fleet, environment)
    return result, output.read_text()


@pytest.mark.parametrize("status", [0, 1])
def test_the_fill_exit_1_is_expected_and_the_matrix_becomes_the_job_output(
    tmp_path: Path, status: int
) -> None:
    plan = '{"include": [{"target_tag": "580-6.8.0-1015-aws-ubuntu24.04"}]}'
    result, output = run_fill(tmp_path, status, plan)
    assert result.returncode == 0, result.stderr
    assert output == 'matrix={"include":[{"target_tag":"580-6.8.0-1015-aws-ubuntu24.04"}]}\nbuilds=1\n'
    assert (
        tmp_path / "runner/args"
    ).read_text() == "matrix fill --upstream nvcr.io/nvidia/driver -o github-matrix\n"
    patch = (tmp_path / "runner/fill/fill.patch").read_text()
    assert "+550,5.15.0-119-generic,ubuntu22.04" in patch
    assert not (tmp_path / "runner/registry-auth.json").exists()  # removed when the step ends


def test_the_fill_exit_2_fails_the_step(tmp_path: Path) -> None:
    result, output = run_fill(tmp_path, 2, "")
    assert result.returncode == 2
    assert "::error::gpudrv matrix fill failed (exit 2)" in result.stdout
    assert output == ""


def test_a_fill_that_prints_no_matrix_fails_the_step(tmp_path: Path) -> None:
    result, output = run_fill(tmp_path, 1, "BUILD 580-6.8.0-1015-aws-ubuntu24.04")
    assert result.returncode != 0
    assert output == ""


def test_the_rows_job_applies_the_fill_adds_each_built_tag_then_verifies(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    fake = tools / "gpudrv"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n')
    fake.chmod(0o755)
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "matrix.csv").write_text("driver_branch,kernel,os_tag\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=fleet, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=fleet, check=True)
    (fleet / "matrix.csv").write_text("driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n")
    patch = subprocess.run(["git", "diff"], cwd=fleet, capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "checkout", "-q", "matrix.csv"], cwd=fleet, check=True)
    results = tmp_path / "runner/results"
    (results / "fill-patch").mkdir(parents=True)
    (results / "fill-patch/fill.patch").write_text(patch)
    for tag in ("580-6.8.0-1015-aws-ubuntu24.04", "570-5.15.0-119-generic-ubuntu22.04"):
        (results / f"built-{tag}").mkdir()
        (results / f"built-{tag}/tag").write_text(tag + "\n")
    environment = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "REGISTRY_AUTH_DATA": "",
    }
    result = run_step("rows", "Add the rows and verify them in the registry", fleet, environment)
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        "matrix add --tag 570-5.15.0-119-generic-ubuntu22.04",
        "matrix add --tag 580-6.8.0-1015-aws-ubuntu24.04",
        "matrix verify",
    ]
    staged = subprocess.run(
        ["git", "diff", "--cached"], cwd=fleet, capture_output=True, text=True, check=True
    )
    assert "+550,5.15.0-119-generic,ubuntu22.04" in staged.stdout
