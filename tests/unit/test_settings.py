"""The settings types (commands/settings.py, executor.Options): the command line derived from a value
parses back to that value through gpudrv's own parser, the parsers' flags are the types' flags, and
the gpudrv.yaml keys they name are the schema's.

The bug this guards (issue 23): `reconcile --apply` built its child `gpudrv apply` by hand and dropped
--request-timeout and a pinned --operator-version; a drain timeout of 1000000s became `1e+06`, which
apply refused; a relative --kubeconfig was read in the child's own working tree.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import arguments, cli
from reconciler.adapters import kube
from reconciler.adapters.files import config
from reconciler.commands import reconcile
from reconciler.commands.settings import ApplySettings, ReconcileSettings
from reconciler.core.base import flags, label_selector
from reconciler.core.lab import executor
from reconciler.core.lab.executor import Installer

REPO = Path(__file__).resolve().parents[2]
# Every field away from its default (the three engine switches exclude each other: one at a time).
UPGRADE = executor.Options(max_parallel=3, drain_timeout=1000000.0, installer=Installer.WAIT,
                           install_timeout=0.00001, force=True)  # fmt: skip
EVERYTHING = ApplySettings(
    from_dir=Path("-fleet/prod"),  # a value that starts with "-" stays a value
    matrix=Path("matrix/other.csv"),
    merged_ref="-refs/x",
    dry_run=True,
    upgrade=UPGRADE,
    canary=2,
    batch=5,
    hold=True,
    selector=label_selector.parse("pool=a100,zone in (a,b),!spare,gen>3"),
    allow_empty=True,
    operator_version="v25.3.4",
    registry_images="off",
    allow_unverified_images=True,
)
CONNECTION = kube.Options(kubeconfig="-kube/config", context="ctx=1", request_timeout=0.1 + 0.2)


@pytest.fixture(autouse=True)
def _no_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No gpudrv.yaml found: what a round trip gives back is the command line's alone."""
    monkeypatch.delenv(config.ENVIRONMENT, raising=False)
    monkeypatch.chdir(tmp_path)


def parsed(*line: str) -> argparse.Namespace:
    args = cli.build_parser().parse_args(line)
    arguments.refuse_empty(args)
    arguments.configure(args)
    return args


def apply_back(value: ApplySettings) -> ApplySettings:
    return arguments.apply_settings(parsed("apply", *flags.argv(value)))


def non_default(value: Any) -> dict[str, Any]:
    return {
        item.name: getattr(value, item.name)
        for item in dataclasses.fields(value)
        if item.default is dataclasses.MISSING or getattr(value, item.name) != item.default
    }


# --- apply: the round trip ---------------------------------------------------------------------------


def test_every_field_changed_comes_back() -> None:
    assert set(non_default(EVERYTHING)) == {f.name for f in dataclasses.fields(ApplySettings)} - {
        "release",
        "await_sync",
    }
    assert apply_back(EVERYTHING) == EVERYTHING


@pytest.mark.parametrize("engine", ["release", "hold", "await_sync", None])
def test_each_engine_switch_comes_back(engine: str | None) -> None:
    switches = {name: name == engine for name in ("release", "hold", "await_sync")}
    value = dataclasses.replace(EVERYTHING, **switches)
    assert apply_back(value) == value


WITH_DEFAULTS = [f for f in dataclasses.fields(ApplySettings) if f.default is not dataclasses.MISSING]


@pytest.mark.parametrize("item", WITH_DEFAULTS, ids=[f.name for f in WITH_DEFAULTS])
def test_each_field_at_its_default_comes_back(item: dataclasses.Field[Any]) -> None:
    value = dataclasses.replace(EVERYTHING, **{item.name: item.default})
    assert apply_back(value) == value


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(executor.Options)])
def test_each_upgrade_field_at_its_default_comes_back(name: str) -> None:
    default = executor.Options()
    value = dataclasses.replace(
        EVERYTHING, upgrade=dataclasses.replace(UPGRADE, **{name: getattr(default, name)})
    )
    assert apply_back(value) == value


def test_the_defaults_are_not_written() -> None:
    least = ApplySettings(from_dir=Path("clusters/prod"), matrix=Path("m.csv"))
    assert flags.argv(least) == ["--from=clusters/prod", "--matrix=m.csv"]
    assert apply_back(least) == least


durations = st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(drain=durations, timeout=durations, parallel=st.integers(1, 10**12), canary=st.integers(1, 10**6))
def test_numbers_come_back(drain: float, timeout: float, parallel: int, canary: int) -> None:
    upgrade = executor.Options(max_parallel=parallel, drain_timeout=drain, install_timeout=timeout)
    value = ApplySettings(from_dir=Path("f"), matrix=Path("m.csv"), upgrade=upgrade, canary=canary)
    assert apply_back(value) == value


def test_connection_comes_back_on_apply() -> None:
    args = parsed("apply", *flags.argv(EVERYTHING), *flags.argv(CONNECTION))
    assert flags.build(kube.Options, vars(args)) == CONNECTION
    never = kube.Options(request_timeout=0.0)  # 0: never, not the default
    assert flags.build(kube.Options, vars(parsed("apply", "--from=f", *flags.argv(never)))) == never


def test_an_unbounded_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parsed("apply", "--from=f", "--drain-timeout=" + "9" * 400)
    assert exit_.value.code == 2
    assert "too long" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a duration"):
        flags.argv(dataclasses.replace(EVERYTHING, upgrade=executor.Options(drain_timeout=float("inf"))))


# --- reconcile: its own round trip, and the apply it starts -------------------------------------------

LOOP = ReconcileSettings(
    repo="-git@host:fleet.git",
    branch="release",
    interval=5.0,
    repo_matrix="m/x.csv",
    repo_fleet="clusters/a",
    pinned_operator_version="v26.3.3",
    workdir=Path("/w"),
    git_token_file=Path("token"),
    git_username="bot",
    git_ssh_key_file=Path("key"),
    git_known_hosts_file=Path("hosts"),
    resync=30.0,
    listen="127.0.0.1:9",
    sync_secret_file=Path("webhook-secret"),
    sync_token_file=Path("token"),
    event_refresh=60.0,
    connection=CONNECTION,
    no_leader_election=True,
    lease_name="l",
    lease_namespace="ns",
    identity="me",
    lease_duration=20.0,
    renew_deadline=12.0,
    retry_period=3.0,
    apply=True,
    upgrade=dataclasses.replace(UPGRADE, force=False),  # reconcile passes on all but --force
    once=True,
    allow_empty=True,
    check_access=True,
    output="yaml",
)


def test_reconcile_every_field_changed_comes_back() -> None:
    assert set(non_default(LOOP)) == {f.name for f in dataclasses.fields(ReconcileSettings)}
    assert flags.build(ReconcileSettings, vars(parsed("reconcile", *flags.argv(LOOP)))) == LOOP


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ReconcileSettings)])
def test_reconcile_each_field_at_its_default_comes_back(name: str) -> None:
    item = next(f for f in dataclasses.fields(ReconcileSettings) if f.name == name)
    if item.default is not dataclasses.MISSING:
        value = dataclasses.replace(LOOP, **{name: item.default})
    elif item.default_factory is not dataclasses.MISSING:
        value = dataclasses.replace(LOOP, **{name: item.default_factory()})
    else:  # --repo: required, on every command line
        assert flags.argv(LOOP)[0] == f"--repo={LOOP.repo}"
        return
    assert flags.build(ReconcileSettings, vars(parsed("reconcile", *flags.argv(value)))) == value


def loop_settings(
    operator_version: str | None, upgrade: executor.Options, connection: kube.Options
) -> ReconcileSettings:
    return ReconcileSettings(
        "x", workdir=Path("/w"), pinned_operator_version=operator_version, apply=True, upgrade=upgrade,
        connection=connection,
    )  # fmt: skip


SNAPSHOT = reconcile.Snapshot("c0ffee" * 6 + "abcd", "matrix/m.csv", frozenset(), "clusters/prod", None, 0)


def test_the_child_apply_keeps_every_flag(tmp_path: Path) -> None:
    options = kube.Options(f"kc.yaml:{tmp_path}/b.yaml", "ctx", 10.0)
    line = reconcile.apply_arguments(SNAPSHOT, loop_settings("v25.3.4", UPGRADE, options))
    child = parsed("apply", *line)
    assert arguments.apply_settings(child) == ApplySettings(
        from_dir=Path("clusters/prod"),
        matrix=Path("matrix/m.csv"),
        merged_ref=SNAPSHOT.commit,
        operator_version="v25.3.4",
        upgrade=UPGRADE,
    )
    # The child runs in its own working tree: the kubeconfig it reads is the one reconcile was given.
    kubeconfigs = f"{tmp_path}/kc.yaml:{tmp_path}/b.yaml"
    assert flags.build(kube.Options, vars(child)) == kube.Options(kubeconfigs, "ctx", 10.0)


def test_the_child_apply_gets_a_relative_kubeconfig_variable_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = loop_settings(None, executor.Options(), kube.Options())
    line = reconcile.apply_arguments(SNAPSHOT, settings, "kc.yaml")
    assert f"--kubeconfig={tmp_path}/kc.yaml" in line
    given = kube.Options("/etc/flag.yaml")
    flagged = reconcile.apply_arguments(SNAPSHOT, loop_settings(None, executor.Options(), given), "kc.yaml")
    assert "--kubeconfig=/etc/flag.yaml" in flagged  # the flag wins over the variable, as in kubectl


def test_the_child_apply_leaves_an_unpinned_version_to_its_gpudrv_yaml() -> None:
    line = reconcile.apply_arguments(SNAPSHOT, loop_settings(None, executor.Options(), kube.Options()))
    assert line == ["--from=clusters/prod", "--matrix=matrix/m.csv", f"--merged-ref={SNAPSHOT.commit}"]


# --- the parsers' flags are the types' flags ----------------------------------------------------------


def subparser(*verbs: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    for verb in verbs:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[verb]
    return parser


def dests(parser: argparse.ArgumentParser) -> set[str]:
    return {action.dest for action in parser._actions if action.dest not in ("help", "output")}


def test_apply_flags_are_apply_settings_and_connection() -> None:
    specs = [*flags.specs(ApplySettings), *flags.specs(kube.Options)]
    # and --cluster: it picks the connection's values from gpudrv.yaml's clusters: (arguments/clusters.py)
    assert dests(subparser("apply")) == {spec.dest for spec in specs} | {"clusters"}
    options = {action.dest: action.option_strings for action in subparser("apply")._actions}
    assert {spec.dest: [spec.flag.name] for spec in specs if not spec.flag.short} == {
        spec.dest: options[spec.dest] for spec in specs if not spec.flag.short
    }


def test_reconcile_flags_are_reconcile_settings() -> None:
    specs = [spec for spec in flags.specs(ReconcileSettings) if spec.dest != "force"]
    assert dests(subparser("reconcile")) | {"output"} == {spec.dest for spec in specs}


# --- gpudrv.yaml -----------------------------------------------------------------------------------


def test_the_schema_keys_are_the_settings_config_keys(tmp_path: Path) -> None:
    schema = json.loads((REPO / "schemas/gpudrv-config.schema.json").read_text())
    keys = {
        key
        for kind in (ApplySettings, ReconcileSettings, kube.Options)
        for key in flags.config_keys(kind).values()
    }
    # helm: values files, no flag's default; registry: audit/matrix verify/matrix fill --registry's
    # default; upstream: matrix fill --upstream's; clusters: what --cluster/--all-clusters pick.
    assert set(schema["properties"]) - {"helm", "registry", "upstream", "clusters"} == keys
    values = {"fleet": "f", "matrix": "m.csv", "operatorVersion": "v25.3.4"}
    (tmp_path / "gpudrv.yaml").write_text("".join(f"{key}: {values[key]}\n" for key in sorted(keys)))
    read = config.load(str(tmp_path / "gpudrv.yaml"))
    assert (read.fleet, read.matrix, read.operator_version) == (tmp_path / "f", tmp_path / "m.csv", "v25.3.4")


def test_configure_fills_the_config_keys_dests(tmp_path: Path) -> None:
    (tmp_path / "gpudrv.yaml").write_text("fleet: f\nmatrix: m.csv\noperatorVersion: v25.3.4\n")
    got = arguments.apply_settings(parsed("apply"))
    filled = {dest: getattr(got, dest) for dest in flags.config_keys(ApplySettings)}
    assert filled == {"from_dir": Path("f"), "matrix": Path("m.csv"), "operator_version": "v25.3.4"}
