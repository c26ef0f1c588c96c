"""A demo fleet in a real git repository: the fleet page's browser test and the README's screenshot.

Three OS versions, three driver branches, a matrix grown over ten pull requests by three people (one
row retired on the way), 36 GPU nodes: two images the nodes need are missing from the matrix, one node
has no kernel label, and upgrades stand at several states, two of them failed and one refused by a
budget. One failure reason and one author carry characters HTML
must escape (git itself drops < and > from names), which the page must show as text.

    python -m tests.browser.demo DIR     # writes DIR/fleet.html (and the repository under DIR/repo)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_gpudrv

HEADER = "driver_branch,kernel,os_tag"
KERNELS = {
    "ubuntu22.04": ("5.15.0-107-generic", "5.15.0-119-generic", "5.15.0-124-generic"),
    "ubuntu24.04": ("6.8.0-45-generic", "6.8.0-49-generic", "6.8.0-52-generic"),
    "rhel9": ("5.14.0-427.13.1.el9_4.x86_64",),
}
OS_LABELS = {"ubuntu22.04": ("ubuntu", "22.04"), "ubuntu24.04": ("ubuntu", "24.04"), "rhel9": ("rhel", "9.4")}
# (author, PR, rows added, rows removed): the matrix's history, one squash-merged PR a week.
PULLS: tuple[tuple[str, int, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Ana Ops", 3, ("535,5.15.0-107-generic,ubuntu22.04", "550,5.15.0-107-generic,ubuntu22.04"), ()),
    ("Bo Builder", 7, ("550,5.15.0-119-generic,ubuntu22.04", "535,5.15.0-119-generic,ubuntu22.04"), ()),
    ("Ana Ops", 12, ("550,6.8.0-45-generic,ubuntu24.04",), ()),
    ("Chen Kernel", 15, ("550,6.8.0-49-generic,ubuntu24.04", "535,6.8.0-45-generic,ubuntu24.04"), ()),
    (
        "Bo Builder",
        21,
        ("535,5.14.0-427.13.1.el9_4.x86_64,rhel9", "550,5.14.0-427.13.1.el9_4.x86_64,rhel9"),
        (),
    ),
    ("Ana Ops", 24, (), ("535,5.15.0-107-generic,ubuntu22.04",)),
    ("Chen Kernel", 30, ("570,6.8.0-45-generic,ubuntu24.04", "570,6.8.0-49-generic,ubuntu24.04"), ()),
    ("Dee O'Brien & Co", 33, ("550,6.8.0-52-generic,ubuntu24.04",), ()),
    ("Bo Builder", 38, ("570,5.15.0-119-generic,ubuntu22.04", "550,5.15.0-124-generic,ubuntu22.04"), ()),
    ("Chen Kernel", 41, ("570,5.14.0-427.13.1.el9_4.x86_64,rhel9",), ()),
)
MISSING = ("570-6.8.0-52-generic-ubuntu24.04", "535-5.15.0-124-generic-ubuntu22.04")
HOSTILE_REASON = "drain refused at drain-required: <img src=x onerror=alert(1)> ##[error]boom"


def nodes() -> list[dict[str, object]]:
    """(name, branch, os tag, kernel, upgrade state, failure reason) as Node documents."""
    plan = [
        # branch, os tag, kernel, count, states
        ("550", "ubuntu22.04", "5.15.0-119-generic", 8, ["upgrade-done"] * 5),
        ("535", "ubuntu22.04", "5.15.0-119-generic", 4, []),
        ("550", "ubuntu22.04", "5.15.0-107-generic", 2, []),
        ("550", "ubuntu22.04", "5.15.0-124-generic", 2, ["pod-restart-required"]),
        ("535", "ubuntu22.04", "5.15.0-124-generic", 1, ["upgrade-failed"]),
        ("550", "ubuntu24.04", "6.8.0-45-generic", 6, ["upgrade-done", "upgrade-done", "drain-required"]),
        ("570", "ubuntu24.04", "6.8.0-49-generic", 4, ["validation-required"]),
        ("570", "ubuntu24.04", "6.8.0-52-generic", 3, ["upgrade-failed", "upgrade-required"]),
        ("550", "ubuntu24.04", "6.8.0-52-generic", 2, []),
        ("550", "rhel9", "5.14.0-427.13.1.el9_4.x86_64", 3, ["paused"]),
    ]
    documents: list[dict[str, object]] = []
    for branch, os_tag, kernel, count, states in plan:
        os_id, version = OS_LABELS[os_tag]
        pool = f"{os_id}{version.split('.')[0]}-{branch}"
        for index in range(count):
            name = f"gpu-{pool}-{kernel.split('-')[1].split('.')[0]}-{index}"
            labels = {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/cuda.driver.major": branch,
                "feature.node.kubernetes.io/kernel-version.full": kernel,
                "feature.node.kubernetes.io/system-os_release.ID": os_id,
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
            }
            annotations: dict[str, str] = {}
            if index < len(states):
                labels["nvidia.com/gpu-driver-upgrade-state"] = states[index]
                if states[index] == "upgrade-failed" and branch == "570":
                    annotations["gpudrv.dev/upgrade-failure"] = HOSTILE_REASON
            metadata: dict[str, object] = {"name": name, "labels": labels}
            if annotations:
                metadata["annotations"] = annotations
            documents.append({"apiVersion": "v1", "kind": "Node", "metadata": metadata})
    documents.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-new-node-0",
                "labels": {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/cuda.driver.major": "550",
                    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
                },
            },
        }
    )
    return documents


def yaml_text(documents: list[dict[str, object]]) -> str:
    """JSON is YAML: one Node per document, every value a quoted string."""
    import json

    return "".join(f"---\n{json.dumps(document, indent=2)}\n" for document in documents)


def git(root: Path, *args: str, author: str = "Ana Ops", day: int = 0) -> None:
    date = f"2026-0{1 + day // 28}-{1 + day % 28:02d}T10:00:00+00:00"
    who = {"NAME": author, "EMAIL": "dev@example.com", "DATE": date}
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in who.items()}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def build(root: Path) -> Path:
    """The demo repository at `root`: matrix/support-matrix.csv with its history, clusters/demo."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    rows: list[str] = []
    matrix = root / "matrix" / "support-matrix.csv"
    matrix.parent.mkdir(parents=True, exist_ok=True)
    nodes_dir = root / "clusters" / "demo" / "nodes"
    nodes_dir.mkdir(parents=True, exist_ok=True)
    (nodes_dir / "gpu-nodes.yaml").write_text(yaml_text(nodes()))
    matrix.write_text(HEADER + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "The demo fleet and an empty matrix")
    for week, (author, pr, added, removed) in enumerate(PULLS, start=1):
        rows = [row for row in rows if row not in removed] + list(added)
        matrix.write_text("\n".join((HEADER, *rows)) + "\n")
        verb = "Retire" if removed and not added else "Add"
        git(root, "add", "-A", author=author, day=7 * week)
        git(root, "commit", "-q", "-m", f"{verb} driver images (#{pr})", author=author, day=7 * week)
    return root


def render(root: Path) -> str:
    """`gpudrv report --from clusters/demo -o html` in the demo repository, at a fixed time."""
    result = run_gpudrv(
        "report", "--from", "clusters/demo", "-o", "html", cwd=root, env={"SOURCE_DATE_EPOCH": "1780000000"}
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


if __name__ == "__main__":
    out = Path(sys.argv[1])
    page = render(build(out / "repo"))
    (out / "fleet.html").write_text(page)
    print(out / "fleet.html")
