"""`gpudrv reconcile`'s flags, derived from its settings type (commands/settings.py ReconcileSettings),
the one type its loop, --once and --check-access run from."""

from __future__ import annotations

import argparse

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
    add(
        parser.add_argument_group("other modes"),
        ReconcileSettings,
        "once",
        "allow_empty",
        "check_access",
        "output",
    )


def reconcile_settings(args: argparse.Namespace) -> ReconcileSettings:
    """reconcile's settings from its parsed flags (its connection's too: kube.Options, nested)."""
    return flags.build(ReconcileSettings, vars(args))
