"""A real OCI registry on 127.0.0.1 for the registry tests and benchmarks/registry.py.

The reference registry (distribution's cmd/registry), regtool (./distribution/regtool: certificate,
htpasswd, token server) and go-containerregistry's crane are built from the Go modules pinned here
(distribution/, crane/), like scripts/cluster builds the control plane: nothing is downloaded but Go
modules, and the binaries are cached outside the repository in
`${GPUDRV_REGISTRY_CACHE:-~/.cache/gpudrv/registry-bin}/<versions>_<hash>/`, the hash covering the
go.mod/go.sum files, regtool's source and the build recipe. A build goes to a temporary folder that is
renamed into place; a failed build raises BuildError with the command to run by hand.

A Registry serves HTTPS with a self-signed certificate (regtool cert) and either htpasswd (Basic) or
token auth (regtool's token server, which checks the same htpasswd): the two schemes a registry
challenges with. Storage is a folder, deletes are enabled. The access log is on (distribution's
`log.accesslog`, Apache combined format into logs/registry.log): `accesses()` reads it back, to count
what reached the registry (blob uploads, mounts, manifest PUTs).

Two registries at once (an upstream and a target, as `gpudrv matrix fill` copies between them):
`pair_env` gives gpudrv one CA bundle trusting both and one auth file with a user for each.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

RECIPE = Path(__file__).resolve().parent
CACHE_ROOT = Path(
    os.environ.get("GPUDRV_REGISTRY_CACHE") or Path.home() / ".cache" / "gpudrv" / "registry-bin"
)
BUILD_RECIPE_REV = "1"  # bump when the build commands below change


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Module:
    dir: str
    main_module: str
    packages: dict[str, str]  # binary name -> package

    def version(self) -> str:
        text = (RECIPE / self.dir / "go.mod").read_text()
        found = re.search(rf"^\s*(?:require\s+)?{re.escape(self.main_module)}\s+(v\S+)", text, re.M)
        if not found:
            raise BuildError(f"{self.main_module} is not required in tests/registry/{self.dir}/go.mod")
        return found[1]


MODULES = (
    Module(
        "distribution",
        "github.com/distribution/distribution/v3",
        {"registry": "github.com/distribution/distribution/v3/cmd/registry", "regtool": "./regtool"},
    ),
    Module(
        "crane",
        "github.com/google/go-containerregistry",
        {"crane": "github.com/google/go-containerregistry/cmd/crane"},
    ),
)
BINARIES = [name for module in MODULES for name in module.packages]


def versions() -> dict[str, str]:
    return {module.main_module: module.version() for module in MODULES}


def version_key() -> str:
    digest = hashlib.sha256(BUILD_RECIPE_REV.encode())
    for module in MODULES:
        for name in ("go.mod", "go.sum"):
            digest.update((RECIPE / module.dir / name).read_bytes())
    digest.update((RECIPE / "distribution" / "regtool" / "main.go").read_bytes())
    found = {module.dir: module.version() for module in MODULES}
    return f"distribution-{found['distribution']}_crane-{found['crane']}_{digest.hexdigest()[:10]}"


def log(message: str) -> None:
    print(f"[registry] {message}", file=sys.stderr, flush=True)


def ensure_built() -> Path:
    """The bin folder, built first if it is not cached (under a lock: one build at a time)."""
    final = CACHE_ROOT / version_key()
    if all((final / "bin" / name).is_file() for name in BINARIES):
        return final / "bin"
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / ".build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all((final / "bin" / name).is_file() for name in BINARIES):
            return final / "bin"
        go = shutil.which("go")
        if not go:
            raise BuildError("cannot build the registry test binaries: `go` is not on PATH")
        for stale in CACHE_ROOT.glob(".tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = CACHE_ROOT / f".tmp-{final.name}-{os.getpid()}"
        try:
            _build_into(go, tmp / "bin")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / "bin"


def _build_into(go: str, out: Path) -> None:
    out.mkdir(parents=True)
    env = dict(os.environ, CGO_ENABLED="0")
    started = time.monotonic()
    log(f"building {', '.join(BINARIES)} into {out.parent} (cold: a few minutes on 2 cores; cached after)")
    info: dict[str, object] = {
        "go": subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, check=False
        ).stdout.strip()
    }
    for module in MODULES:
        version = module.version()
        command = [
            go,
            "build",
            "-mod=readonly",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            f"{out}/",
            *module.packages.values(),
        ]
        if module.dir == "distribution":  # the version `registry --version` prints
            command[5] = f"-s -w -X github.com/distribution/distribution/v3/version.version={version}"
        result = subprocess.run(
            command, cwd=RECIPE / module.dir, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise BuildError(
                f"building {module.main_module}@{version} failed (exit {result.returncode}); command: "
                f"cd tests/registry/{module.dir} && {' '.join(command)}\n{result.stderr[-4000:]}"
            )
        missing = [name for name in module.packages if not (out / name).is_file()]
        if missing:
            raise BuildError(f"building {module.main_module} produced no {', '.join(missing)}")
        info[module.main_module] = version
    info["build_seconds"] = round(time.monotonic() - started)
    (out.parent / "BUILDINFO.json").write_text(json.dumps(info, indent=2) + "\n")
    log(f"built in {info['build_seconds']} s")


# --- a running registry ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


Auth = Literal["htpasswd", "token"]
USER, PASSWORD = "gpudrv", "s3cret-pull"  # gpudrv's: pull only (with token auth)
PUSHER, PUSHER_PASSWORD = "pusher", "s3cret-push"  # crane's: push and delete too
REPOSITORY = "nvidia/driver"
PLATFORMS = ("linux/amd64", "linux/arm64")
LAYER_SIZE = 256 * 1024  # bytes of random data per platform layer: enough to count bytes


@dataclass(frozen=True)
class Access:
    """One line of the registry's access log: gorilla/handlers' Apache combined format, which
    distribution v3.1.2 writes when log.accesslog is on (see docs/registry.md)."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    size: int
    agent: str


_ACCESS = re.compile(
    r"(?P<host>\S+) \S+ (?P<user>\S+) \[(?P<time>[^\]]+)\] "
    r'"(?P<method>[A-Z]+) (?P<uri>\S+) (?P<proto>[^"]+)" '
    r'(?P<status>\d{3}) (?P<size>\d+) "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)"'
)


def parse_access(line: str) -> Access | None:
    """An access log line, or None for the registry's other log lines."""
    import urllib.parse

    found = _ACCESS.fullmatch(line.strip())
    if found is None:
        return None
    parts = urllib.parse.urlsplit(found["uri"])
    query = dict(urllib.parse.parse_qsl(parts.query))
    return Access(
        found["method"], parts.path, query, int(found["status"]), int(found["size"]), found["agent"]
    )


def pair_env(root: Path, users: Sequence[tuple[Registry, str, str]]) -> dict[str, str]:
    """gpudrv's environment for several registries at once: one CA bundle trusting each, one auth
    file with a (user, password) for each host, and no docker config of the user's."""
    import base64

    root.mkdir(parents=True, exist_ok=True)
    bundle = root / "ca-bundle.pem"
    bundle.write_text("".join(registry.ca.read_text() for registry, _, _ in users))
    auths = {
        registry.host: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
        for registry, user, password in users
    }
    auth_file = root / "auth.json"
    auth_file.write_text(json.dumps({"auths": auths}, indent=2) + "\n")
    (root / "home").mkdir(exist_ok=True)
    return {
        "SSL_CERT_FILE": str(bundle),
        "HOME": str(root / "home"),
        "DOCKER_CONFIG": str(root / "home"),
        "REGISTRY_AUTH_FILE": str(auth_file),
    }


@dataclass
class Registry:
    """A registry process (and its token server) with its own folder; start() and stop() it."""

    bin: Path
    root: Path
    auth: Auth = "htpasswd"
    port: int = field(default_factory=free_port)
    token_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def repository(self) -> str:
        return f"{self.host}/{REPOSITORY}"

    @property
    def ca(self) -> Path:
        return self.root / "certs" / "ca.pem"

    def prepare(self) -> None:
        """Certificate, htpasswd, config and the auth file for gpudrv and crane (docker config format)."""
        (self.root / "storage").mkdir(parents=True, exist_ok=True)
        self._run(self.bin / "regtool", "cert", str(self.root / "certs"))
        lines = [
            self._run(self.bin / "regtool", "htpasswd", *pair)
            for pair in ((USER, PASSWORD), (PUSHER, PUSHER_PASSWORD))
        ]
        (self.root / "htpasswd").write_text("".join(lines))
        self.write_auth(self.auth_file, USER, PASSWORD)
        self.write_auth(self.root / "pusher" / "config.json", PUSHER, PUSHER_PASSWORD)
        (self.root / "home").mkdir(exist_ok=True)
        (self.root / "config.yml").write_text(self._config())

    def write_auth(self, path: Path, user: str, password: str) -> Path:
        import base64

        path.parent.mkdir(parents=True, exist_ok=True)
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        path.write_text(json.dumps({"auths": {self.host: {"auth": pair}}}, indent=2) + "\n")
        return path

    def _config(self) -> str:
        certs = self.root / "certs"
        if self.auth == "htpasswd":
            auth = f"  htpasswd:\n    realm: gpudrv-test\n    path: {self.root / 'htpasswd'}\n"
        else:
            auth = (
                f"  token:\n    realm: https://localhost:{self.token_port}/token\n"
                f"    service: gpudrv-test-registry\n    issuer: gpudrv-test-issuer\n"
                f"    jwks: {certs / 'jwks.json'}\n"
            )
        return (
            "version: 0.1\n"
            "log:\n  level: warn\n  accesslog:\n    disabled: false\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.root / 'storage'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
            f"  tls:\n    certificate: {certs / 'ca.pem'}\n    key: {certs / 'key.pem'}\n"
            "  debug:\n    addr: ''\n"
            f"auth:\n{auth}"
        )

    @property
    def auth_file(self) -> Path:
        return self.root / "gpudrv-auth.json"

    def env(self, auth_file: Path | None = None) -> dict[str, str]:
        """For gpudrv: trust the test CA; credentials from `auth_file` (default: gpudrv's, pull only),
        no docker config of the user's (HOME and DOCKER_CONFIG point into the registry's folder)."""
        return {
            "SSL_CERT_FILE": str(self.ca),
            "HOME": str(self.root / "home"),
            "DOCKER_CONFIG": str(self.root / "home"),
            "REGISTRY_AUTH_FILE": str(auth_file or self.auth_file),
        }

    def crane_env(self) -> dict[str, str]:
        return {"SSL_CERT_FILE": str(self.ca), "DOCKER_CONFIG": str(self.root / "pusher")}

    def start(self) -> None:
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        if self.auth == "token":
            self._spawn(
                [str(self.bin / "regtool"), "token", f"127.0.0.1:{self.token_port}", str(self.root / "certs"),
                 str(self.root / "htpasswd"), "gpudrv-test-issuer", "gpudrv-test-registry"],
                logs / "token.log",
            )  # fmt: skip
            self._wait_port(self.token_port)
        self._spawn(
            [str(self.bin / "registry"), "serve", str(self.root / "config.yml")], logs / "registry.log"
        )
        self._wait_ready()

    def _spawn(self, command: list[str], log_file: Path) -> None:
        with log_file.open("ab") as out:
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def _wait_port(self, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return
            self._check_alive()
            time.sleep(0.05)
        raise RuntimeError(
            f"nothing listens on 127.0.0.1:{port} after {timeout} s; logs in {self.root / 'logs'}"
        )

    def _wait_ready(self, timeout: float = 30) -> None:
        import ssl

        self._wait_port(self.port, timeout)
        context = ssl.create_default_context(cafile=str(self.ca))
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"https://{self.host}/v2/", context=context, timeout=2)
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # serving, and asking for credentials
                    return
                error: Exception = exc
            except OSError as exc:
                error = exc
            if time.monotonic() > deadline:
                raise RuntimeError(f"registry at {self.host} not ready: {error}")
            self._check_alive()
            time.sleep(0.1)

    def _check_alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                logs = "\n".join(
                    path.read_text(errors="replace")[-2000:] for path in (self.root / "logs").glob("*.log")
                )
                raise RuntimeError(f"{process.args[0]} exited with {process.returncode}:\n{logs}")

    def stop(self) -> None:
        """Stop our own processes (by their pids), registry first."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes.clear()

    # --- images, with crane ---

    def crane(self, *args: str) -> str:
        return self._run(self.bin / "crane", *args, env=self.crane_env())

    def push(self, tags: Sequence[str], content: str = "precompiled driver test image") -> None:
        """A small image (one tiny layer holding `content`) under each tag: one `crane append`, then
        `crane tag`s; tags pushed with the same content share the manifest."""
        if not tags:
            return
        layer = self._layer(content)
        first = self.repository + ":" + tags[0]
        self.crane("append", "--new_layer", str(layer), "--new_tag", first)
        for tag in tags[1:]:
            self.crane("tag", first, tag)

    def put_tags(self, tags: Sequence[str], content: str = "precompiled driver test image") -> None:
        """Many tags fast (for the benchmark): push one image with crane, then PUT its manifest under
        each tag over HTTP with the pusher's credentials."""
        import base64
        import ssl

        self.push(tags[:1], content)
        manifest = self.crane("manifest", f"{self.repository}:{tags[0]}").encode()
        media_type = json.loads(manifest)["mediaType"]
        basic = "Basic " + base64.b64encode(f"{PUSHER}:{PUSHER_PASSWORD}".encode()).decode()
        context = ssl.create_default_context(cafile=str(self.ca))
        authorization = basic
        if self.auth == "token":
            scope = f"repository:{REPOSITORY}:pull,push"
            url = f"https://localhost:{self.token_port}/token?service=gpudrv-test-registry&scope={scope}"
            request = urllib.request.Request(url, headers={"Authorization": basic})
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                authorization = "Bearer " + json.loads(answer.read())["token"]
        for tag in tags[1:]:
            request = urllib.request.Request(
                f"https://{self.host}/v2/{REPOSITORY}/manifests/{tag}",
                data=manifest,
                method="PUT",
                headers={"Authorization": authorization, "Content-Type": media_type},
            )
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                answer.read()

    def delete(self, tag: str) -> None:
        """Delete the tag's manifest (by its digest, as the registry deletes)."""
        digest = self.crane("digest", f"{self.repository}:{tag}").strip()
        self.crane("delete", f"{self.repository}@{digest}")

    def push_index(
        self,
        tag: str,
        seed: str | None = None,
        size: int = LAYER_SIZE,
        repository: str = REPOSITORY,
        docker: bool = False,
        *,
        env: Mapping[str, str] | None = None,
        platforms: Sequence[str] = PLATFORMS,
    ) -> str:
        """A multi-platform image under the tag: for each of `platforms` an image with one layer of
        `size` random bytes (deterministic from `seed`, default the tag; different per platform) and
        `env` in its config's Env, in an OCI image index (`docker`: Docker manifests in a manifest
        list). Returns the index digest."""
        reference = f"{self.host}/{repository}"
        children = []
        for platform in platforms:
            layer = self.random_layer(f"{seed or tag}/{platform}", size)
            empty_base = [] if docker else ["--oci-empty-base"]
            self.crane("append", "--new_layer", str(layer), "--new_tag", f"{reference}:{tag}", *empty_base)
            # The platform goes into the config: a new image, pushed by digest only.
            children.append(
                self.crane(
                    "mutate", f"{reference}:{tag}", "--set-platform", platform, *env_flags(env),
                    "--repo", reference,
                ).strip()
            )  # fmt: skip
        manifests = [part for child in children for part in ("--manifest", child)]
        empty_index = ["--docker-empty-base"] if docker else []
        self.crane("index", "append", *manifests, "--tag", f"{reference}:{tag}", *empty_index)
        return self.digest(tag, repository)

    def push_image(
        self, tag: str, env: Mapping[str, str], platform: str = "linux/amd64", size: int = 1024
    ) -> str:
        """A single-platform image (no index) under the tag, `env` in its config's Env; its digest."""
        layer = self.random_layer(f"{tag}/{platform}", size)
        self.crane(
            "append", "--new_layer", str(layer), "--new_tag", f"{self.repository}:{tag}", "--oci-empty-base"
        )
        self.crane(
            "mutate", f"{self.repository}:{tag}", "--set-platform", platform, *env_flags(env),
            "--tag", f"{self.repository}:{tag}",
        )  # fmt: skip
        return self.digest(tag)

    def digest(self, tag: str, repository: str = REPOSITORY) -> str:
        return self.crane("digest", f"{self.host}/{repository}:{tag}").strip()

    def random_layer(self, seed: str, size: int) -> Path:
        """A layer tarball holding `size` random bytes from `seed` (the same seed, the same bytes and
        tar; crane gzips it, and gzip of random bytes is no smaller)."""
        key = hashlib.sha256(f"{seed}/{size}".encode()).hexdigest()[:16]
        layer = self.root / "layers" / f"{key}.tar"
        if not layer.exists():
            layer.parent.mkdir(parents=True, exist_ok=True)
            payload = random.Random(key).randbytes(size)
            info = tarfile.TarInfo("driver/payload.bin")
            info.size, info.mtime, info.mode = size, 0, 0o644
            with tarfile.open(layer, "w", format=tarfile.USTAR_FORMAT) as archive:
                archive.addfile(info, io.BytesIO(payload))
        return layer

    # --- what reached the registry: its access log ---

    def accesses(self, agent: str | None = "gpudrv/") -> list[Access]:
        """Every request the registry logged (by clients whose User-Agent starts with `agent`; None:
        all), oldest first. The log is written once a request is answered."""
        text = (self.root / "logs" / "registry.log").read_text(errors="replace")
        found = (parse_access(line) for line in text.splitlines())
        return [item for item in found if item and (agent is None or item.agent.startswith(agent))]

    def count(self, method: str, path: str, status: int | None = None, agent: str | None = "gpudrv/") -> int:
        """Requests by method and a regular expression the path must fully match (and status)."""
        pattern = re.compile(path)
        return sum(
            1
            for item in self.accesses(agent)
            if item.method == method and pattern.fullmatch(item.path) and status in (None, item.status)
        )

    def uploaded(self, agent: str | None = "gpudrv/") -> list[str]:
        """The digests of blob uploads completed (PUT .../blobs/uploads/<id>?digest=..., 201)."""
        return [
            item.query["digest"]
            for item in self.accesses(agent)
            if item.method == "PUT" and "/blobs/uploads/" in item.path and item.status == 201
            and "digest" in item.query
        ]  # fmt: skip

    def mounted(self, agent: str | None = "gpudrv/") -> list[str]:
        """The digests of cross-repository mounts (POST .../blobs/uploads/?mount=...&from=..., 201)."""
        return [
            item.query["mount"]
            for item in self.accesses(agent)
            if item.method == "POST" and item.path.endswith("/blobs/uploads/") and item.status == 201
            and "mount" in item.query
        ]  # fmt: skip

    def manifest_puts(self, agent: str | None = "gpudrv/") -> list[str]:
        """The references of manifests PUT (201), tag or digest."""
        return [
            item.path.rsplit("/", 1)[-1]
            for item in self.accesses(agent)
            if item.method == "PUT" and "/manifests/" in item.path and item.status == 201
        ]

    def _layer(self, content: str) -> Path:
        folder = self.root / "layers" / hashlib.sha256(content.encode()).hexdigest()[:12]
        layer = folder / "layer.tar"
        if not layer.exists():
            folder.mkdir(parents=True, exist_ok=True)
            payload = folder / "driver-version.txt"
            payload.write_text(content + "\n")
            with tarfile.open(layer, "w") as archive:
                archive.add(payload, arcname="driver-version.txt")
        return layer

    def _run(self, *command: str | Path, env: dict[str, str] | None = None) -> str:
        result = subprocess.run(
            [str(part) for part in command],
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, command))} failed ({result.returncode}): {result.stderr}")
        return result.stdout


def env_flags(env: Mapping[str, str] | None) -> list[str]:
    """`crane mutate --env` flags, one per variable, in order."""
    return [part for name, value in (env or {}).items() for part in ("--env", f"{name}={value}")]


# --- for matrix fill: a fleet that needs images, a fill killed mid-copy -------------------------------


def gpu_node(name: str, kernel: str) -> str:
    """A lab GPU node's manifest (driver 550, Ubuntu 24.04) on `kernel`: it needs 550-<kernel>-ubuntu24.04."""
    return (
        f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n"
        '    nvidia.com/gpu.present: "true"\n    nvidia.com/cuda.driver.major: "550"\n'
        f'    feature.node.kubernetes.io/kernel-version.full: "{kernel}"\n'
        '    feature.node.kubernetes.io/system-os_release.ID: "ubuntu"\n'
        '    feature.node.kubernetes.io/system-os_release.VERSION_ID: "24.04"\n'
    )


def write_fleet(root: Path, kernels: Sequence[str], matrix: str) -> Path:
    """A fleet repository in `root`: nodes/gpu-N.yaml, one GPU node per kernel, and the matrix text."""
    (root / "nodes").mkdir(parents=True)
    for number, kernel in enumerate(kernels):
        (root / "nodes" / f"gpu-{number}.yaml").write_text(gpu_node(f"gpu-{number}", kernel))
    (root / "matrix").mkdir()
    (root / "matrix" / "support-matrix.csv").write_text(matrix)
    return root


def kill_after_uploads(
    child: subprocess.Popen[bytes], target: Registry, uploads: int, poll: float, timeout: float = 60
) -> bytes:
    """SIGKILL `child` once `uploads` blob uploads reached `target` (or it ended, or `timeout`);
    its stderr."""
    try:
        deadline = time.monotonic() + timeout
        while len(target.uploaded()) < uploads and child.poll() is None and time.monotonic() < deadline:
            time.sleep(poll)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        _, errors = child.communicate(timeout=30)
    return errors


@contextlib.contextmanager
def running(root: Path, auth: Auth = "htpasswd") -> Iterator[Registry]:
    registry = Registry(ensure_built(), root, auth)
    registry.prepare()
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


def main() -> None:
    """`python -m tests.registry.harness [--auth token] [--pair] [--push TAG ...] DIR`: a registry to try
    gpudrv on by hand (--pair: an upstream and a target, the tags pushed upstream as multi-platform
    images, for `gpudrv matrix fill`); prints the variables to export, serves until interrupted, then
    stops."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.registry.harness", description=main.__doc__)
    parser.add_argument("dir", type=Path, help="a new folder for its certificate, storage and logs")
    parser.add_argument("--auth", choices=["htpasswd", "token"], default="htpasswd")
    parser.add_argument("--pair", action="store_true", help="two registries: an upstream and a target")
    parser.add_argument("--push", nargs="*", default=[], metavar="TAG", help="tags to push an image under")
    options = parser.parse_args()
    root = options.dir.resolve()
    # Blocked, so sigwait takes them: the registries are stopped on the way out, whichever came.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    with contextlib.ExitStack() as stack:
        if options.pair:
            upstream = stack.enter_context(running(root / "upstream", options.auth))
            target = stack.enter_context(running(root / "target", options.auth))
            for tag in options.push:
                upstream.push_index(tag)
            env = pair_env(root / "gpudrv", [(upstream, USER, PASSWORD), (target, PUSHER, PUSHER_PASSWORD)])
            hint = f"gpudrv matrix fill --upstream {upstream.repository} --registry {target.repository}"
        else:
            registry = stack.enter_context(running(root, options.auth))
            registry.push(options.push)
            env = registry.env()
            hint = f"gpudrv matrix verify --registry {registry.repository}"
        for name, value in env.items():
            if name != "HOME":
                print(f"export {name}={value}")
        print(f"# {hint}", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    main()
