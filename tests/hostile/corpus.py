"""Issue 12, item 4: a generated corpus of hostile inputs across every command.

Each family is a list of hostile inputs (manifests, matrix files, gpudrv.yaml, kubeconfigs, API server
answers, git repositories, arguments, output streams) crossed with the commands that read that input.
A case prepares a fresh workspace (a copy of the bundled lab: matrix/ and clusters/lab/), may start a
fake API server (tests/hostile/fake_api.py), and names the exit codes it allows: 2 unless the input
is merely unusual (then any of 0, 1, 2). The test (test_corpus.py) adds the promises every case keeps.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO
from tests.hostile.fake_api import Answer, FakeApi, Request, kubeconfig_text

ANY = frozenset({0, 1, 2})
ERROR = frozenset({2})
# Commands that report problems on stdout and exit 2 with nothing on stderr.
VALIDATORS = (("manifests", "validate"), ("matrix", "validate"))
NODE_FILE = "clusters/lab/nodes/lab-node-0.yaml"
HOSTILE = "::error title=injected::pwned\n::warning::x%0A##[error]y\r::notice::z"


@dataclass
class Workspace:
    """A case's directory, the environment it adds, and what to clean up afterwards."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def write(self, relative: str, content: str | bytes) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape")
        )
        return path

    def serve(self, responder: Callable[[Request], Answer]) -> FakeApi:
        fake = self.stack.enter_context(FakeApi(responder))
        self.env["KUBECONFIG"] = str(fake.kubeconfig(self.root / "kubeconfig"))
        return fake


Prepare = Callable[[Workspace], None]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    prepare: Prepare
    codes: frozenset[int] = ERROR
    process: str | None = None  # run the real entry point: "pipe-closed", "full", "stdout-closed", "plain"
    limit: float = 10.0  # seconds: the time bound
    changes_files: bool = False  # a command that may legitimately write (matrix add of a valid row)
    actions: bool | None = None  # run with GITHUB_ACTIONS=true (True), without (False), or alternate


def lab(root: Path) -> None:
    shutil.copytree(REPO / "matrix", root / "matrix")
    shutil.copytree(REPO / "clusters" / "lab", root / "clusters" / "lab")


def nothing(_: Workspace) -> None:
    pass


# --- manifests -----------------------------------------------------------------------------------------


def node(name: str = "n-x", labels: str = "") -> str:
    body = labels or '    nvidia.com/gpu.present: "true"\n'
    return f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n{body}"


LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def indented(text: str, by: int) -> str:
    return "".join(" " * by + line + "\n" for line in text.splitlines())


AFFINITY = (
    "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c, image: i}}]\n"
    "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms:"
    " [{{matchExpressions: [{{key: a, operator: {operator}, values: ['{value}']}}]}}]}}}}}}\n"
)

# Which commands must refuse a manifest: every command for what is not YAML gpudrv reads (every
# command parses every file), the commands that read Nodes for a broken Node, and so on; the others
# may succeed (an odd label value is only manifests validate's business).
ALL = frozenset({"audit", "tag", "explain", "validate", "status", "diff", "plan", "apply"})
VALIDATE = frozenset({"validate"})
WORKLOADS = frozenset({"explain"})
BUDGETS = frozenset({"diff", "plan", "apply"})
RESOURCES = frozenset({"audit", "tag", "status", "diff", "plan", "apply"})
NONE: frozenset[str] = frozenset()

# name -> (file name under clusters/lab/, content, the commands that must refuse it)
MANIFESTS: dict[str, tuple[str, str | bytes, frozenset[str]]] = {
    "deep-flow": ("nodes/x.yaml", "a: " + "[" * 10_000 + "]" * 10_000, ALL),
    "deep-block-list": ("nodes/x.yaml", "".join("  " * i + "- \n" for i in range(3_000)), ALL),
    "deep-block-map": ("nodes/x.yaml", "".join("  " * i + f"k{i}:\n" for i in range(3_000)), ALL),
    "laughs-in-node": (
        "nodes/x.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: x\n  annotations:\n" + indented(LAUGHS, 4),
        ALL,
    ),
    "laughs-in-pdb": (
        "workloads/pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p, namespace: gpu-drv}\nspec:\n"
        "  x:\n" + indented(LAUGHS, 4),
        ALL,
    ),
    "laughs-in-pod": (
        "workloads/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n"
        "  x:\n" + indented(LAUGHS, 4),
        ALL,
    ),
    "recursive-alias": ("nodes/x.yaml", "kind: Node\nmetadata: &m\n  name: x\n  self: *m\n", ALL),
    "undefined-alias": ("nodes/x.yaml", "kind: Node\nmetadata: *nowhere\n", ALL),
    "python-object-tag": (
        "nodes/x.yaml",
        "kind: Node\nmetadata: !!python/object:os.system {name: x}\n",
        ALL,
    ),
    "python-name-label": ("nodes/x.yaml", node(labels="    a: !!python/name:os.system ''\n"), ALL),
    "local-tag": ("nodes/x.yaml", "kind: !Node Node\nmetadata: {name: x}\n", ALL),
    "binary-label": ("nodes/x.yaml", node(labels="    a: !!binary aGk=\n"), ALL),
    "set-tag": ("nodes/x.yaml", "kind: Node\nmetadata: !!set {name}\n", ALL),
    "yaml-2.0": ("nodes/x.yaml", "%YAML 2.0\n---\nkind: Node\n", ALL),
    "list-of-numbers": ("nodes/x.yaml", "kind: List\nitems: [1, true, null, 'x', 2.5]\n", NONE),
    "list-items-scalar": ("nodes/x.yaml", "kind: List\nitems: 5\n", ALL),
    "list-items-mapping": ("nodes/x.yaml", "kind: List\nitems: {kind: Node}\n", ALL),
    "labels-null": (
        "nodes/x.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: x\n  labels: null\n",
        NONE,
    ),
    "labels-list": (
        "nodes/x.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: x\n  labels: [a, b]\n",
        ALL,
    ),
    "labels-scalar": (
        "nodes/x.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: x\n  labels: 5\n",
        ALL,
    ),
    "str-tagged-label": ("nodes/x.yaml", node(labels='    nvidia.com/gpu.present: !!str "true"\n'), NONE),
    "number-label": ("nodes/x.yaml", node(labels="    nvidia.com/gpu.present: true\n"), ALL),
    "null-label": ("nodes/x.yaml", node(labels="    nvidia.com/gpu.present:\n"), ALL),
    "date-label": ("nodes/x.yaml", node(labels="    a: 2024-01-01\n"), ALL),
    "huge-int-label": ("nodes/x.yaml", node(labels="    a: " + "9" * 5000 + "\n"), ALL),
    "metadata-scalar": ("nodes/x.yaml", "apiVersion: v1\nkind: Node\nmetadata: hello\n", ALL),
    "name-number": ("nodes/x.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: 5}\n", ALL),
    "name-missing": ("nodes/x.yaml", "apiVersion: v1\nkind: Node\nmetadata: {labels: {}}\n", ALL),
    "duplicate-key": ("nodes/x.yaml", "kind: Node\nmetadata:\n  name: a\n  name: b\n", ALL),
    "syntax-error": ("nodes/x.yaml", "kind: Node\nmetadata:\n\tname: [oops\n", ALL),
    "nul-byte": ("nodes/x.yaml", "kind: Node\nmetadata: {name: \x00}\n", ALL),
    "not-utf8": ("nodes/x.yaml", b"kind: Node\nmetadata: {name: \xff\xfe}\n", ALL),
    "bom-crlf": ("nodes/x.yaml", "\ufeff" + node().replace("\n", "\r\n"), NONE),
    "cr-only": ("nodes/x.yaml", node().replace("\n", "\r"), NONE),
    "line-separators": ("nodes/x.yaml", node(labels='    a: "x\u2028::error::y\u2029z\x85w"\n'), VALIDATE),
    "inject-name": ("nodes/x.yaml", node(name=json.dumps(HOSTILE)), VALIDATE),
    "inject-label-key": ("nodes/x.yaml", node(labels=f'    {json.dumps(HOSTILE)}: "v"\n'), VALIDATE),
    "inject-kernel": (
        "nodes/x.yaml",
        node(
            labels='    nvidia.com/gpu.present: "true"\n    nvidia.com/cuda.driver.major: "550"\n'
            f"    feature.node.kubernetes.io/kernel-version.full: {json.dumps(HOSTILE)}\n"
            '    feature.node.kubernetes.io/system-os_release.ID: "ubuntu"\n'
            '    feature.node.kubernetes.io/system-os_release.VERSION_ID: "22.04"\n'
        ),
        VALIDATE,
    ),
    "inject-file-name": (
        "nodes/::error::x\n::warning::y%0A##[error]z.yaml",
        "kind: Node\nmetadata: {name: [\n",
        ALL,
    ),
    "not-utf8-file-name": ("nodes/\udcff\udcfe.yaml", "kind: Node\nmetadata: {name: [\n", ALL),
    "huge-label-value": ("nodes/x.yaml", node(labels="    a: " + "v" * 1_000_000 + "\n"), VALIDATE),
    "many-labels": (
        "nodes/x.yaml",
        node(labels="".join(f"    example.com/l{i}: {i}\n" for i in range(20_000))),
        ALL,
    ),
    "many-documents": ("nodes/x.yaml", "---\n".join(node(f"m-{i}") for i in range(5_000)), NONE),
    "empty-and-comments": ("nodes/x.yaml", "# nothing\n---\n---\n# more\n", NONE),
    "merge-keys": (
        "nodes/x.yaml",
        "base: &b {nvidia.com/gpu.present: 'false'}\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: x\n"
        "  labels:\n    <<: {a: 'b'}\n",
        NONE,
    ),
    "duplicate-node": ("nodes/dup.yaml", node("lab-node-0"), ALL),
    "pdb-spec-list": (
        "workloads/pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: [1]\n",
        BUDGETS,
    ),
    "pdb-date-values": (
        "workloads/pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec:\n"
        "  minAvailable: 2024-01-01\n"
        "  selector: {matchLabels: {a: 2024-01-01}}\n",
        NONE,
    ),
    "pod-affinity-garbage": (
        "workloads/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n"
        "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:"
        " {nodeSelectorTerms: 7}}}\n",
        WORKLOADS,
    ),
    "pod-containers-scalar": (
        "workloads/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 5, nodeSelector: [a]}\n",
        WORKLOADS,
    ),
    "deployment-template-scalar": (
        "workloads/d.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: x}\n",
        WORKLOADS,
    ),
    "cluster-policy-garbage": (
        "policy.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: c}\nspec: {driver: [1, 2]}\n",
        RESOURCES,
    ),
    # Issue 30: a kind that is no string was an unhashable-type traceback in explain.
    "kind-list": ("nodes/x.yaml", "apiVersion: v1\nkind: [Node]\nmetadata: {name: x}\n", ALL),
    "kind-map": ("nodes/x.yaml", "apiVersion: v1\nkind: {a: b}\nmetadata: {name: x}\n", ALL),
    "kind-list-in-list": ("workloads/l.yaml", "kind: List\nitems:\n- kind: [Pod]\n", ALL),
    # A Gt/Lt value int() refuses (5,000 digits): the term the scheduler cannot parse, not a ValueError.
    "gt-5000-digits": ("workloads/pod.yaml", AFFINITY.format(operator="Gt", value="9" * 5000), NONE),
    "lt-5000-digits": ("workloads/pod.yaml", AFFINITY.format(operator="Lt", value="-" + "9" * 5000), NONE),
    "nvidiadriver-wrong-api": (
        "driver.yaml",
        "apiVersion: nvidia.com/v9\nkind: NVIDIADriver\nmetadata: {name: d}\nspec: 5\n",
        RESOURCES,
    ),
}

MANIFEST_COMMANDS: dict[str, tuple[str, ...]] = {
    "audit": ("audit", "--from", "clusters/lab"),
    "tag": ("tag", "lab-node-0", "--from", "clusters/lab"),
    "explain": ("explain", "--from", "clusters/lab"),
    "validate": ("manifests", "validate", "--from", "clusters/lab"),
    "status": ("status", "--from", "clusters/lab"),
    "diff": ("diff", "--from", "clusters/lab"),
    "plan": ("plan", "--from", "clusters/lab"),
    "apply": ("apply", "--from", "clusters/lab"),
}


def manifest_cases() -> Iterator[Case]:
    for name, (relative, content, refusing) in MANIFESTS.items():

        def prepare(space: Workspace, relative: str = relative, content: str | bytes = content) -> None:
            space.write(f"clusters/lab/{relative}", content)

        for command, argv in MANIFEST_COMMANDS.items():
            yield Case(f"manifest-{name}-{command}", argv, prepare, ERROR if command in refusing else ANY)

    def fifo(space: Workspace) -> None:
        os.mkfifo(space.root / "clusters/lab/nodes/fifo.yaml")  # not a regular file: never opened

    def loop(space: Workspace) -> None:
        (space.root / "clusters/lab/nodes/loop").symlink_to("..", target_is_directory=True)

    def many(space: Workspace) -> None:
        text = (space.root / NODE_FILE).read_text()
        for index in range(2_000):
            space.write(f"clusters/lab/many/n{index}.yaml", text.replace("lab-node-0", f"many-{index}"))

    for name, prepare, codes in (("fifo", fifo, ANY), ("symlink-loop", loop, ANY), ("2000-files", many, ANY)):
        for command, argv in MANIFEST_COMMANDS.items():
            yield Case(f"manifest-{name}-{command}", argv, prepare, codes, limit=20.0)

    def ten_thousand(space: Workspace) -> None:
        text = (space.root / NODE_FILE).read_text()
        for index in range(10_000):
            space.write(f"clusters/lab/many/n{index}.yaml", text.replace("lab-node-0", f"many-{index}"))

    # The hang: explain over 10,000 manifest files took over 30 s (a set rebuilt per node).
    yield Case("manifest-10000-files-explain", MANIFEST_COMMANDS["explain"], ten_thousand, ANY, limit=60.0)


# --- the matrix -----------------------------------------------------------------------------------------

HEADER = "driver_branch,kernel,os_tag\n"
MATRICES: dict[str, tuple[str | bytes | None, bool]] = {  # content (None: made by the case), refused
    "garbage": ("::: not a csv [\n", True),
    "empty": ("", True),
    "header-only": (HEADER, False),
    "wrong-header": ("kernel,driver_branch,os_tag\n", True),
    "nul": (HEADER + "550,5.15\x00,ubuntu22.04\n", True),
    "not-utf8": (HEADER.encode() + b"550,\xff\xfe,ubuntu22.04\n", True),
    "bom-crlf": (("\ufeff" + HEADER + "550,5.15.0-119-generic,ubuntu22.04\n").replace("\n", "\r\n"), True),
    "quotes": (HEADER + '"550","5.15.0-119-generic","ubuntu22.04"\n', False),
    "injection": (HEADER + f"550,{json.dumps(HOSTILE)},ubuntu22.04\n", True),
    "line-separators": (HEADER + "550,5.15\u2028::error::x,ubuntu22.04\n", True),
    "long-row": (HEADER + "550," + "k" * 1_000_000 + ",ubuntu22.04\n", True),
    "many-rows": (HEADER + "".join(f"550,5.15.0-{i}-generic,ubuntu22.04\n" for i in range(20_000)), False),
    "duplicates": (HEADER + "550,5.15.0-1-generic,ubuntu22.04\n" * 3, True),
    "fifo": (None, True),
    "directory": (None, True),
    "dev-zero": (None, True),
    "symlink-to-dev-zero": (None, True),
    "dangling-symlink": (None, True),
    "trailing-slash": (None, True),
    "symlink-loop": (None, True),  # issue 30: ELOOP and ENAMETOOLONG were tracebacks in matrix add
    "name-too-long": (None, True),
}


def prepare_matrix(name: str) -> tuple[Prepare, str]:
    """How the case makes its matrix, and the --matrix value that names it."""
    content = MATRICES[name][0]

    def prepare(space: Workspace) -> None:
        path = space.root / "m.csv"
        if content is not None:
            space.write("m.csv", content)
        elif name == "fifo":
            os.mkfifo(path)
        elif name == "directory":
            path.mkdir()
        elif name == "symlink-to-dev-zero":
            path.symlink_to("/dev/zero")
        elif name == "dangling-symlink":
            path.symlink_to("nowhere.csv")
        elif name == "symlink-loop":
            path.symlink_to("m.csv")

    given = {
        "dev-zero": "/dev/zero",
        "trailing-slash": "matrix/support-matrix.csv/",
        "name-too-long": "m" * 300 + ".csv",
    }.get(name, "m.csv")
    return prepare, given


def matrix_cases() -> Iterator[Case]:
    for name, (_, refused) in MATRICES.items():
        prepare, path = prepare_matrix(name)
        commands = {
            "validate": ("matrix", "validate", path),
            "add": ("matrix", "add", "--matrix", path, "550", "5.15.0-9-generic", "ubuntu22.04"),
            "add-tag": ("matrix", "add", "--matrix", path, "--tag", f"550-{HOSTILE}-ubuntu22.04"),
            "audit": ("audit", "--from", "clusters/lab", "--matrix", path),
            "status": ("status", "--matrix", path),
            "impact": ("matrix", "impact", "--base", "HEAD", "--from", "clusters/lab", "--matrix", path),
        }
        for command, argv in commands.items():
            codes = ERROR if refused or command == "add-tag" else ANY
            yield Case(
                f"matrix-{name}-{command}",
                argv,
                prepare,
                codes,
                changes_files=command == "add" and not refused,
            )


# --- gpudrv.yaml -----------------------------------------------------------------------------------------

CONFIGS: dict[str, str | bytes] = {
    "deep": "a: " + "[" * 5_000 + "]" * 5_000,
    "python-tag": "matrix: !!python/object:os.system {}\n",
    "laughs": LAUGHS,
    "list": "- a\n- b\n",
    "scalar": "hello\n",
    "unknown-key": "nope: 1\n",
    "wrong-type": "matrix: [1]\n",
    "inject": f"matrix: {json.dumps(HOSTILE)}\n",
    "not-utf8": b"matrix: \xff\n",
    "two-documents": "matrix: a.csv\n---\nfleet: b\n",
}


def config_cases() -> Iterator[Case]:
    for name, content in CONFIGS.items():

        def prepare(space: Workspace, content: str | bytes = content) -> None:
            space.write("gpudrv.yaml", content)

        for command, argv in {
            "audit": ("audit", "--from", "clusters/lab"),
            "validate": ("manifests", "validate"),
            "matrix-validate": ("matrix", "validate"),
        }.items():
            # A config of the right shape naming a strange matrix is only wrong where the matrix is read.
            codes = ANY if name == "inject" and command == "validate" else ERROR
            yield Case(f"config-{name}-{command}", argv, prepare, codes)

    def fifo(space: Workspace) -> None:
        os.mkfifo(space.root / "gpudrv.yaml.fifo")

    yield Case("config-fifo", ("--config", "gpudrv.yaml.fifo", "matrix", "validate"), fifo)
    yield Case("config-dev-zero", ("--config", "/dev/zero", "matrix", "validate"), nothing)
    yield Case("config-directory", ("--config", "clusters", "matrix", "validate"), nothing)


# --- kubeconfig ----------------------------------------------------------------------------------------

UNREACHABLE = "https://127.0.0.1:9"


def user(text: str) -> str:
    return kubeconfig_text(UNREACHABLE, text)


KUBECONFIGS: dict[str, str | bytes | None] = {
    "garbage": "::: not yaml [",
    "scalar": "hello",
    "list": "- a\n- b\n",
    "empty": "",
    "null": "null\n",
    "deep": "[" * 10_000 + "]" * 10_000,
    "laughs": LAUGHS,
    "python-tag": "clusters: !!python/object:os.system []\n",
    "not-utf8": b"apiVersion: v1\nclusters: \xff\n",
    "clusters-not-list": "apiVersion: v1\nkind: Config\nclusters: 5\ncurrent-context: c\n",
    "cluster-entry-scalar": "apiVersion: v1\nkind: Config\nclusters: [x]\ncurrent-context: c\n",
    "no-current-context": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
    "missing-context": user("{token: a}").replace("current-context: c", "current-context: other"),
    "server-number": kubeconfig_text("5").replace("server: '5'", "server: 5"),
    "server-garbage": kubeconfig_text("::not a url::"),
    "server-injection": kubeconfig_text(f"https://x{HOSTILE}"),
    "token-file-missing": user("{tokenFile: /nonexistent/token}"),
    "token-number": user("{token: 5}"),
    "ca-garbage": kubeconfig_text(UNREACHABLE).replace(
        "server:", "certificate-authority-data: '%%%', server:"
    ),
    "ca-file-missing": kubeconfig_text(UNREACHABLE).replace(
        "server:", "certificate-authority: /nonexistent, server:"
    ),
    "client-cert-garbage": user("{client-certificate-data: Z2FyYmFnZQ==, client-key-data: Z2FyYmFnZQ==}"),
    "exec-missing": user("{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: /nonexistent}}"),
    "exec-fails": user("{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: 'false'}}"),
    "exec-garbage": user(
        "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: echo, args: [x]}}"
    ),
    "exec-hangs": user(
        "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: sleep, args: ['60']}}"
    ),
    "exec-no-command": user("{exec: {apiVersion: client.authentication.k8s.io/v1beta1}}"),
    "exec-env-garbage": user(
        "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: echo, env: [{name: 1}]}}"
    ),
    "auth-provider-unknown": user("{auth-provider: {name: nope, config: {}}}"),
    "proxy-garbage": kubeconfig_text(UNREACHABLE).replace("server:", "proxy-url: '::x::', server:"),
    "insecure-yes": kubeconfig_text(UNREACHABLE).replace("server:", "insecure-skip-tls-verify: yes, server:"),
    "fifo": None,
    "directory": None,
}
KUBECONFIG_COMMANDS: dict[str, tuple[str, ...]] = {
    "audit": ("audit",),
    "tag": ("tag", "lab-node-0"),
    "status": ("status",),
    "report": ("report",),
    "explain": ("explain",),
    "diff": ("diff", "--from", "clusters/lab"),
    "drain": ("drain", "lab-node-0"),
}


def kubeconfig_cases() -> Iterator[Case]:
    for name, content in KUBECONFIGS.items():

        def prepare(space: Workspace, name: str = name, content: str | bytes | None = content) -> None:
            path = space.root / "kc"
            if name == "fifo":
                os.mkfifo(path)
            elif name == "directory":
                path.mkdir()
            else:
                space.write("kc", content or "")
            space.env["KUBECONFIG"] = str(path)

        for command, argv in KUBECONFIG_COMMANDS.items():
            yield Case(f"kubeconfig-{name}-{command}", (*argv, "--request-timeout", "2s"), prepare)


# --- a hostile API server ----------------------------------------------------------------------------------

GPU = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "90",
    "nvidia.com/cuda.driver.rev": "07",
    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-119-generic",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}


def as_json(value: object) -> bytes:
    return json.dumps(value).encode()


def nodes_answer(payload: object, other: object = None) -> Callable[[Request], Answer]:
    """`payload` for node reads; `other` (a valid empty list by default) for everything else."""

    def answer(request: Request) -> Answer:
        if request.path.startswith("/api/v1/nodes"):
            return Answer(body=payload if isinstance(payload, bytes) else as_json(payload))
        if "/apis/nvidia.com/" in request.path:
            return Answer(status=404, body=as_json({"kind": "Status", "message": "not found", "code": 404}))
        return Answer(body=as_json(other if other is not None else {"items": [], "metadata": {}}))

    return answer


def node_item(name: object, labels: object) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}}


def node_list(*items: object) -> dict[str, object]:
    return {"kind": "NodeList", "items": list(items), "metadata": {}}


def everything(answer: Answer) -> Callable[[Request], Answer]:
    return lambda _: answer


def same_token(request: Request) -> Answer:
    return Answer(body=as_json({"items": [node_item("n", GPU)], "metadata": {"continue": "again"}}))


SERVERS: dict[str, tuple[Callable[[Request], Answer], frozenset[int]]] = {
    "not-json": (everything(Answer(body=b"<html>hello</html>")), ERROR),
    "null": (everything(Answer(body=b"null")), ERROR),
    "list": (everything(Answer(body=b"[1, 2]")), ERROR),
    "deep-json": (everything(Answer(body=b"[" * 100_000 + b"]" * 100_000)), ERROR),
    "not-utf8": (everything(Answer(body=b'{"items": ["\xff\xfe"]}')), ERROR),
    "items-not-list": (nodes_answer({"items": 5}), ERROR),
    "items-strings": (nodes_answer({"items": ["a", "b"]}), ERROR),
    "items-null": (nodes_answer({"items": [None]}), ERROR),
    "metadata-string": (nodes_answer(node_list({"metadata": "x"})), ERROR),
    "labels-numbers": (nodes_answer(node_list(node_item("n", {"nvidia.com/gpu.present": 5}))), ERROR),
    "labels-list": (nodes_answer(node_list(node_item("n", ["a"]))), ERROR),
    "name-number": (nodes_answer(node_list(node_item(5, GPU))), ERROR),
    "name-missing": (nodes_answer(node_list({"metadata": {"labels": GPU}})), ERROR),
    "continue-number": (nodes_answer({"items": [], "metadata": {"continue": 5}}), ERROR),
    "same-continue-token": (same_token, ERROR),
    "inject-node-name": (
        nodes_answer(node_list(node_item(HOSTILE, {**GPU, "nvidia.com/cuda.driver.major": "x"}))),
        ANY,
    ),
    "inject-label-key": (nodes_answer(node_list(node_item("n", {**GPU, HOSTILE: "v"}))), ANY),
    "inject-kernel": (
        nodes_answer(
            node_list(node_item("n", {**GPU, "feature.node.kubernetes.io/kernel-version.full": HOSTILE}))
        ),
        ANY,
    ),
    "401-hostile-body": (
        everything(Answer(status=401, body=as_json({"kind": "Status", "message": HOSTILE, "code": 401}))),
        ERROR,
    ),
    "500-html": (everything(Answer(status=500, body=b"<html>\n::error::oops\n</html>")), ERROR),
    "302-redirect": (everything(Answer(status=302, headers={"Location": "/again"}, body=b"")), ERROR),
    "204-empty": (everything(Answer(status=204, body=b"")), ERROR),
    "close-without-answer": (everything(Answer(close=True)), ERROR),
    "never-answers": (everything(Answer(hang=True)), ERROR),
    "gzip-garbage": (
        everything(Answer(body=b"\x1f\x8bnot gzip", headers={"Content-Encoding": "gzip"})),
        ERROR,
    ),
    "gzip-bomb": (
        everything(Answer(body=gzip.compress(b"[" * 5_000_000), headers={"Content-Encoding": "gzip"})),
        ERROR,
    ),
    "pods-garbage": (
        nodes_answer(
            node_list(node_item("lab-node-0", GPU)), {"items": [{"metadata": {"name": "p"}, "status": "x"}]}
        ),
        ERROR,
    ),
}
SERVER_COMMANDS: dict[str, tuple[str, ...]] = {
    "audit": ("audit",),
    "audit-json": ("audit", "-o", "json"),
    "tag": ("tag", "n"),
    "status": ("status",),
    "report": ("report",),
    "explain": ("explain", "-n", "ns"),
    "diff": ("diff", "--from", "clusters/lab"),
    "drain": ("drain", "lab-node-0"),
}


def server_cases() -> Iterator[Case]:
    for name, (responder, codes) in SERVERS.items():

        def prepare(space: Workspace, responder: Callable[[Request], Answer] = responder) -> None:
            space.serve(responder)

        for command, argv in SERVER_COMMANDS.items():
            allowed = codes
            if name == "pods-garbage" and command in ("audit", "audit-json", "tag", "report", "diff"):
                allowed = ANY  # these never read pods
            if name == "continue-number" and command in ("status", "report", "drain", "tag"):
                allowed = ANY  # these read one answer, not pages
            yield Case(f"server-{name}-{command}", (*argv, "--request-timeout", "2s"), prepare, allowed)

    yield from lying_list_cases()

    def default_timeouts(space: Workspace) -> None:
        space.serve(everything(Answer(hang=True)))

    # Without --request-timeout: the default read timeout (15 s) bounds it.
    yield Case("server-never-answers-default-timeout", ("audit",), default_timeouts, ERROR, limit=25.0)


def lists_answer(payload: object) -> Callable[[Request], Answer]:
    """A GPU node for node reads, `payload` for every other read (ClusterPolicies, pods, budgets...)."""

    def answer(request: Request) -> Answer:
        if request.path.startswith("/api/v1/nodes"):
            return Answer(body=as_json(node_list(node_item("lab-node-0", GPU))))
        return Answer(body=as_json(payload))

    return answer


LYING_LISTS: dict[str, object] = {
    "items-string": {"items": "x"},
    "items-number": {"items": 5},
    "items-object": {"items": {"a": 1}},
    "items-strings": {"items": ["x"]},
    "item-metadata-string": {"items": [{"metadata": "x"}]},
}


def lying_list_cases() -> Iterator[Case]:
    """Issue 30: lab-mode apply --dry-run asks whether the GPU Operator runs (a ClusterPolicy list read
    whole): items that were a string or a number reached a traceback."""
    for name, payload in LYING_LISTS.items():

        def prepare(space: Workspace, payload: object = payload) -> None:
            repository(space)  # the image gate reads the matrix from git
            space.serve(lists_answer(payload))

        for command, argv in {
            "apply-dry-run": ("apply", "--dry-run", "--from", "clusters/lab"),
            "apply-dry-run-json": ("apply", "--dry-run", "--from", "clusters/lab", "-o", "json"),
            "plan": ("plan", "--from", "clusters/lab"),
            "explain": ("explain", "-n", "ns"),
            "drain": ("drain", "lab-node-0"),
        }.items():
            yield Case(f"lists-{name}-{command}", (*argv, "--request-timeout", "2s"), prepare, limit=20.0)


# --- git ----------------------------------------------------------------------------------------------------


def git(root: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    return subprocess.run(
        ["git", *identity, *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def repository(space: Workspace) -> None:
    git(space.root, "init", "-q")
    git(space.root, "add", "-A")
    git(space.root, "commit", "-qm", "the lab")


def corrupt(kind: str) -> Prepare:
    def prepare(space: Workspace) -> None:
        repository(space)
        spec = {"blob": "HEAD:matrix/support-matrix.csv", "tree": "HEAD:matrix"}[kind]
        name = git(space.root, "rev-parse", spec)
        path = space.root / ".git" / "objects" / name[:2] / name[2:]
        path.chmod(0o644)
        path.write_bytes(b"garbage")

    return prepare


def shallow(space: Workspace) -> None:
    origin = space.root.parent / f"{space.root.name}-origin"
    shutil.copytree(space.root, origin)
    repository(Workspace(origin))
    git(origin, "commit", "-q", "--allow-empty", "-m", "two")
    for entry in list(space.root.iterdir()):
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(space.root)],
        check=True,
        capture_output=True,
    )


def dubious(space: Workspace) -> None:
    repository(space)
    os.chown(space.root, 65534, 65534)  # owned by nobody: git refuses it ("dubious ownership")


def no_git(space: Workspace) -> None:
    repository(space)
    space.env["PATH"] = "/nonexistent"
    space.env["GIT_PYTHON_GIT_EXECUTABLE"] = ""


def bad_git_executable(space: Workspace) -> None:
    repository(space)
    space.env["GIT_PYTHON_GIT_EXECUTABLE"] = "/nonexistent/git"


def no_commits(space: Workspace) -> None:
    git(space.root, "init", "-q")


def branch(name: str) -> Prepare:
    def prepare(space: Workspace) -> None:
        repository(space)
        git(space.root, "branch", name)

    return prepare


GITS: dict[str, tuple[Prepare, frozenset[int]]] = {
    "not-a-repository": (nothing, ERROR),
    "no-commits": (no_commits, ERROR),
    "corrupt-blob": (corrupt("blob"), ERROR),
    "corrupt-tree": (corrupt("tree"), ERROR),
    "shallow-clone": (shallow, ANY),
    "dubious-ownership": (dubious, ERROR),
    "no-git-binary": (no_git, ERROR),
    "bad-git-executable": (bad_git_executable, ERROR),
    "odd-branch-name": (branch("x%0A--error-y"), ANY),
}


def git_cases() -> Iterator[Case]:
    for name, (prepare, codes) in GITS.items():
        for command, argv in {
            "history": ("matrix", "history"),
            "impact": ("matrix", "impact", "--base", "main", "--from", "clusters/lab"),
            "impact-odd-ref": ("matrix", "impact", "--base", HOSTILE, "--from", "clusters/lab"),
            "impact-option-ref": ("matrix", "impact", "--base", "--output=x", "--from", "clusters/lab"),
            "plan": ("plan", "--from", "clusters/lab", "--merged-ref", "main"),
            "plan-odd-ref": ("plan", "--from", "clusters/lab", "--merged-ref", HOSTILE),
        }.items():
            allowed = codes if "odd" not in command and "option" not in command else ERROR
            if name == "shallow-clone" and command == "history":
                allowed = ERROR  # history needs the full clone
            # Which git GitPython runs is decided once per process: those cases need a process of their own.
            process = "plain" if name in ("no-git-binary", "bad-git-executable") else None
            yield Case(f"git-{name}-{command}", argv, prepare, allowed, process=process, limit=20.0)


# --- arguments ----------------------------------------------------------------------------------------------

ARGUMENTS: dict[str, tuple[str, ...]] = {
    "no-command": (),
    "unknown-command": ("frobnicate",),
    "unknown-option": ("audit", "--frobnicate"),
    "empty-from": ("audit", "--from", ""),
    "empty-matrix": ("audit", "--matrix", ""),
    "empty-kubeconfig": ("audit", "--kubeconfig", ""),
    "empty-context": ("audit", "--context", ""),
    "empty-node": ("tag", ""),
    "empty-selector": ("audit", "-l", ""),
    "bad-selector": ("audit", "--from", "clusters/lab", "-l", "a in (b"),
    "injected-selector": ("audit", "--from", "clusters/lab", "-l", HOSTILE),
    "bad-duration": ("drain", "n", "--timeout", "soon"),
    "bad-request-timeout": ("audit", "--request-timeout", "-1"),
    "injected-duration": ("drain", "n", "--timeout", HOSTILE),
    "zero-parallel": ("apply", "--from", "clusters/lab", "--max-parallel", "0"),
    "huge-parallel": ("apply", "--from", "clusters/lab", "--max-parallel", "9" * 50),
    "bad-output": ("audit", "-o", HOSTILE),
    "bad-installer": ("apply", "--from", "clusters/lab", "--installer", "x"),
    "from-and-kubeconfig": ("audit", "--from", "clusters/lab", "--kubeconfig", "k"),
    "injected-node": ("tag", HOSTILE, "--from", "clusters/lab"),
    "injected-from": ("audit", "--from", HOSTILE),
    "injected-matrix": ("matrix", "validate", HOSTILE),
    "injected-target": ("explain", f"pod/{HOSTILE}", "--from", "clusters/lab"),
    "injected-kind": ("explain", f"{HOSTILE}/x", "--from", "clusters/lab"),
    "injected-tag": ("matrix", "add", "--tag", HOSTILE),
    "injected-operator-version": ("audit", "--from", "clusters/lab", "--operator-version", HOSTILE),
    "add-usage": ("matrix", "add", "550"),
    "unknown-verb": ("matrix", "frobnicate"),
    "history-with-from": ("matrix", "history", "--from", "x"),
    "report-from-and-kubeconfig": ("report", "--from", "clusters/lab", "--kubeconfig", "k"),
    "report-bad-output": ("report", "--from", "clusters/lab", "-o", HOSTILE),
    "no-cluster": ("audit",),
}


def argument_cases() -> Iterator[Case]:
    for name, argv in ARGUMENTS.items():
        yield Case(f"args-{name}", argv, nothing)


# --- the output streams -------------------------------------------------------------------------------------

OUTPUT_COMMANDS: dict[str, tuple[str, ...]] = {
    "help": ("--help",),
    "audit": ("audit", "--from", "clusters/lab"),
    "explain": ("explain", "--from", "clusters/lab"),
    "validate": ("matrix", "validate"),
}


def output_cases() -> Iterator[Case]:
    for mode in ("pipe-closed", "full", "stdout-closed"):
        for command, argv in OUTPUT_COMMANDS.items():
            codes = frozenset({141}) if mode == "pipe-closed" else ERROR
            yield Case(f"output-{mode}-{command}", argv, nothing, codes, process=mode, limit=20.0)


def cases() -> list[Case]:
    from tests.hostile.ci_log import ci_log_cases  # it builds on this module's helpers

    found = [
        *manifest_cases(),
        *matrix_cases(),
        *config_cases(),
        *kubeconfig_cases(),
        *server_cases(),
        *git_cases(),
        *argument_cases(),
        *output_cases(),
        *ci_log_cases(),
    ]
    ids = [case.id for case in found]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return found
