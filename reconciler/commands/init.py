"""`gpudrv init [DIR]`: a new fleet repository, ready for gpudrv's checks.

It writes gpudrv.yaml, matrix/support-matrix.csv, clusters/NAME/ (driver resources and Node
manifests), the four workflows (WORKFLOWS: the PR check, the live audit, apply, the image build) and
.pre-commit-config.yaml, all pinned to the gpudrv that runs init: the GitHub repository and commit
it was built from (or --action), and its version. Nothing is overwritten: any target already there
is exit 2 before a byte is written. --from-cluster fills the fleet and the matrix from the live
cluster's GPU nodes.
"""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from reconciler import __version__
from reconciler.adapters import kube
from reconciler.adapters.files import schemas
from reconciler.adapters.files.scaffold import (
    build_record,
    in_git,
    on_path,
    refuse_existing,
    template,
    write_all,
    yaml_text,
)
from reconciler.adapters.sources import NodeSource
from reconciler.commands import OK
from reconciler.core.contract.driver_images import Wants
from reconciler.core.contract.operator import Mode
from reconciler.core.images import matrix
from reconciler.core.views import scaffold
from reconciler.errors import GpudrvError

WORKFLOWS = ("pr.yml", "audit.yml", "apply.yml", "build.yml")
CONFIG_FILES = ("gpudrv.yaml", "matrix/support-matrix.csv")
NEWEST_RULE = "v26.7.0"  # for the commented hint in gpudrv.yaml
WIDTH = 100  # the next steps' paragraphs


@dataclass(frozen=True)
class Settings:
    folder: Path
    name: str = "prod"
    action: str | None = None  # OWNER/NAME@COMMIT; None: the source this gpudrv was built from
    from_cluster: bool = False
    cluster: kube.Options = field(default_factory=kube.Options)
    operator_version: str | None = None


def run(settings: Settings) -> int:
    if not _is_name(settings.name):
        raise GpudrvError(f"--name {settings.name!r}: a cluster's folder name is a DNS label, like prod")
    pin = _pin(settings.action)
    fleet_dir = f"clusters/{settings.name}"
    files = _common_files(pin, fleet_dir)
    if settings.from_cluster:  # a taken target is a cheaper answer than reading the cluster first
        refuse_existing(settings.folder, sorted([*files, *CONFIG_FILES], key=_order))
    fleet, warnings = _fleet(settings)
    operator_version = settings.operator_version or fleet.operator_version
    files["gpudrv.yaml"] = template(
        "gpudrv.yaml",
        {
            "VERSION": f"v{pin.version}",
            "FLEET": fleet_dir,
            "OPERATOR_VERSION": _operator_line(operator_version),
        },
    )
    files["matrix/support-matrix.csv"] = scaffold.matrix_text(fleet.rows)
    for item in fleet.documents:
        files[f"{fleet_dir}/{item.path}"] = yaml_text(item.document, item.comment)
    write_all(settings.folder, dict(sorted(files.items(), key=lambda entry: _order(entry[0]))))
    _report(settings, pin, fleet, sorted(files, key=_order), warnings)
    return OK


def _is_name(name: str) -> bool:
    return re.match(scaffold.NAME_PATTERN, name) is not None and len(name) <= 63


def _pin(action: str | None) -> scaffold.Pin:
    if action is not None:
        pin = scaffold.parse_pin(action, __version__)
        if pin is None:
            raise GpudrvError(f"--action {action!r}: give OWNER/NAME@COMMIT, the full 40-digit commit SHA")
        return pin
    record = build_record()
    if record is None:
        raise GpudrvError(
            f"this gpudrv ({__version__}) carries no record of the commit it was built from (an editable "
            "install, or built outside git), so it cannot pin the workflows: pass --action OWNER/NAME@COMMIT"
        )
    if record.repository is None:
        raise GpudrvError(
            f"this gpudrv ({__version__}) was built from commit {record.commit}, but not from a GitHub "
            f"repository it knows: pass --action OWNER/NAME@{record.commit}"
        )
    if record.dirty:
        print(
            f"gpudrv init: warning: this gpudrv was built with uncommitted changes on top of "
            f"{record.commit}; the workflows run that commit, without them",
            file=sys.stderr,
        )
    return scaffold.Pin(record.repository, record.commit, __version__)


def _common_files(pin: scaffold.Pin, fleet_dir: str) -> dict[str, str]:
    values = {
        "ACTION": pin.action,
        "VERSION": f"v{pin.version}",
        "FLEET": fleet_dir,
    }
    files = {f".github/workflows/{name}": template(name, values) for name in WORKFLOWS}
    files[".pre-commit-config.yaml"] = template("pre-commit-config.yaml", values)
    return files


def _operator_line(version: str | None) -> str:
    if version:
        return f"operatorVersion: {version}  # the GPU Operator release whose image-tag rule applies"
    return (
        f"# operatorVersion: {NEWEST_RULE}  # your GPU Operator release: its rule names rhel, rocky and ol\n"
        "# images (rhel9 or rhel9.4); unset, gpudrv applies the newest rule it knows"
    )


def _fleet(settings: Settings) -> tuple[scaffold.Fleet, list[str]]:
    if not settings.from_cluster:
        if settings.cluster != kube.Options():
            raise GpudrvError("--kubeconfig and --context read a cluster: add --from-cluster")
        return scaffold.example(), []
    source = NodeSource(None, settings.cluster, settings.operator_version)
    found = source.wants()
    where = f"the cluster at {source.live.host}"
    if not found.wants:
        raise GpudrvError(
            f"{where} has no GPU node (label nvidia.com/gpu.present=true): nothing to fill in "
            "(another --context? or gpudrv init without --from-cluster for an example fleet)"
        )
    fleet = scaffold.live(found.contract, found.wants, where)
    return _checked_rows(fleet, found), _warnings(found)


def _checked_rows(fleet: scaffold.Fleet, found: Wants) -> scaffold.Fleet:
    schema = schemas.load("matrix-row")
    rows = tuple(row for row in fleet.rows if not matrix.row_problems(row, schema))
    return scaffold.Fleet(fleet.documents, rows, fleet.operator_version)


def _warnings(found: Wants) -> list[str]:
    schema = schemas.load("matrix-row")
    lines = []
    for want in found.wants:
        key = scaffold.key_of(want)
        if want.tag is None:
            lines.append(f"node {want.node.name}: no driver image ({want.reason}); the PR check will say so")
        elif key is None or matrix.row_problems(key, schema):
            lines.append(f"node {want.node.name}: its image {want.tag} is not a matrix row; left out")
    lines += [f"fleet: {note.message}" for note in found.notes]
    if found.contract.mode is Mode.LAB:
        lines.append(
            "fleet: no ClusterPolicy or NVIDIADriver in the cluster: each node's own "
            "nvidia.com/cuda.driver.major label decides its image"
        )
    return lines


def _order(path: str) -> tuple[int, str]:
    """gpudrv.yaml, the matrix, the fleet, then the CI files."""
    for rank, prefix in enumerate(("gpudrv.yaml", "matrix/", "clusters/", ".github/", ".pre-commit")):
        if path.startswith(prefix):
            return rank, path
    return 9, path


def _report(
    settings: Settings, pin: scaffold.Pin, fleet: scaffold.Fleet, paths: list[str], warnings: list[str]
) -> None:
    where = settings.folder
    nodes = sum(1 for item in fleet.documents if item.path.startswith("nodes/"))
    print(f"gpudrv init: a fleet repository in {where}, checked by gpudrv {pin.version} ({pin.action})")
    for path in paths:
        print(f"  {path}")
    source = "from the cluster" if settings.from_cluster else "an example"
    print(f"{_count(nodes, 'GPU node')} ({source}), {_count(len(fleet.rows), 'matrix row')}")
    for line in warnings:
        print(f"gpudrv init: {line}", file=sys.stderr)
    _prerequisites(pin)
    _next_steps(settings, pin)


def _prerequisites(pin: scaffold.Pin) -> None:
    """The hooks run `pre-commit` and the gpudrv on PATH: say whether each is there."""
    print("needs, on PATH:")
    for name, why, install in (
        ("pre-commit", "it runs the hooks of .pre-commit-config.yaml", "pipx install pre-commit"),
        (
            f"gpudrv {pin.version}",
            "the hooks run it, as the workflows do",
            f"pipx install git+{pin.url}@{pin.commit}",
        ),
    ):
        found = on_path(name.split()[0])
        print(f"  {name}: {why} ({'found: ' + found if found else 'not found: ' + install})")


def _next_steps(settings: Settings, pin: scaffold.Pin) -> None:
    where = settings.folder
    print("next:" if where == Path() else f"next, in {where}:")
    steps = [
        *([("git init -b main", "a git repository first")] if not in_git(where) else []),
        (f"gpudrv audit --from clusters/{settings.name}", "what the PR check runs"),
        ("pre-commit install", "the same checks before each commit"),
        ("git add -A && git commit -m 'Fleet repository for gpudrv'", "the hooks run here"),
        ("git remote add origin git@github.com:OWNER/FLEET.git", "an empty repository on GitHub"),
        ("git push -u origin main", "the PR check runs on every pull request"),
    ]
    width = max(len(command) for command, _ in steps)
    for command, why in steps:
        print(f"  {command:<{width}}  # {why}")
    print("on GitHub, in the fleet repository's settings:")
    for line in (
        f"the workflows run gpudrv's action {pin.action} (--action OWNER/NAME@COMMIT: a GitHub repository "
        "holding gpudrv's action.yml, gpudrv's own or your fork, at a full 40-digit commit); the fleet "
        "repository must be allowed to use it (Actions > General)",
        "environment fleet-audit, secret KUBECONFIG: for the scheduled audit (audit.yml), a read-only "
        "kubeconfig that may list nodes, and list nvidia.com clusterpolicies and nvidiadrivers",
        "environment production, secret KUBECONFIG: for apply.yml after a merge, a kubeconfig that may "
        "cordon, evict and relabel nodes and apply PodDisruptionBudgets; give it required reviewers",
        "environment registry-push, secret REGISTRY_AUTH: for build.yml, a docker config.json that may "
        "pull from nvcr.io and push to gpudrv.yaml's registry; and allow GitHub Actions to create pull "
        "requests (Actions > General), build.yml opens one with the rows (docs/building-images.md)",
    ):
        print(textwrap.fill(line, WIDTH, initial_indent="  ", subsequent_indent="    "))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
