"""GPU nodes as their manifests declare them, with what `gpudrv report` reads live from a Node besides
its labels: the annotations (gpudrv's record of a failed upgrade) and spec.unschedulable."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.files import manifests
from reconciler.core.upgrades.upgrade import LiveNode


def gpu_nodes(folder: Path) -> list[LiveNode]:
    """Every GPU node declared under `folder`, in the shape the cluster gives them."""
    extra: dict[str, tuple[bool, dict[str, str]]] = {}
    for path in manifests.manifest_files(folder):
        for _line, document in manifests.documents_of_kinds(path, ("Node",)):
            metadata = document.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            spec = document.get("spec")
            annotations = metadata.get("annotations")
            notes = annotations if isinstance(annotations, dict) else {}
            extra[str(metadata.get("name"))] = (
                isinstance(spec, dict) and spec.get("unschedulable") is True,
                {str(key): str(value) for key, value in notes.items()},
            )
    return [
        LiveNode(node, *extra.get(node.name, (False, {})))
        for node in manifests.load_nodes(folder)
        if node.gpu_present
    ]
