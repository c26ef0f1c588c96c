"""`gpudrv reconcile`'s flags, derived from its settings type (commands/settings.py), and the
loop's settings (commands/reconcile.py) made from them."""

from __future__ import annotations

import argparse
from typing import Any

from reconciler.arguments import add
from reconciler.arguments.groups import cluster_options
from reconciler.commands.settings import ReconcileSettings
from reconciler.core.base import flags
from reconciler.core.lab.executor import Options

REPOSITORY = ("repo", "branch", "interval", "repo_matrix", "repo_fleet", "pinned_operator_version", "workdir",
              "git_token_file", "git_username", "git_ssh_key_file", "git_known_hosts_file")  # fmt: skip
ELECTION = ("no_leader_election", "lease_name", "lease_namespace", "identity", "lease_duration",
            "renew_deadline", "retry_period")  # fmt: skip
RELAYED = ("max_parallel", "drain_timeout", "installer", "install_timeout")  # apply's, passed on to it


def reconcile_options(parser: argparse.ArgumentParser) -> None:
    add(parser.add_argument_group("the fleet repository"), ReconcileSettings, *REPOSITORY)
    loop = parser.add_argument_group("the loop")
    add(loop, ReconcileSettings, "resync", "listen", "sync_secret_file", "sync_token_file", "event_refresh")
    cluster_options(loop)
    add(
        parser.add_argument_group("leader election (a coordination.k8s.io Lease)"),
        ReconcileSettings,
        *ELECTION,
    )
    act = parser.add_argument_group("apply (opt-in)")
    add(act, ReconcileSettings, "apply")
    add(act, Options, *RELAYED, relay=True)
    add(parser.add_argument_group("other modes"), ReconcileSettings, "once", "check_access", "output")


def reconcile_settings(args: argparse.Namespace) -> Any:
    """The loop's settings from the parsed flags."""
    from reconciler.adapters.git.sync import Credentials, Source, default_directory
    from reconciler.commands.reconcile import Settings, default_identity, default_lease_namespace
    from reconciler.core.incluster.election import Timing

    given = flags.build(ReconcileSettings, vars(args))
    credentials = Credentials(
        given.git_token_file, given.git_username, given.git_ssh_key_file, given.git_known_hosts_file
    )
    namespace = None if given.no_leader_election else (given.lease_namespace or default_lease_namespace())
    return Settings(
        source=Source(given.repo, given.branch, credentials),
        workdir=(given.workdir or default_directory()).absolute(),
        interval=given.interval,
        resync=given.resync,
        matrix=given.repo_matrix,
        fleet=given.repo_fleet,
        operator_version=given.pinned_operator_version,
        listen=given.listen,
        sync_secret_file=given.sync_secret_file,
        sync_token_file=given.sync_token_file,
        lease_namespace=namespace,
        lease_name=given.lease_name,
        identity=given.identity or default_identity(),
        timing=Timing(given.lease_duration, given.renew_deadline, given.retry_period),
        event_refresh=given.event_refresh,
        apply=given.upgrade if given.apply else None,
    )
