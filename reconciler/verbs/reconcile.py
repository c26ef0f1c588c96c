"""`gpudrv reconcile`: the in-cluster loop (commands/reconcile). It runs from one settings type,
commands/settings.py's ReconcileSettings, whose fields are its flags (arguments/reconcile.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reconciler.arguments.reconcile import reconcile_options, reconcile_settings
from reconciler.commands.settings import ReconcileSettings
from reconciler.usage import LIVE, Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "run in the cluster: pull the fleet repo, watch GPU nodes, report (metrics, events)",
    "A long-running loop: fetches --branch of --repo every --interval (or on POST /sync), lists and "
    "watches the GPU nodes, audits each node the moment it joins or its labels change, and serves "
    "/metrics, /healthz and /readyz; Node events DriverImageMissing. One replica acts (Lease leader "
    f"election). Audit only, unless --apply. SIGTERM stops it between steps. {LIVE}",
    (
        ("gpudrv reconcile --repo https://github.com/acme/fleet --once", "one audit, as a CronJob"),
        ("gpudrv reconcile --repo https://github.com/acme/fleet --check-access", "its RBAC, checked"),
    ),
)
FROM_READS_MANIFESTS = False


def register(commands: SubParsers) -> None:
    reconcile_options(add_parser(commands, "reconcile", __name__))


def main(args: argparse.Namespace) -> int:
    return run(reconcile_settings(args))


def run(given: ReconcileSettings) -> int:
    from reconciler.commands import reconcile  # prometheus_client only for this command

    settings = reconcile.resolved(given)
    if settings.check_access:
        return reconcile.check_access(settings)
    if settings.once:
        return reconcile.run_once(settings)
    return reconcile.run(settings)
