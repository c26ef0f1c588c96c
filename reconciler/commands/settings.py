"""The settings types of gpudrv's commands: one per feature, each a frozen dataclass whose fields say how
they are given (core/base/flags.py). From them come the commands' flags and defaults (reconciler/arguments),
the gpudrv.yaml keys (adapters/files/config.py) and the child command line of `reconcile --apply`.

How a live command reaches its cluster is kube.Options (adapters/kube), the one connection type.
ApplySettings: `gpudrv apply`; lab mode's upgrade (executor.Options, nested here) and the GPU Operator's
staged rollout (commands/rollout.py) read the same type.
ReconcileSettings: `gpudrv reconcile`'s flags, and the settings its loop, --once and --check-access run
from (commands/reconcile resolves the defaults that depend on where it runs: `resolved`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from reconciler.adapters import kube
from reconciler.core.base.flags import Kind, flag, nested
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.cuda.cuda_gate import Reading
from reconciler.core.incluster.election import Timing
from reconciler.core.lab.executor import Options
from reconciler.core.rollout.supervise import Stages

if TYPE_CHECKING:
    from reconciler.adapters.git.sync import Source

_T = TypeVar("_T")
DEFAULT_MATRIX = Path("matrix/support-matrix.csv")


@dataclass(frozen=True)
class ApplySettings:
    from_dir: Path = flag(
        "--from",
        Kind.PATH,
        metavar="DIR",
        what="path",
        config="fleet",
        help="the desired state in git, under DIR",
    )
    matrix: Path = flag(
        "--matrix", Kind.FILE, metavar="PATH", what="path", config="matrix",
        help=f"support matrix (default: gpudrv.yaml's matrix, else {DEFAULT_MATRIX})",
    )  # fmt: skip
    merged_ref: str | None = flag(
        "--merged-ref", Kind.TEXT, None, metavar="REF", what="git ref",
        help="where the image gate reads the matrix (default: origin/main, else main)",
    )  # fmt: skip
    registry_images: str = flag(
        "--registry-images", Kind.CHOICE, "on", choices=("on", "off"),
        help="on: the CUDA gate reads each GPU pod image's NVIDIA_REQUIRE_CUDA from its registry "
        "(default); off: offline, only the NGC images of data/cuda-compat.json are judged",
    )  # fmt: skip
    allow_unverified_images: bool = flag(
        "--allow-unverified-images", Kind.SWITCH, False,
        help="let a driver change through the CUDA gate although a GPU pod's image could not be read "
        "(registry down, auth, timeout) or judged; the plan names each such image (default: refused)",
    )  # fmt: skip
    dry_run: bool = flag("--dry-run", Kind.SWITCH, False, help="print the plan; change nothing")
    upgrade: Options = nested(Options)
    canary: int = flag(
        "--canary", Kind.COUNT, 1, metavar="N", help="nodes the operator takes first (default 1)"
    )
    batch: int | None = flag(
        "--batch", Kind.COUNT, None, metavar="N",
        help="nodes released per batch after the canary (default: all the rest; the operator's "
        "maxParallelUpgrades and maxUnavailable still pace them)",
    )  # fmt: skip
    release: bool = flag(
        "--release", Kind.SWITCH, False, help="remove every skip label gpudrv set, and stop staging"
    )
    hold: bool = flag(
        "--hold", Kind.SWITCH, False,
        help="a GitOps engine or Helm applies the driver resources: gate and hold the moving nodes "
        "but the canary, then stop (run before the engine's sync, e.g. an Argo CD PreSync hook)",
    )  # fmt: skip
    await_sync: bool = flag(
        "--await-sync", Kind.SWITCH, False,
        help="never apply the driver resources: hold, wait until the engine has applied them, then "
        "canary and batches (run after --hold, e.g. an Argo CD PostSync hook)",
    )  # fmt: skip
    selector: LabelSelector | None = flag(
        "--selector", Kind.SELECTOR, None, short="-l", metavar="SELECTOR", what="selector",
        help="only the nodes whose labels match, like kubectl -l (e.g. pool=a100 or 'zone in (a,b),!spare'); "
        "with --from, the labels the manifests declare",
    )  # fmt: skip
    allow_empty: bool = flag(
        "--allow-empty", Kind.SWITCH, False,
        help="a fleet with no GPU node (or none -l selects) is OK, not an error (exit 2 without it)",
    )  # fmt: skip
    operator_version: str | None = flag(
        "--operator-version", Kind.TEXT, None, metavar="VERSION", what="version", config="operatorVersion",
        help="GPU Operator release whose image-tag rule applies, like v26.3.3 (default: gpudrv.yaml; "
        "live, the running operator's; else the newest rule)",
    )  # fmt: skip

    @property
    def stages(self) -> Stages:
        return Stages(self.canary, self.batch or 0)

    @property
    def timeout(self) -> float:
        """--timeout: with the GPU Operator, per batch (lab mode: per installer=wait install)."""
        return self.upgrade.install_timeout

    @property
    def applies(self) -> bool:
        """Does gpudrv write the driver resources itself (not when a GitOps engine does)?"""
        return not (self.hold or self.await_sync)

    @property
    def cuda(self) -> Reading:
        """How the CUDA gate reads the GPU pods' images (--registry-images, --allow-unverified-images)."""
        return Reading(self.registry_images == "on", self.allow_unverified_images)


@dataclass(frozen=True)
class ReconcileSettings:
    repo: str = flag(
        "--repo", Kind.TEXT, metavar="URL", what="repository URL or path", required=True,
        help="https://..., ssh://..., git@host:path, or a local path (a bare repository too)",
    )  # fmt: skip
    branch: str = flag("--branch", Kind.TEXT, "main", what="branch", help="default main")
    interval: float = flag(
        "--interval", Kind.SECONDS, 60.0, metavar="D", help="fetch every D (default 1m; also POST /sync)"
    )
    repo_matrix: str | None = flag(
        "--matrix", Kind.TEXT, None, metavar="PATH", what="path",
        help=f"in the repository (default: its gpudrv.yaml's matrix, else {DEFAULT_MATRIX})",
    )  # fmt: skip
    repo_fleet: str | None = flag(
        "--from", Kind.TEXT, None, metavar="DIR", what="path",
        help="in the repository: the desired fleet --apply applies (default: its gpudrv.yaml's fleet)",
    )  # fmt: skip
    pinned_operator_version: str | None = flag(
        "--operator-version", Kind.TEXT, None, metavar="VERSION", what="version",
        help="GPU Operator release (default: the repository's gpudrv.yaml, else the running operator's)",
    )  # fmt: skip
    workdir: Path | None = flag(
        "--workdir", Kind.PATH, None, metavar="DIR",
        help="a writable directory for the clone (default: $GPUDRV_WORKDIR, else $TMPDIR/gpudrv)",
    )  # fmt: skip
    git_token_file: Path | None = flag(
        "--git-token-file", Kind.PATH, None, metavar="FILE", help="HTTPS token"
    )
    git_username: str = flag(
        "--git-username", Kind.TEXT, "x-access-token", metavar="NAME", what="name",
        help="HTTPS user name that goes with the token (default x-access-token)",
    )  # fmt: skip
    git_ssh_key_file: Path | None = flag(
        "--git-ssh-key-file", Kind.PATH, None, metavar="FILE", help="SSH key"
    )
    git_known_hosts_file: Path | None = flag(
        "--git-known-hosts-file", Kind.PATH, None, metavar="FILE",
        help="the SSH server's host keys (required with --git-ssh-key-file)",
    )  # fmt: skip
    resync: float = flag(
        "--resync", Kind.SECONDS, 300.0, metavar="D", help="audit the whole fleet every D (default 5m)"
    )
    listen: str = flag(
        "--listen", Kind.TEXT, ":8080", metavar="ADDR", what="address",
        help="HOST:PORT for /metrics, /healthz, /readyz, POST /sync (default :8080)",
    )  # fmt: skip
    sync_secret_file: Path | None = flag(
        "--sync-secret-file", Kind.PATH, None, metavar="FILE",
        help="POST /sync for a push webhook signed with this shared secret (X-Hub-Signature-256)",
    )  # fmt: skip
    sync_token_file: Path | None = flag(
        "--sync-token-file", Kind.PATH, None, metavar="FILE",
        help="POST /sync for this bearer token (Authorization: Bearer); without either, /sync is off",
    )  # fmt: skip
    event_refresh: float = flag(
        "--event-refresh", Kind.SECONDS, 1800.0, metavar="D",
        help="count a lasting problem's Node event again after D (default 30m)",
    )  # fmt: skip
    connection: kube.Options = nested(kube.Options)
    no_leader_election: bool = flag(
        "--no-leader-election", Kind.SWITCH, False, help="act without a Lease (one replica)"
    )
    lease_name: str = flag("--lease-name", Kind.TEXT, "gpudrv-reconcile", what="name")
    lease_namespace: str | None = flag(
        "--lease-namespace", Kind.TEXT, None, what="namespace",
        help="default: $POD_NAMESPACE, else the pod's service account namespace, else default",
    )  # fmt: skip
    identity: str | None = flag(
        "--identity", Kind.TEXT, None, what="name", help="default: $POD_NAME, else host"
    )
    lease_duration: float = flag("--lease-duration", Kind.SECONDS, 15.0, metavar="D", help="default 15s")
    renew_deadline: float = flag("--renew-deadline", Kind.SECONDS, 10.0, metavar="D", help="default 10s")
    retry_period: float = flag("--retry-period", Kind.SECONDS, 2.0, metavar="D", help="default 2s")
    apply: bool = flag(
        "--apply", Kind.SWITCH, False,
        help="on the leader, run gpudrv apply at each new commit and every --resync (its gates, at the "
        "fetched commit of --branch only)",
    )  # fmt: skip
    upgrade: Options = nested(Options)  # with --apply: the flags apply takes, passed on to it
    once: bool = flag(
        "--once", Kind.SWITCH, False, help="fetch, audit, write events, print, exit 0/1 (a CronJob)"
    )
    allow_empty: bool = flag(
        "--allow-empty", Kind.SWITCH, False,
        help="with --once: a cluster with no GPU node is exit 0 (NOTHING CHECKED), not 2",
    )  # fmt: skip
    check_access: bool = flag(
        "--check-access", Kind.SWITCH, False,
        help="ask the API server (SelfSubjectAccessReview) about every operation this mode needs, and "
        "about those it must not have; exit 0 only if exactly the needed ones are allowed",
    )  # fmt: skip
    output: str = flag(
        "--output",
        Kind.CHOICE,
        "text",
        short="-o",
        choices=("text", "json", "yaml"),
        help="for --check-access",
    )

    @property
    def source(self) -> Source:
        """The fleet repository, its branch and the credentials to fetch it."""
        from reconciler.adapters.git.sync import Credentials, Source

        credentials = Credentials(
            self.git_token_file, self.git_username, self.git_ssh_key_file, self.git_known_hosts_file
        )
        return Source(self.repo, self.branch, credentials)

    @property
    def timing(self) -> Timing:
        return Timing(self.lease_duration, self.renew_deadline, self.retry_period)

    @property
    def elected(self) -> bool:
        """Is this replica one of several, one leader at a time (a coordination.k8s.io Lease)?"""
        return not self.no_leader_election

    # Where reconcile runs decides these three defaults: commands/reconcile's `resolved` fills them in.
    @property
    def home(self) -> Path:
        """The working directory: the checkout and the child apply's worktrees."""
        return _resolved(self.workdir, "--workdir")

    @property
    def lease_in(self) -> str:
        return _resolved(self.lease_namespace, "--lease-namespace")

    @property
    def candidate(self) -> str:
        return _resolved(self.identity, "--identity")


def _resolved(value: _T | None, flag: str) -> _T:
    if value is None:
        raise ValueError(f"reconcile's {flag} has no value: resolve its defaults first")
    return value
