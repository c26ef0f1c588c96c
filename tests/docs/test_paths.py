"""Every path of this repository that README.md or a page under docs/ names exists.

What counts as a repository path: an inline code span (`like/this`, outside fenced blocks) that holds
no whitespace, has a `/`, and whose first part is either
- an entry at the repository's root as git has it (`reconciler/`, `tests/`, `docs/`, `.github/`,
  `schemas/`, ...): then it is relative to the root, or
- a package directly under reconciler/ (`core/`, `adapters/`, `commands/`, `data/`, ...), as
  docs/architecture.md writes them: then it is relative to reconciler/.
The two sets of names are disjoint (a test below keeps them so), so each path has one reading.

How it is checked:
- `path:N` or `path:N-M` is a line reference: the file must exist and have line M (or N);
- `{a,b}` is expanded, and each one must exist;
- a glob (`tests/unit/test_kube*.py`) must match at least one path;
- a placeholder part, all capitals (`reconciler/verbs/NAME.py`) or in angle brackets
  (`clusters/<fleet>/nodes/`), stands for any name: what comes before it must exist.
A path that is not in this repository on purpose (another project's file the page cites, a file a
walkthrough creates, a file of a fleet repository) is listed in ELSEWHERE with the reason.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import REPO
from tests.docs.test_examples import pages

CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
LINES = re.compile(r":(\d+)(?:-(\d+))?$")
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*(?:\.\w+)?|<[^>]+>)$")
BRACES = re.compile(r"\{([^{}]*)\}")

UPSTREAM_DRIVER = "NVIDIA/gpu-driver-container's, at the commit docs/research/precompiled-builds.md names"
ELSEWHERE: dict[tuple[str, str], str] = {
    ("docs/building-images.md", ".github/workflows/precompiled.yaml:18-20"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", ".github/workflows/precompiled.yaml:104-110"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", ".github/workflows/precompiled.yaml:81-84"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", ".github/workflows/precompiled.yaml:124"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", ".github/workflows/precompiled.yaml:18-21"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", ".github/precompiled-matrix-config.json"): UPSTREAM_DRIVER,
    ("docs/research/precompiled-builds.md", "scripts/precompiled.sh:62-67"): UPSTREAM_DRIVER,
    ("docs/gitops.md", "docs/user-guide/sync-waves.md:9-25"): "Argo CD's (argo-cd)",
    ("docs/gitops.md", "docs/user-guide/resource_hooks.md:47"): "Argo CD's (argo-cd v2.14.0)",
    ("docs/gitops.md", "docs/spec/v1/kustomizations.md:418-493"): "Flux's kustomize-controller's",
    ("docs/in-cluster.md", "docs/spec/v1/kustomizations.md"): "Flux's kustomize-controller's",
    ("docs/helm.md", "docs/spec/v2/helmreleases.md"): "Flux's helm-controller's",
    ("docs/helm.md", "docs/user-guide/helm.md"): "Argo CD's",
    ("docs/lab.md", "clusters/lab/nodes/lab-node-3.yaml"): "the lab's step 4 copies it there from examples/",
    ("docs/building-images.md", ".github/workflows/build.yml"): "a fleet repository's: gpudrv init writes it",
    ("docs/commands/init.md", ".github/workflows/{pr,audit,apply,build}.yml"): "a fleet repository's: "
    "gpudrv init writes them",
}


def root_names() -> set[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    return {name.split("/", 1)[0] for name in tracked.stdout.splitlines()}


def package_names() -> set[str]:
    return {
        path.name for path in (REPO / "reconciler").iterdir() if path.is_dir() and path.name != "__pycache__"
    }


def prose(text: str) -> str:
    """The text outside fenced blocks (a fenced block is an example or a file, not a mention)."""
    kept, fence = [], ""
    for line in text.splitlines():
        opening = FENCE.match(line)
        if fence:
            if line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
                fence = ""
        elif opening:
            fence = opening[1]
        else:
            kept.append(line)
    return "\n".join(kept)


def named_paths(text: str, roots: set[str], packages: set[str]) -> list[str]:
    """The repository paths a page names, in order (see the module's docstring)."""
    found = []
    for span in CODE_SPAN.finditer(prose(text)):
        token = span[2].strip()
        if "/" in token and not re.search(r"\s", token) and token.split("/", 1)[0] in roots | packages:
            found.append(token)
    return found


def problem(token: str, roots: set[str], packages: set[str]) -> str | None:
    """None when the path exists as named, else what is wrong."""
    base = REPO if token.split("/", 1)[0] in roots else REPO / "reconciler"
    path, lines = token, None
    if found := LINES.search(token):
        path, lines = token[: found.start()], int(found[2] or found[1])
    for one in expand(path):
        parts = one.rstrip("/").split("/")
        fixed = next((i for i, part in enumerate(parts) if PLACEHOLDER.match(part)), len(parts))
        prefix = "/".join(parts[:fixed])
        matches = sorted(base.glob(prefix)) if any(c in prefix for c in "*?[") else [base / prefix]
        existing = [match for match in matches if match.exists()]
        if not existing:
            return f"{base.relative_to(REPO) / prefix if base != REPO else prefix}: no such file or directory"
        if lines is not None:
            count = len(existing[0].read_text(encoding="utf-8").splitlines())
            if lines > count:
                return f"{prefix} has {count} lines, not {lines}"
    return None


def expand(path: str) -> list[str]:
    found = BRACES.search(path)
    if found is None:
        return [path]
    return [
        expanded
        for choice in found[1].split(",")
        for expanded in expand(path[: found.start()] + choice + path[found.end() :])
    ]


def test_root_and_package_names_are_disjoint() -> None:
    assert root_names() & package_names() == set()


def test_every_path_the_readme_and_the_docs_name_exists() -> None:
    roots, packages = root_names(), package_names()
    wrong = []
    for page in pages():
        name = str(page.relative_to(REPO))
        for token in named_paths(page.read_text(encoding="utf-8"), roots, packages):
            if (name, token) in ELSEWHERE:
                continue
            if (why := problem(token, roots, packages)) is not None:
                wrong.append(f"{name}: `{token}`: {why}")
    assert wrong == [], "paths that name nothing here (this module's docstring says what counts)"


def test_every_exception_is_still_named_and_not_here() -> None:
    roots, packages = root_names(), package_names()
    stale = []
    for (name, token), reason in ELSEWHERE.items():
        assert reason
        if token not in named_paths((REPO / name).read_text(encoding="utf-8"), roots, packages):
            stale.append(f"{name}: `{token}` is no longer named there")
        elif problem(token, roots, packages) is None:
            stale.append(f"{name}: `{token}` exists here now")
    assert stale == [], "drop these from ELSEWHERE"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("`reconciler/cli.py` and `core/images/tags.py`", ["reconciler/cli.py", "core/images/tags.py"]),
        ("``tests/unit/`` but not `gpudrv audit --from clusters/lab`", ["tests/unit/"]),
        ("`nvidia.com/gpu` `127.0.0.1:5000/nvidia/driver` `fluxcd/pkg`", []),
        ("```sh\n`reconciler/gone.py`\n```\n`docs/index.md`", ["docs/index.md"]),
    ],
)
def test_what_counts_as_a_path(text: str, named: list[str]) -> None:
    assert named_paths(text, root_names(), package_names()) == named


@pytest.mark.parametrize(
    ("token", "wrong"),
    [
        ("reconciler/cli.py", None),
        ("commands/apply.py", None),
        ("reconciler/adapters/yaml_load.py", "reconciler/adapters/yaml_load.py: no such file or directory"),
        ("adapters/registry.py", "reconciler/adapters/registry.py: no such file or directory"),
        ("tests/unit/test_kube*.py", None),
        ("tests/unit/test_no_such*.py", "tests/unit/test_no_such*.py: no such file or directory"),
        ("reconciler/verbs/NAME.py", None),
        ("reconciler/nowhere/NAME.py", "reconciler/nowhere: no such file or directory"),
        ("clusters/<fleet>/nodes/", None),
        (".ci/run:5", None),
        (".ci/run:5000", ".ci/run has 5 lines, not 5000"),
        ("deploy/{base,rbac}/", None),
        ("deploy/{base,nothing}/", "deploy/nothing: no such file or directory"),
    ],
)
def test_how_a_path_is_checked(token: str, wrong: str | None) -> None:
    assert problem(token, root_names(), package_names()) == wrong
