"""adapters/kube/_config.py runs exec credential plugins under a timeout by subclassing the kubernetes
client's KubeConfigLoader and ExecProvider and replacing two methods with copies of the client's own
(`_load_from_exec_plugin`, `ExecProvider.run`), relying on what their neighbours set. pyproject.toml
pins the client to the releases whose code that copy was read from (34 to 37: the same source in each);
this test fails when the installed client's code differs, so a new release is read before it is
allowed."""

from __future__ import annotations

import ast
import hashlib
import inspect
import re

from kubernetes.config import exec_provider, kube_config

from tests.conftest import REPO

# sha256 (first 12 hex digits) of each method's source, as kubernetes 34.1.0 to 37.0.3 ship it.
READ = {
    ("KubeConfigLoader", "_load_from_exec_plugin"): "0b97c062b7f7",
    ("KubeConfigLoader", "_get_base_path"): "783dfc7d2f78",
    ("ExecProvider", "__init__"): "26d6906525f3",
    ("ExecProvider", "run"): "512b5b97c045",
}


def digests() -> dict[tuple[str, str], str]:
    found = {}
    for module in (kube_config, exec_provider):
        source = inspect.getsource(module)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    key = (node.name, getattr(item, "name", ""))
                    if key in READ:
                        segment = ast.get_source_segment(source, item) or ""
                        found[key] = hashlib.sha256(segment.encode()).hexdigest()[:12]
    return found


def test_the_client_code_our_copy_mirrors_is_the_code_that_was_read() -> None:
    assert digests() == READ, (
        "the kubernetes client changed code that reconciler/adapters/kube/_config.py mirrors "
        "(_timed_loader, _timed_exec_provider): read the new release, update the copy, READ and the pin"
    )


def test_the_pin_is_the_releases_that_were_read() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'"kubernetes>=34,<38"', text), "pyproject.toml's pin of the kubernetes client moved"
    import kubernetes

    assert 34 <= int(str(kubernetes.__version__).split(".")[0]) < 38
