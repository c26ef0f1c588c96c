"""The real Helm and the GPU Operator's own chart, for every test that runs them: the chart
differential (tests/helm) and the operator installed by `helm install` (tests/e2e/test_helm_operator.py).

Helm is helm.sh/helm/v3 built from the Go module proxy (scripts/helm build, cached); the chart is
deployments/gpu-operator of the operator module tests/operator/go.mod pins (the operator the e2e tier
runs), copied out of the read-only module cache. Its dependency (node-feature-discovery) ships in its
charts/ folder, so Helm needs no repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

OPERATOR_MODULE = "github.com/NVIDIA/gpu-operator"


def helm_binary() -> Path:
    """scripts/helm build: the binary's path (built once, then cached)."""
    proc = subprocess.run(
        [str(REPO / "scripts" / "helm"), "build"], capture_output=True, text=True, check=False, timeout=3600
    )
    assert proc.returncode == 0, f"scripts/helm build failed:\n{proc.stderr[-3000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


def operator_module_version() -> str:
    text = (REPO / "tests" / "operator" / "go.mod").read_text()
    m = re.search(rf"^\s*{re.escape(OPERATOR_MODULE)}\s+(v\S+)", text, re.M)
    assert m, "tests/operator/go.mod pins no gpu-operator"
    return m.group(1)


def chart_copy(folder: Path) -> Path:
    """A writable copy of the pinned module's chart in `folder` (downloaded from the proxy if not cached)."""
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{OPERATOR_MODULE}@{operator_module_version()}"],
        cwd=REPO / "tests" / "operator",
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source = Path(json.loads(proc.stdout)["Dir"]) / "deployments" / "gpu-operator"
    copy = folder / "gpu-operator"
    shutil.copytree(source, copy)
    for p in [copy, *copy.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert (copy / "charts" / "node-feature-discovery" / "Chart.yaml").is_file()
    return copy


def helm_env(home: Path) -> dict[str, str]:
    """Helm's own folders under `home`: nothing of the user's (repositories, registries) is read."""
    env = dict(os.environ, HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"))
    env["HELM_DATA_HOME"] = str(home / "data")
    return env
