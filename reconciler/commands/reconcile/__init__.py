"""`gpudrv reconcile`: the in-cluster half of gpudrv, a loop that pulls git and watches the nodes.

Its settings (ReconcileSettings, with the defaults `resolved` where it runs), the commit it puts in
force, the child `gpudrv apply`'s arguments, and its three modes:
the loop (run: commands/reconcile/service.py around core/incluster/reconcile_loop.py), one audit for a CronJob
(run_once), and --check-access.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import uuid
from dataclasses import replace
from pathlib import Path

from reconciler.adapters import desired, git, kube
from reconciler.adapters.cluster import Cluster, reviews
from reconciler.adapters.cluster.events import EventSink, NodeEvent
from reconciler.adapters.files import config
from reconciler.adapters.git.sync import GitSync
from reconciler.adapters.sources import require_gpu_nodes, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.commands.settings import ApplySettings, ReconcileSettings
from reconciler.core.audit.audit import Status, audit_wants, check_want
from reconciler.core.base.flags import argv
from reconciler.core.incluster import access
from reconciler.core.incluster.reconcile_ports import CONFIG_NAME, INVALID, MISSING, Snapshot
from reconciler.errors import GpudrvError
from reconciler.render import audit, document
from reconciler.render.reconcile import access_json, access_text, invalid_message, missing_message

DEFAULT_MATRIX = "matrix/support-matrix.csv"


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def default_lease_namespace() -> str:
    """$POD_NAMESPACE, else the service account's namespace in a pod, else default."""
    if namespace := os.environ.get("POD_NAMESPACE"):
        return namespace
    mounted = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    with contextlib.suppress(OSError):
        return mounted.read_text().strip() or "default"
    return "default"


def resolved(given: ReconcileSettings) -> ReconcileSettings:
    """The defaults that depend on where reconcile runs: its working directory (absolute), its Lease's
    namespace ($POD_NAMESPACE, else the pod's service account's) and its identity ($POD_NAME, else
    the host name and a random suffix)."""
    from reconciler.adapters.git.sync import default_directory

    return replace(
        given,
        workdir=(given.workdir or default_directory()).absolute(),
        lease_namespace=given.lease_namespace or default_lease_namespace(),
        identity=given.identity or default_identity(),
    )


# --- what is in force ------------------------------------------------------------------------------


def load_snapshot(checkout: Path, commit: str, settings: ReconcileSettings) -> Snapshot:
    """The checked-out commit's matrix (refused when invalid) and gpudrv.yaml (when present)."""
    found = checkout / CONFIG_NAME
    settings_file = config.load(str(found)) if found.is_file() else config.Config()
    matrix = settings.repo_matrix or _inside(checkout, settings_file.matrix) or DEFAULT_MATRIX
    tags = valid_matrix(_within(checkout, matrix)).tags()
    fleet = settings.repo_fleet or _inside(checkout, settings_file.fleet)
    version = settings.pinned_operator_version or settings_file.operator_version
    return Snapshot(commit, matrix, tags, fleet, version, git.commit_time(checkout, commit))


def _inside(checkout: Path, path: Path | None) -> str | None:
    return None if path is None else Path(os.path.relpath(path, checkout)).as_posix()


def _within(checkout: Path, relative: str) -> Path:
    path = (checkout / relative).resolve()
    if not path.is_relative_to(checkout.resolve()):
        raise GpudrvError(f"{relative}: outside the repository")
    return path


# --- the child `gpudrv apply` (--apply) -------------------------------------------------------------


def apply_arguments(
    snapshot: Snapshot, settings: ReconcileSettings, kubeconfig_variable: str | None = None
) -> list[str]:
    """The child `gpudrv apply`'s command line, derived from apply's settings: the commit in force, the
    flags --apply passes on, the pinned --operator-version and every connection flag (--request-timeout
    too); the kubeconfig made absolute, as the child runs in its own working tree. Without --kubeconfig,
    the $KUBECONFIG reconcile was started with (`kubeconfig_variable`) is passed on the same way, as a
    relative path in it would name another file in the child's tree."""
    apply = ApplySettings(
        from_dir=Path(snapshot.fleet or ""),
        matrix=Path(snapshot.matrix),
        merged_ref=snapshot.commit,
        operator_version=settings.pinned_operator_version,
        upgrade=settings.upgrade,
    )
    options = settings.connection
    given = options.kubeconfig or kubeconfig_variable
    kubeconfig = given and os.pathsep.join(
        str(Path(name).expanduser().absolute()) for name in given.split(os.pathsep) if name
    )
    connection = kube.Options(kubeconfig or None, options.context, options.request_timeout)
    return [*argv(apply), *argv(connection)]


# --- check access ------------------------------------------------------------------------------------


def check(gateway: kube.Gateway, settings: ReconcileSettings) -> access.Report:
    lease = settings.lease_in if settings.elected else None
    needs = access.needs(lease, settings.lease_name, settings.apply)
    return reviews.report(gateway, needs, access.excess(settings.apply))


def check_access(settings: ReconcileSettings) -> int:
    output = Output(settings.output)
    report = check(kube.connect(settings.connection), settings)
    print(document.text(access_json(report), output) if output.structured else access_text(report))
    return OK if not report.missing and not report.excess else FINDINGS


# --- once (the CronJob) ------------------------------------------------------------------------------


def once(settings: ReconcileSettings) -> int:
    """Fetch, audit every GPU node, write the events, print the audit; exit 0 OK, 1 findings."""
    sync = GitSync(settings.source, settings.home / "repo", settings.interval, lambda fetched: None)
    commit = sync.fetch_once()
    checkout = settings.home / "repo"
    git.check_out(checkout, commit)
    snapshot = load_snapshot(checkout, commit, settings)
    gateway = kube.connect(settings.connection)
    state = desired.from_cluster(gateway, desired.Pins(flag=snapshot.operator_version))
    found = desired.wants(state, Cluster(gateway).gpu_nodes())
    require_gpu_nodes(len(found.wants), f"in the cluster at {gateway.host}", None, settings.allow_empty)
    result = audit_wants(found, snapshot.tags)
    sink = EventSink(gateway, settings.event_refresh).start()
    where = f"{snapshot.matrix} at {commit[:12]}"
    # Events for the running kernel's findings only, as the loop posts them; the next kernel's are in
    # the printed audit (and the loop's gpudrv_node_next_kernel_image_missing).
    for finding in (found_now for want in found.wants if (found_now := check_want(want, snapshot.tags))):
        missing = finding.status is Status.MISSING
        sink.post(NodeEvent(
            finding.node,
            MISSING if missing else INVALID,
            missing_message(finding, where) if missing else invalid_message(finding),
            finding.detail,
            recount=False,
        ))  # fmt: skip
    sink.stop(timeout=60)
    print(f"commit {commit[:12]} of {settings.source.branch}: {len(result.audited)} GPU nodes")
    print(audit.as_text(result))
    return OK if result.ok else FINDINGS


def log_to_stderr(level: int, fmt: str) -> None:
    """gpudrv's own loggers (gpudrv.*) to stderr, one line per record; the root logger and the
    libraries' loggers are left as the CLI set them (quiet)."""
    own = logging.getLogger("gpudrv")
    for handler in own.handlers[:]:
        own.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    own.addHandler(handler)
    own.setLevel(level)
    own.propagate = False


def run(settings: ReconcileSettings) -> int:
    log_to_stderr(logging.INFO, "%(asctime)s %(levelname)s %(name)s: %(message)s")
    if (problem := settings.timing.problem()) is not None:
        raise GpudrvError(problem)
    if (problem := settings.source.credentials.problem(settings.source.url)) is not None:
        raise GpudrvError(problem)
    from reconciler.commands.reconcile.service import Service  # it builds on this module

    return Service(settings).run()


def run_once(settings: ReconcileSettings) -> int:
    if (problem := settings.source.credentials.problem(settings.source.url)) is not None:
        raise GpudrvError(problem)
    log_to_stderr(logging.WARNING, "%(levelname)s %(name)s: %(message)s")
    return once(settings)
