"""The NVIDIA Container Toolkit's own requirement check, built as a Go test binary for the differential.

tests/toolkit/go.mod pins github.com/NVIDIA/nvidia-container-toolkit; `go mod download` fetches that
module from the Go module proxy and checks it against tests/toolkit/go.sum. The toolkit's packages are
internal, so differential_test.go.txt is compiled into its package internal/requirements with
`go test -c -overlay` (Go refuses overlays of files in the module cache: the module is copied to the
build folder first, outside the repository, and removed after the build). The binary is cached in
`${GPUDRV_TOOLKIT_CACHE:-~/.cache/gpudrv/toolkit}/<version>_<hash>/differential.test`, the hash
covering go.mod, go.sum, the Go file and the recipe. A failed build raises BuildError with its output.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

RECIPE = Path(__file__).resolve().parent
CACHE_ROOT = Path(os.environ.get("GPUDRV_TOOLKIT_CACHE") or Path.home() / ".cache" / "gpudrv" / "toolkit")
MODULE = "github.com/NVIDIA/nvidia-container-toolkit"
PACKAGE = "internal/requirements"
GO_FILE = RECIPE / "differential_test.go.txt"
BUILD_RECIPE_REV = "1"  # bump when the build commands below change
BINARY = "differential.test"


class BuildError(RuntimeError):
    pass


def version() -> str:
    found = re.search(
        rf"^\s*(?:require\s+)?{re.escape(MODULE)}\s+(v\S+)", (RECIPE / "go.mod").read_text(), re.M
    )
    if not found:
        raise BuildError(f"{MODULE} is not required in tests/toolkit/go.mod")
    return found[1]


def version_key() -> str:
    digest = hashlib.sha256(BUILD_RECIPE_REV.encode())
    for path in (RECIPE / "go.mod", RECIPE / "go.sum", GO_FILE):
        digest.update(path.read_bytes())
    return f"{version()}_{digest.hexdigest()[:10]}"


def log(message: str) -> None:
    print(f"[toolkit] {message}", file=sys.stderr, flush=True)


def ensure_built() -> Path:
    """The test binary, built first if it is not cached (under a lock: one build at a time)."""
    final = CACHE_ROOT / version_key()
    if (final / BINARY).is_file():
        return final / BINARY
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / ".build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / BINARY).is_file():
            return final / BINARY
        go = shutil.which("go")
        if not go:
            raise BuildError("cannot build the toolkit's differential test: `go` is not on PATH")
        for stale in CACHE_ROOT.glob(".tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = CACHE_ROOT / f".tmp-{final.name}-{os.getpid()}"
        try:
            _build_into(go, tmp)
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / BINARY


def _run(command: list[str], cwd: Path, what: str) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=1800)
    if result.returncode != 0:
        raise BuildError(
            f"{what} failed (exit {result.returncode}); command: cd {cwd} && {' '.join(command)}\n"
            f"{(result.stdout + result.stderr)[-4000:]}"
        )
    return result.stdout


def _build_into(go: str, out: Path) -> None:
    out.mkdir(parents=True)
    started = time.monotonic()
    pinned = version()
    log(f"building {MODULE}@{pinned}'s {PACKAGE} with gpudrv's differential test into {out} (cached after)")
    # The download is checked against tests/toolkit/go.sum; the build against the toolkit's own go.sum.
    listed = _run([go, "mod", "download", "-json", f"{MODULE}@{pinned}"], RECIPE, "go mod download")
    source = Path(json.loads(listed)["Dir"])
    copy = out / "src"
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    overlay = out / "overlay.json"
    target = copy / PACKAGE / "gpudrv_differential_test.go"
    overlay.write_text(json.dumps({"Replace": {str(target): str(GO_FILE)}}))
    command = [go, "test", "-c", "-overlay", str(overlay), "-o", str(out / BINARY), f"./{PACKAGE}"]
    _run(command, copy, f"building {MODULE}@{pinned}'s differential test")
    shutil.rmtree(copy)
    overlay.unlink()
    info = {
        "module": f"{MODULE}@{pinned}",
        "go": _run([go, "env", "GOVERSION"], RECIPE, "go env").strip(),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    (out / "BUILDINFO.json").write_text(json.dumps(info, indent=2) + "\n")
    log(f"built in {info['build_seconds']} s")


def toolkit_verdicts(binary: Path, corpus: list[dict[str, object]], work: Path) -> list[dict[str, object]]:
    """Runs the toolkit over the corpus in one process: one verdict per case, in the corpus' order."""
    cases, verdicts = work / "corpus.json", work / "verdicts.json"
    cases.write_text(json.dumps(corpus))
    env = dict(os.environ, GPUDRV_CORPUS=str(cases), GPUDRV_VERDICTS=str(verdicts))
    result = subprocess.run(
        [str(binary), "-test.run", "^TestGpudrvDifferential$", "-test.count", "1"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if result.returncode != 0:
        raise BuildError(
            f"{binary} failed (exit {result.returncode}):\n{(result.stdout + result.stderr)[-4000:]}"
        )
    found: list[dict[str, object]] = json.loads(verdicts.read_text())
    return found
