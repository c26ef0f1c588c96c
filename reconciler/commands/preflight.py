"""`gpudrv preflight --kernel K`: would every selected GPU node find its driver image on kernel K?

The nodes and the driver contract come from --from DIR or the live cluster, as for audit; the images
from the support matrix or, with --registry, the OCI registry (HEAD of each tag, with the registry
adapter's timeouts and credentials). Exit 0 every node ready, 1 a node without its image (or one
whose image cannot be computed), 2 an error or no GPU node selected.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.ci import github
from reconciler.adapters.registry import oci
from reconciler.adapters.sources import NodeSource, valid_matrix
from reconciler.commands import FINDINGS, OK, Output
from reconciler.core.audit import preflight
from reconciler.core.images import registry
from reconciler.render import document
from reconciler.render.preflight import Against, annotate, as_json, as_text, closing, summary


def run(
    source: NodeSource,
    kernel: str,
    matrix_path: Path,
    output: Output,
    *,
    repository: registry.Repository | None = None,
    concurrency: int = oci.CONCURRENCY,
) -> int:
    tags = None if repository is not None else valid_matrix(matrix_path).tags()
    found = source.wants(kernel)
    source.require(len(found.wants))
    if repository is None:
        assert tags is not None
        result = preflight.decide(found, kernel, tags)
        against = Against(str(matrix_path), "matrix")
    else:
        with oci.connect(repository, concurrency) as client:
            exists = client.exists_all(registry.wanted_tags(want.tag for want in found.wants))
        present = frozenset(tag for tag, there in exists.items() if there)
        result = preflight.decide(found, kernel, present, str(repository))
        against = Against(str(repository), "registry")
    if output is Output.GITHUB:
        github.publish(annotate(result, against), summary(result, against), closing(result))
    elif output.structured:
        print(document.text({**as_json(result, against), "desired": source.desired.as_json()}, output))
    else:
        print(as_text(result, against))
    return OK if result.ok else FINDINGS
