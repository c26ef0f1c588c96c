"""The CLI's shared options and argument types: the parsing half of cli.py, which wires the verbs.

Every value-taking option refuses an empty value ("" from an unset `$FLEET` would read as the
current directory); flags left unset are filled from gpudrv.yaml, then from the defaults, by
`configure` after parsing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from reconciler.adapters.files import config
from reconciler.adapters.registry.oci import CONCURRENCY
from reconciler.commands import Output
from reconciler.core import duration, label_selector
from reconciler.core.registry import Repository
from reconciler.errors import GpudrvError

DEFAULT_MATRIX = Path("matrix/support-matrix.csv")
DEFAULT_MANIFESTS = Path("clusters")
GITHUB_HELP = "github (annotations and a step summary; the default when GITHUB_ACTIONS=true)"


@dataclass(frozen=True)
class Empty:
    """An option given an empty value: `--from "$FLEET"` with FLEET unset. Refused after parsing, as
    one error line: read as a path, "" would be the current directory."""

    option: str
    what: str

    def message(self) -> str:
        return f"{self.option}: empty {self.what} (is a variable unset?)"


def path(option: str) -> Callable[[str], Path | Empty]:
    return lambda text: Path(text) if text else Empty(option, "path")


def file_path(option: str) -> Callable[[str], Path | Empty]:
    """A path that names a file: `matrix.csv/` is refused (Path() would drop the slash and read the
    file, where every other tool says "Not a directory")."""

    def convert(text: str) -> Path | Empty:
        if text.endswith(("/", "/.")) and not Path(text).is_dir():
            raise argparse.ArgumentTypeError(f"{text!r}: not a directory (a trailing slash names one)")
        return path(option)(text)

    return convert


def given(option: str, what: str) -> Callable[[str], str | Empty]:
    return lambda text: text if text else Empty(option, what)


def refuse_empty(args: argparse.Namespace) -> None:
    for value in vars(args).values():
        if isinstance(value, Empty):
            raise GpudrvError(value.message())


def configure(args: argparse.Namespace) -> None:
    """Flags win; then gpudrv.yaml (--config, $GPUDRV_CONFIG or the nearest gpudrv.yaml up to the
    repository root); then the defaults, read from the found gpudrv.yaml's directory."""
    settings = config.load(args.config)
    if "matrix" in args and args.matrix is None:
        args.matrix = settings.matrix or settings.root / DEFAULT_MATRIX
    if "operator_version" in args and args.operator_version is None:
        args.version_from_config = settings.operator_version is not None
        args.operator_version = settings.operator_version
    args.helm = settings.helm  # gpudrv.yaml's helm: values files, read with --from
    if "folder" in args and args.folder is None:  # manifests validate
        args.folder = settings.fleet or settings.root / DEFAULT_MANIFESTS
    args.fleet = settings.fleet  # the desired state, for the commands that need it (see desired)
    args.config_registry, args.config_path = settings.registry, settings.path  # see repository


def fleet_nodes(args: argparse.Namespace) -> None:
    """matrix impact: with no --from and no --kubeconfig/--context, gpudrv.yaml's fleet is the nodes."""
    if args.from_dir is None and args.fleet is not None and not (args.kubeconfig or args.context):
        args.from_dir = args.fleet


def desired(args: argparse.Namespace) -> Path:
    """The desired state in git: --from, else gpudrv.yaml's fleet."""
    if args.from_dir is None and args.fleet is None:
        found = (
            f"{args.config_path} has no fleet:" if args.config_path else f"no gpudrv.yaml {config.searched()}"
        )
        raise GpudrvError(
            f"gpudrv {args.command} needs --from DIR (or fleet: in gpudrv.yaml): the desired state in git; "
            f"{found}"
        )
    return Path(args.from_dir or args.fleet)


# --- option groups -------------------------------------------------------------------------------


def node_options(manifests: bool = True, desired: bool = False) -> argparse.ArgumentParser:
    """--from and the cluster's options. `desired`: the command reads the live cluster, and --from
    names the desired state in git (plan, apply, status), not a replacement for the cluster."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("nodes")
    if manifests:
        what = (
            "the desired state in git, under DIR" if desired else "read manifests under DIR, not the cluster"
        )
        group.add_argument("--from", dest="from_dir", type=path("--from"), metavar="DIR", help=what)
    cluster_options(group)
    group.add_argument(
        "--operator-version",
        type=given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release whose image-tag rule applies, like v26.3.3 (default: gpudrv.yaml; "
        "live, the running operator's; else the newest rule)",
    )
    return options


def cluster_options(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--kubeconfig",
        type=given("--kubeconfig", "path"),
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument("--context", type=given("--context", "context name"), help="kubeconfig context to use")
    group.add_argument(
        "--request-timeout",
        type=seconds,
        metavar="D",
        help="give up on a single API request after D, like kubectl (e.g. 10s; 0: never; "
        "default: connect 5s, each read 15s, one answer 60s)",
    )


def selector_option() -> argparse.ArgumentParser:
    """-l/--selector, as kubectl's: for the commands that list nodes."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "-l",
        "--selector",
        type=selector,
        metavar="SELECTOR",
        help="only the nodes whose labels match, like kubectl -l (e.g. pool=a100 or 'zone in (a,b),!spare'); "
        "with --from, the labels the manifests declare",
    )
    return options


def allow_empty_option() -> argparse.ArgumentParser:
    """--allow-empty, for the commands that check GPU nodes: finding none is exit 2 without it."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--allow-empty",
        action="store_true",
        help="a fleet with no GPU node (or none -l selects) is OK, not an error (exit 2 without it)",
    )
    return options


def matrix_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--matrix",
        type=file_path("--matrix"),
        metavar="PATH",
        help=f"support matrix (default: gpudrv.yaml's matrix, else {DEFAULT_MATRIX})",
    )
    return options


def output_option(*extra: Output) -> argparse.ArgumentParser:
    """-o text, json, yaml and `extra`: every command that prints results prints them as data too."""
    options = argparse.ArgumentParser(add_help=False)
    choices = values(Output.TEXT, Output.JSON, Output.YAML, *extra)
    if Output.GITHUB not in extra:
        options.add_argument("-o", "--output", choices=choices, default="text", help="output format")
        return options
    # No default here: main() picks github inside GitHub Actions, else text.
    options.add_argument(
        "-o", "--output", choices=choices, help=f"{', '.join(choices[:-1])} or {GITHUB_HELP}"
    )
    return options


# --- value types ---------------------------------------------------------------------------------


def values(*members: StrEnum) -> tuple[str, ...]:
    """Plain strings for argparse: its error message shows the repr of each choice."""
    return tuple(member.value for member in members)


def seconds(text: str) -> float:
    try:
        return duration.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def selector(text: str) -> label_selector.LabelSelector | Empty:
    if not text:
        return Empty("-l/--selector", "selector")
    try:
        return label_selector.parse(text)
    except label_selector.SelectorError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


# --- the OCI registry (matrix verify, audit --registry) -------------------------------------------

FROM_CONFIG = "from gpudrv.yaml"  # `audit --registry` without a value


def registry_options(parser: argparse.ArgumentParser, audit: bool = False) -> None:
    if audit:
        parser.add_argument(
            "--registry",
            nargs="?",
            const=FROM_CONFIG,
            type=given("--registry", "repository"),
            metavar="REPO",
            help="look the images up in the OCI repository REPO instead of the matrix "
            "(no REPO: gpudrv.yaml's registry)",
        )
    else:
        parser.add_argument(
            "--registry",
            type=given("--registry", "repository"),
            metavar="REPO",
            help="the OCI repository of the images, like registry.example.com/nvidia/driver "
            "(default: gpudrv.yaml's registry)",
        )
    parser.add_argument(
        "--concurrency",
        type=positive,
        default=CONCURRENCY,
        metavar="N",
        help=f"registry requests at a time (default {CONCURRENCY})",
    )


def repository(args: argparse.Namespace) -> Repository:
    """--registry REPO, else gpudrv.yaml's registry: one error line when neither says."""
    from reconciler.commands import registry as registry_command  # only for the verbs that read a registry

    if args.registry not in (None, FROM_CONFIG):
        return registry_command.repository(args.registry)
    return registry_command.repository(args.config_registry, args.config_path)


# --- gpudrv reconcile ----------------------------------------------------------------------------


def reconcile_options(parser: argparse.ArgumentParser) -> None:
    repo = parser.add_argument_group("the fleet repository")
    repo.add_argument(
        "--repo",
        required=True,
        type=given("--repo", "repository URL or path"),
        metavar="URL",
        help="https://..., ssh://..., git@host:path, or a local path (a bare repository too)",
    )
    repo.add_argument("--branch", default="main", type=given("--branch", "branch"), help="default main")
    repo.add_argument(
        "--interval",
        type=seconds,
        default=60.0,
        metavar="D",
        help="fetch every D (default 1m; also POST /sync)",
    )
    repo.add_argument(
        "--matrix",
        dest="repo_matrix",
        type=given("--matrix", "path"),
        metavar="PATH",
        help=f"in the repository (default: its gpudrv.yaml's matrix, else {DEFAULT_MATRIX})",
    )
    repo.add_argument(
        "--from",
        dest="repo_fleet",
        type=given("--from", "path"),
        metavar="DIR",
        help="in the repository: the desired fleet --apply applies (default: its gpudrv.yaml's fleet)",
    )
    repo.add_argument(
        "--operator-version",
        dest="pinned_operator_version",
        type=given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release (default: the repository's gpudrv.yaml, else the running operator's)",
    )
    repo.add_argument(
        "--workdir",
        type=path("--workdir"),
        metavar="DIR",
        help="a writable directory for the clone (default: $GPUDRV_WORKDIR, else $TMPDIR/gpudrv)",
    )
    repo.add_argument("--git-token-file", type=path("--git-token-file"), metavar="FILE", help="HTTPS token")
    repo.add_argument(
        "--git-username",
        default="x-access-token",
        type=given("--git-username", "name"),
        metavar="NAME",
        help="HTTPS user name that goes with the token (default x-access-token)",
    )
    repo.add_argument("--git-ssh-key-file", type=path("--git-ssh-key-file"), metavar="FILE", help="SSH key")
    repo.add_argument(
        "--git-known-hosts-file",
        type=path("--git-known-hosts-file"),
        metavar="FILE",
        help="the SSH server's host keys (required with --git-ssh-key-file)",
    )

    loop = parser.add_argument_group("the loop")
    loop.add_argument(
        "--resync",
        type=seconds,
        default=300.0,
        metavar="D",
        help="audit the whole fleet every D (default 5m)",
    )
    loop.add_argument(
        "--listen", default=":8080", type=given("--listen", "address"), metavar="ADDR",
        help="HOST:PORT for /metrics, /healthz, /readyz, POST /sync (default :8080)",
    )  # fmt: skip
    loop.add_argument(
        "--event-refresh",
        type=seconds,
        default=1800.0,
        metavar="D",
        help="count a lasting problem's Node event again after D (default 30m)",
    )
    cluster_options(loop)

    election = parser.add_argument_group("leader election (a coordination.k8s.io Lease)")
    election.add_argument(
        "--no-leader-election", action="store_true", help="act without a Lease (one replica)"
    )
    election.add_argument("--lease-name", default="gpudrv-reconcile", type=given("--lease-name", "name"))
    election.add_argument(
        "--lease-namespace",
        type=given("--lease-namespace", "namespace"),
        help="default: $POD_NAMESPACE, else the pod's service account namespace, else default",
    )
    election.add_argument(
        "--identity", type=given("--identity", "name"), help="default: $POD_NAME, else host"
    )
    election.add_argument("--lease-duration", type=seconds, default=15.0, metavar="D", help="default 15s")
    election.add_argument("--renew-deadline", type=seconds, default=10.0, metavar="D", help="default 10s")
    election.add_argument("--retry-period", type=seconds, default=2.0, metavar="D", help="default 2s")

    act = parser.add_argument_group("apply (opt-in)")
    act.add_argument(
        "--apply",
        action="store_true",
        help="on the leader, run gpudrv apply at each new commit and every --resync (its gates, at the "
        "fetched commit of --branch only)",
    )
    act.add_argument("--max-parallel", type=positive, default=1, metavar="N", help="apply's (default 1)")
    act.add_argument("--drain-timeout", type=seconds, default=300.0, metavar="D", help="apply's (default 5m)")
    act.add_argument("--installer", choices=("labels", "wait"), default="labels", help="apply's")
    act.add_argument(
        "--timeout", type=seconds, default=600.0, metavar="D", help="apply's installer=wait timeout"
    )

    modes = parser.add_argument_group("other modes")
    modes.add_argument(
        "--once", action="store_true", help="fetch, audit, write events, print, exit 0/1 (a CronJob)"
    )
    modes.add_argument(
        "--check-access",
        action="store_true",
        help="ask the API server (SelfSubjectAccessReview) about every operation this mode needs, and "
        "about those it must not have; exit 0 only if exactly the needed ones are allowed",
    )
    modes.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text", help="for --check-access"
    )


def reconcile_settings(args: argparse.Namespace) -> Any:
    """The loop's settings from the parsed flags."""
    from reconciler.adapters.git.sync import Credentials, Source, default_directory
    from reconciler.commands.reconcile import (
        ApplyOptions,
        Settings,
        default_identity,
        default_lease_namespace,
    )
    from reconciler.core.election import Timing

    credentials = Credentials(
        args.git_token_file, args.git_username, args.git_ssh_key_file, args.git_known_hosts_file
    )
    apply = None
    if args.apply:
        apply = ApplyOptions(args.max_parallel, args.drain_timeout, args.installer, args.timeout)
    namespace = None if args.no_leader_election else (args.lease_namespace or default_lease_namespace())
    return Settings(
        source=Source(args.repo, args.branch, credentials),
        workdir=(args.workdir or default_directory()).absolute(),
        interval=args.interval,
        resync=args.resync,
        matrix=args.repo_matrix,
        fleet=args.repo_fleet,
        operator_version=args.pinned_operator_version,
        listen=args.listen,
        lease_namespace=namespace,
        lease_name=args.lease_name,
        identity=args.identity or default_identity(),
        timing=Timing(args.lease_duration, args.renew_deadline, args.retry_period),
        event_refresh=args.event_refresh,
        apply=apply,
    )
