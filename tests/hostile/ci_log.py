"""Issue 30, item 0: outside text in a CI log, in text and json modes, with and without GITHUB_ACTIONS.

The runner reads every line gpudrv prints for workflow commands, whatever its -o, and a container
step does not pass GITHUB_ACTIONS: each input that once leaked (a matrix cell, a label key, a manifest
file name, a git ref, the API server's URL, a 401 body, argparse's usage error quoting a value) runs
in -o text and -o json, each with GITHUB_ACTIONS=true and without it. test_corpus.py checks that no
line of either stream starts with `::` after blanks (and the characters the runner's comparison
ignores) nor holds `##[`, as it does for every case of the corpus.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from tests.hostile.corpus import (
    ERROR,
    HOSTILE,
    Case,
    Prepare,
    Workspace,
    everything,
    kubeconfig_text,
    node,
    repository,
)
from tests.hostile.fake_api import Answer

# The corpus's hostile text, and the same commands with invisible characters the runner's culture-
# sensitive comparison skips: a soft hyphen inside `##[`, a zero-width space before `::`.
INVISIBLE = "#\u00ad#[warning]soft\n\u200b::error::zero-width \x01::x"
TEXTS = {"plain": HOSTILE, "invisible": INVISIBLE}
MODES = ("text", "json")


def matrix_cell(text: str) -> tuple[Prepare, tuple[str, ...]]:
    def prepare(space: Workspace) -> None:
        space.write("m.csv", f"driver_branch,kernel,os_tag\n550,{json.dumps(text)},ubuntu22.04\n")

    return prepare, ("matrix", "validate", "m.csv")


def label_key(text: str) -> tuple[Prepare, tuple[str, ...]]:
    def prepare(space: Workspace) -> None:
        space.write("clusters/lab/nodes/x.yaml", node(labels=f"    {json.dumps(text)}: v\n"))

    return prepare, ("manifests", "validate", "--from", "clusters/lab")


def file_name(text: str) -> tuple[Prepare, tuple[str, ...]]:
    def prepare(space: Workspace) -> None:
        space.write(f"clusters/lab/nodes/{text.replace('/', '_')}.yaml", "kind: Node\nmetadata: {name: [\n")

    return prepare, ("audit", "--from", "clusters/lab")


def base_ref(text: str) -> tuple[Prepare, tuple[str, ...]]:
    return repository, ("matrix", "impact", "--base", text, "--from", "clusters/lab")


def merged_ref(text: str) -> tuple[Prepare, tuple[str, ...]]:
    return repository, ("plan", "--from", "clusters/lab", "--merged-ref", text)


def server_url(text: str) -> tuple[Prepare, tuple[str, ...]]:
    def prepare(space: Workspace) -> None:
        space.write("kc", kubeconfig_text(f"https://x{text}"))
        space.env["KUBECONFIG"] = str(space.root / "kc")

    return prepare, ("audit", "--request-timeout", "2s")


def unauthorized(text: str) -> tuple[Prepare, tuple[str, ...]]:
    # The body's message holds the text after an escaped newline, as a JSON body carries it.
    body = json.dumps({"kind": "Status", "message": f"Unauthorized\n{text}", "code": 401}).encode()

    def prepare(space: Workspace) -> None:
        space.serve(everything(Answer(status=401, body=body)))

    return prepare, ("status", "--request-timeout", "2s")


def usage_error(text: str) -> tuple[Prepare, tuple[str, ...]]:
    def prepare(space: Workspace) -> None:
        pass

    return prepare, ("drain", "n", "--timeout", text)  # argparse quotes the value it refuses


INPUTS = {
    "matrix-cell": matrix_cell,
    "label-key": label_key,
    "file-name": file_name,
    "base-ref": base_ref,
    "merged-ref": merged_ref,
    "server-url": server_url,
    "401-body": unauthorized,
    "usage-error": usage_error,
}


def ci_log_cases() -> Iterator[Case]:
    for name, make in INPUTS.items():
        for text_name, text in TEXTS.items():
            prepare, argv = make(text)
            for mode in MODES:
                for actions in (True, False):
                    where = "actions" if actions else "no-actions"
                    yield Case(
                        f"ci-log-{name}-{text_name}-{mode}-{where}",
                        (*argv, "-o", mode),
                        prepare,
                        ERROR,
                        limit=20.0,
                        actions=actions,
                    )
