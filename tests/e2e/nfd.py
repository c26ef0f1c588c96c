"""The real Node Feature Discovery in the e2e tier: nfd-master and an nfd-worker as plain processes.

`scripts/nfd build` compiles sigs.k8s.io/node-feature-discovery v0.17.3 (tests/nfd/go.mod) from the Go
module proxy, cached. The CRDs are NFD's own (deployment/base/nfd-crds/nfd-api-crds.yaml in the pinned
module, `scripts/nfd crds`), applied to the test cluster. What each process needs outside a pod, as read
in the v0.17.3 source (docs/research/nfd.md has the citations):

- nfd-worker publishes a NodeFeature object named after NODE_NAME in the namespace KUBERNETES_NAMESPACE
  (there is no service-account file outside a pod); nfd-master merges it into the node's labels. The
  master also needs NODE_NAME to be a node that exists (it patches its own node at start).
- The worker's local source reads a hardcoded directory, /etc/kubernetes/node-feature-discovery/
  features.d/, and its config file defaults to /etc/kubernetes/node-feature-discovery/nfd-worker.conf.
  The worker runs in its own mount namespace (`unshare --mount`, root) in a private root holding its
  binary, the kubeconfig, /proc, /dev, a config file that enables only the local source, and the test's
  features.d directory bound read-only at NFD's path, as the Helm chart mounts the hostPath. Nothing is
  written to the host's /etc.
- -metrics=0 and -grpc-health=0: neither process listens on a port.

Nothing skips: a build that fails, or a machine where the mount namespace cannot be made, fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import REPO

if TYPE_CHECKING:
    from tests.e2e.conftest import Kube

SCRIPT = REPO / "scripts" / "nfd"
# The local source's directory (source/local/local.go:65, no flag or config moves it) and the worker's
# default config path (cmd/nfd-worker/main.go:108), inside the worker's private root.
NFD_DIR = "/etc/kubernetes/node-feature-discovery"
# core.sleepInterval: how often the worker re-reads features.d (1s is the least it takes,
# pkg/nfd-worker/nfd-worker.go:382-388).
WORKER_CONFIG = """core:
  featureSources: [local]
  labelSources: [local]
  sleepInterval: 1s
  noOwnerRefs: true
"""
# A pod's view, made of bind mounts in a tmpfs that only the worker's mount namespace sees; exec keeps
# the pid, so the test stops nfd-worker itself.
ROOT_SCRIPT = f"""set -e
R=$1; FEATURES=$2; BINARY=$3; KCONF=$4; CONF=$5; shift 5
D="$R{NFD_DIR}"
mount -t tmpfs gpudrv-nfd-worker-root "$R"
mkdir -p "$D/features.d" "$R/usr/bin" "$R/proc" "$R/dev" "$R/tmp"
touch "$D/nfd-worker.conf" "$R/usr/bin/nfd-worker" "$R/etc/kubeconfig"
mount --bind "$FEATURES" "$D/features.d"
mount -o remount,bind,ro "$D/features.d"
mount --bind "$CONF" "$D/nfd-worker.conf"
mount --bind "$BINARY" "$R/usr/bin/nfd-worker"
mount --bind "$KCONF" "$R/etc/kubeconfig"
mount --rbind /proc "$R/proc"
mount --rbind /dev "$R/dev"
cd /
exec chroot "$R" /usr/bin/nfd-worker "$@"
"""


def _script(verb: str) -> str:
    proc = subprocess.run([str(SCRIPT), verb], capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        pytest.fail(f"scripts/nfd {verb} failed (exit {proc.returncode}):\n{tail}", pytrace=False)
    return proc.stdout.strip().splitlines()[-1]


def _require_mount_namespace() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("chroot"):
        pytest.fail(
            "nfd-worker reads /etc/kubernetes/node-feature-discovery/features.d/ only: the e2e test runs it "
            "in its own mount namespace, which needs root, unshare and chroot",
            pytrace=False,
        )
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(f"unshare --mount is not allowed here: {probe.stderr.strip()}", pytrace=False)


@dataclass
class Process:
    """One NFD process, its log in a file; stopped by its own pid."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=15)


@dataclass
class Nfd:
    """NFD against the test cluster: `start(node, features_d)` runs nfd-master and the node's nfd-worker."""

    kube: Kube
    bin_dir: Path
    namespace: str
    workdir: Path
    processes: list[Process] = field(default_factory=list)

    def _popen(self, name: str, argv: list[str], env: dict[str, str]) -> Process:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def start(self, node: str, features_d: Path) -> None:
        """nfd-master (its NODE_NAME: `node`, which must exist) and nfd-worker for `node`, reading
        `features_d` as its features.d."""
        env = {"NODE_NAME": node, "KUBERNETES_NAMESPACE": self.namespace}
        self._popen(
            "nfd-master",
            [
                str(self.bin_dir / "nfd-master"),
                f"-kubeconfig={self.kube.kubeconfig}",
                "-config=",  # no config file: the defaults (pkg/nfd-master/nfd-master.go:249-272)
                "-metrics=0",
                "-grpc-health=0",
            ],
            env,
        )
        config = self.workdir / "nfd-worker.conf"
        config.write_text(WORKER_CONFIG)
        root = self.workdir / "worker-root"  # an empty mount point; the tmpfs on it is private
        root.mkdir(exist_ok=True)
        unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", ROOT_SCRIPT, "sh"]
        mounts = [
            str(root),
            str(features_d),
            str(self.bin_dir / "nfd-worker"),
            str(self.kube.kubeconfig),
            str(config),
        ]
        flags = ["-kubeconfig=/etc/kubeconfig", "-metrics=0", "-grpc-health=0"]
        self._popen("nfd-worker", [*unshare, *mounts, *flags], env)

    def check_running(self) -> None:
        for process in self.processes:
            if not process.alive():
                raise AssertionError(f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.tail()}" for p in self.processes)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


def install_crds(kube: Kube, crds: str) -> None:
    kube.run("apply", "--server-side", "--field-manager=gpudrv-e2e-nfd", "-f", crds)
    deadline = time.monotonic() + 60
    while True:  # `wait` fails outright while a new CRD has no status yet
        done = kube.run("wait", "--for=condition=Established", "--timeout=30s", "-f", crds, check=False)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"NFD's CRDs are not Established: {done.stderr.strip()}")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def nfd_module() -> Path:
    """The pinned NFD module's source in the Go module cache: NFD's own files, read, never copied."""
    return Path(_script("module"))


@pytest.fixture(scope="session")
def nfd_bin() -> Path:
    """nfd-master and nfd-worker, built from the Go module proxy (cached)."""
    return Path(_script("build"))


@pytest.fixture
def nfd(kube: Kube, nfd_bin: Path, namespace: str, tmp_path: Path) -> Iterator[Nfd]:
    _require_mount_namespace()
    install_crds(kube, _script("crds"))
    workdir = tmp_path / "nfd"
    workdir.mkdir()
    running = Nfd(kube, nfd_bin, namespace, workdir)
    yield running
    running.stop()
