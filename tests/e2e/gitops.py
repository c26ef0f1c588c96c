"""A GitOps copy of the lab for upgrade tests: a temporary git repo on `main`, applied to the cluster."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reconciler.core.upgrades.upgrade import ORDER
from tests.conftest import REPO, gpudrv_command, gpudrv_env
from tests.e2e.conftest import Kube

NS = "gpu-drv"
LAB_NODES = ["lab-node-0", "lab-node-1", "lab-node-2", "lab-node-3"]
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
# The GPU Operator's upgrade states, in order; tests/unit/test_upgrade.py pins them literally.
STATES = [str(state) for state in ORDER]
# The cluster may have other GPU nodes (a developer's own experiments, another test's): the lab's copy
# labels its nodes with LAB_LABEL and keeps its workloads on them (confine), and the commands that list
# nodes are scoped to them with -l (scoped), so nothing else is counted, audited or scheduled on.
LAB_LABEL = "e2e.gpudrv.dev/lab"
LAB_SELECTOR = f"{LAB_LABEL}=true"
SCOPED = {"audit", "status", "report", "explain", "diff", "plan", "apply"}
_POD_SPECS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
}


def confine(folder: Path) -> None:
    """In a copy of the lab (clusters/lab under `folder`): every Node gets LAB_LABEL, every workload a
    nodeSelector for it (ANDed with its own placement, so the lab's scheduling is the same)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    yaml = YAML(typ="rt")
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)  # the lab's own style
    yaml.preserve_quotes = True  # set_driver edits the quoted driver labels as the lab writes them
    true = DoubleQuotedScalarString("true")
    for path in sorted((folder / "clusters" / "lab").rglob("*.yaml")):
        documents = list(yaml.load_all(path.read_text()))
        for document in documents:
            kind = document.get("kind") if isinstance(document, dict) else None
            if kind == "Node":
                document["metadata"].setdefault("labels", {})[LAB_LABEL] = true
            elif kind in _POD_SPECS:
                spec = document
                for key in _POD_SPECS[kind]:
                    spec = spec[key]
                spec.setdefault("nodeSelector", {})[LAB_LABEL] = true
        with path.open("w") as handle:
            yaml.dump_all(documents, handle)


def scoped(args: tuple[str, ...]) -> tuple[str, ...]:
    """The command, scoped to the lab's nodes when it lists nodes."""
    if args and args[0] in SCOPED:
        return (args[0], "-l", LAB_SELECTOR, *args[1:])
    return args


@dataclass
class GitLab:
    root: Path
    kube: Kube

    @classmethod
    def create(cls, kube: Kube, folder: Path) -> GitLab:
        shutil.copytree(REPO / "matrix", folder / "matrix")
        shutil.copytree(REPO / "clusters", folder / "clusters")
        node_2 = (folder / "clusters/lab/nodes/lab-node-2.yaml").read_text()
        node_3 = node_2.replace("lab-node-2", "lab-node-3").replace("6.8.0-45-generic", "6.8.0-52-generic")
        (folder / "clusters/lab/nodes/lab-node-3.yaml").write_text(node_3)
        with (folder / "matrix/support-matrix.csv").open("a") as handle:
            handle.write("550,6.8.0-52-generic,ubuntu24.04\n")
        confine(folder)
        lab = cls(folder, kube)
        lab.git("init", "-q", "-b", "main")
        lab.commit("the lab fleet")
        return lab

    def git(self, *args: str) -> str:
        identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
        result = subprocess.run(
            ["git", *identity, *args], cwd=self.root, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def gpudrv(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kube.gpudrv(*scoped(args), cwd=self.root)

    def start_gpudrv(self, *args: str) -> subprocess.Popen[str]:
        """gpudrv running in the background, to be killed or waited for by the test."""
        return subprocess.Popen(
            [*gpudrv_command(), *scoped(args)],
            cwd=self.root,
            env=gpudrv_env(self.kube.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def set_driver(self, node: str, major: str, minor: str, rev: str) -> None:
        path = self.root / f"clusters/lab/nodes/{node}.yaml"
        text = path.read_text()
        for key, value in (("major", major), ("minor", minor), ("rev", rev)):
            text = re.sub(rf'(nvidia.com/cuda.driver.{key}: )"[^"]*"', rf'\g<1>"{value}"', text)
        path.write_text(text)

    def set_min_available(self, value: int) -> None:
        path = self.root / "clusters/lab/workloads/trainer.yaml"
        path.write_text(re.sub(r"minAvailable: \d+", f"minAvailable: {value}", path.read_text()))

    # --- the cluster side ----------------------------------------------------------------------------

    def deploy(self) -> None:
        """Nodes, namespace, the trainer spread one per node, and its budget."""
        workloads = self.root / "clusters/lab/workloads"
        self.kube.run(
            "apply", "-f", str(workloads / "namespace.yaml"), "-f", str(self.root / "clusters/lab/nodes")
        )
        for name in LAB_NODES:
            self.kube.run("wait", "--for=condition=Ready", f"node/{name}", "--timeout=60s")
        self.apply_workloads(workloads / "trainer.yaml")
        self.kube.wait_for("4 trainers Running", lambda: len(self.running("app=trainer")) == 4)
        # confine() keeps the trainers on the lab's nodes: the upgrade scenario needs one per lab node.
        assert sorted(self.running("app=trainer").values()) == LAB_NODES
        self.kube.wait_for(
            "trainer-pdb status", lambda: self.pdb_status("trainer-pdb").get("currentHealthy") == 4
        )

    def apply_workloads(self, path: Path) -> None:
        """`kubectl apply` of a workloads file, but its PodDisruptionBudgets server-side as field manager
        gpudrv: gpudrv changes a budget git declares only where no other manager owns the field (a
        budget kubectl's client-side apply wrote is kubectl-client-side-apply's), docs/lab-mode.md."""
        from ruamel.yaml import YAML

        documents = [doc for doc in YAML(typ="safe").load_all(path.read_text()) if isinstance(doc, dict)]
        budgets = [doc for doc in documents if doc.get("kind") == "PodDisruptionBudget"]
        others = [doc for doc in documents if doc.get("kind") != "PodDisruptionBudget"]
        if others:
            self.kube.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": others}))
        if budgets:
            listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": budgets})
            self.kube.apply(listed, "--server-side", "--field-manager=gpudrv")

    def _namespace_exists(self) -> bool:
        return self.kube.run("get", "namespace", NS, "--ignore-not-found", "-o", "name").stdout.strip() != ""

    def running(self, selector: str) -> dict[str, str]:
        pods = self.kube.get("pods", "-n", NS, "-l", selector)["items"]
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        }

    def pdb_status(self, name: str) -> dict[str, int]:
        status: dict[str, int] = self.kube.get("pdb", name, "-n", NS).get("status", {})
        return status

    def node(self, name: str) -> dict[str, object]:
        node: dict[str, object] = self.kube.get("node", name)
        return node

    def labels(self, name: str) -> dict[str, str]:
        metadata = self.node(name)["metadata"]
        assert isinstance(metadata, dict)
        return dict(metadata.get("labels") or {})

    def cordoned(self, name: str) -> bool:
        spec = self.node(name)["spec"]
        assert isinstance(spec, dict)
        return bool(spec.get("unschedulable"))

    def teardown(self) -> None:
        self.kube.run(
            "delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=90s", check=False
        )
        self.kube.run("delete", "node", *LAB_NODES, "--ignore-not-found", check=False)
