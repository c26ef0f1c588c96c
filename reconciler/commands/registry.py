"""`gpudrv matrix verify` and `gpudrv audit --registry`: the support matrix, or the fleet, against the
OCI registry the images are pushed to.

Exit 0 every image is there, 1 a row (or node) without its image, 2 an error: a registry that is
down, refuses the credentials or answers what the protocol does not allow is one line naming it.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.ci import github
from reconciler.adapters.files import matrix_file, schemas
from reconciler.adapters.registry import oci
from reconciler.adapters.sources import NodeSource, read_matrix, require_valid
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.audit.audit import audit_wants
from reconciler.core.images import registry
from reconciler.errors import GpudrvError
from reconciler.render import document
from reconciler.render.registry import (
    audit_annotations,
    audit_closing,
    audit_json,
    audit_summary,
    audit_text,
    verdict,
    verify_annotations,
    verify_json,
    verify_summary,
    verify_text,
    with_references,
)


def repository(
    text: str | None, config_file: Path | None = None, what: str = "registry"
) -> registry.Repository:
    """The repository to check: --registry, else gpudrv.yaml's registry (`what`: upstream, for fill)."""
    if not text:
        raise GpudrvError(
            "no registry to check: give --registry REPO (like oci.example.com/nvidia/driver) or set "
            "registry: in gpudrv.yaml"
        )
    try:
        return registry.parse_repository(text)
    except ValueError as exc:
        where = f"{config_file}: {what}: " if config_file else f"--{what}: "
        raise GpudrvError(where + str(exc)) from None


def verify(
    matrix_path: Path,
    repo: registry.Repository,
    *,
    list_tags: bool = False,
    write: bool = False,
    output: Output = Output.TEXT,
    concurrency: int = oci.CONCURRENCY,
) -> int:
    _, parsed = read_matrix(matrix_path)
    parsed = require_valid(matrix_path, parsed)
    with oci.connect(repo, concurrency) as client:
        exists = client.exists_all([row.key.tag for row in parsed.rows])
        listed = client.tags() if list_tags or write else None
    result = registry.verify(repo, parsed, exists, listed, schemas.load("matrix-row"))
    added = matrix_file.append(matrix_path, result.rows_to_add()) if write and result.rows_to_add() else []
    if output is Output.GITHUB:
        github.publish(
            verify_annotations(result, matrix_path, added),
            verify_summary(result, matrix_path),
            verdict(result),
        )
    elif output.structured:
        print(document.text(verify_json(result, matrix_path, added), output))
    else:
        print(verify_text(result, matrix_path, added))
    return OK if result.ok else FINDINGS


def audit(
    source: NodeSource, repo: registry.Repository, output: Output, concurrency: int = oci.CONCURRENCY
) -> int:
    """The fleet's audit with the registry's tags in place of the matrix: the same findings, the
    images of the nodes' next kernels too."""
    found = source.wants()
    source.require(len(found.wants))
    tags = registry.wanted_tags(want.tag for want in (*found.wants, *found.next_wants))
    with oci.connect(repo, concurrency) as client:
        exists = client.exists_all(tags)
    present = frozenset(tag for tag, there in exists.items() if there)
    result = with_references(audit_wants(found, present), repo)
    if output is Output.GITHUB:
        github.publish(audit_annotations(result, repo), audit_summary(result, repo), audit_closing(result))
    elif output.structured:
        print(document.text({**audit_json(result, repo), "desired": source.desired.as_json()}, output))
    else:
        print(audit_text(result, len(present), repo))
    return OK if result.ok else FINDINGS
