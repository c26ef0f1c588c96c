"""Node manifests in git: every *.yaml / *.yml under a folder, multi-document, Node or List of Nodes."""

from __future__ import annotations

import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from reconciler.adapters import positions
from reconciler.adapters.files import read_text
from reconciler.core import node_schema
from reconciler.core.diff import Budget
from reconciler.core.tags import Node
from reconciler.errors import GpudrvError


def manifest_files(folder: Path) -> list[Path]:
    if not folder.exists():
        raise GpudrvError(f"{folder}: no such directory")
    if not folder.is_dir():
        raise GpudrvError(f"{folder}: not a directory")
    return sorted(path for path in folder.rglob("*") if path.suffix in {".yaml", ".yml"} and path.is_file())


def load_documents(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, document) for each YAML document of the file; one clear error on broken YAML, after the
    documents before it. Parsed once per text: explain, plan and diff read nodes, workloads and budgets
    from the same files, and parsing is what costs (the file is read again, to see an edit)."""
    text = read_text(path)
    cached = _parsed.get(path)
    if cached is None or cached[0] != text:
        cached = _parsed[path] = (text, *_parse(path, text))
    _, documents, error = cached
    yield from documents
    if error is not None:
        raise GpudrvError(error.message, file=error.file, line=error.line)


# path -> (its text, its documents, the error that ended them): the parse of the text last read there.
_parsed: dict[Path, tuple[str, tuple[tuple[int, Any], ...], GpudrvError | None]] = {}


def _parse(path: Path, text: str) -> tuple[tuple[tuple[int, Any], ...], GpudrvError | None]:
    # Imported here: a live command that reads no manifest never pays for the YAML library.
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MantissaNoDotYAML1_1Warning, MarkedYAMLError, YAMLError

    documents: list[tuple[int, Any]] = []
    try:
        with warnings.catch_warnings():
            # ruamel warns, in many lines on stderr, about YAML 1.1 floats with no dot (1e3), and loads
            # them as floats: gpudrv writes one line per error, and its checks name such values.
            warnings.simplefilter("ignore", MantissaNoDotYAML1_1Warning)
            for document in YAML(typ="rt").load_all(text):
                documents.append((_line_of(document), document))
    except MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        return tuple(documents), GpudrvError(
            f"invalid YAML: {exc.problem or exc.context}", file=str(path), line=line
        )
    except YAMLError as exc:
        return tuple(documents), GpudrvError(f"invalid YAML: {str(exc).splitlines()[0]}", file=str(path))
    return tuple(documents), None


def documents_of_kinds(path: Path, kinds: Collection[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, document) for each document of one of `kinds` in the file, `kind: List` items too."""
    for line, document in load_documents(path):
        if not isinstance(document, dict):
            continue
        if document.get("kind") in kinds:
            yield line, document
        elif document.get("kind") == "List":
            for item in document.get("items") or []:
                if isinstance(item, dict) and item.get("kind") in kinds:
                    yield _line_of(item, line), item


def load_nodes(folder: Path) -> list[Node]:
    """Every Node declared under `folder`; other kinds are ignored."""
    nodes: dict[str, Node] = {}
    for path in manifest_files(folder):
        for line, node in _nodes_in(path):
            if node.name in nodes:
                also = nodes[node.name].origin
                raise GpudrvError(
                    f"node {node.name} is declared twice (also {also})", file=str(path), line=line
                )
            nodes[node.name] = node
    return list(nodes.values())


def load_budget_specs(folder: Path) -> list[Budget]:
    """Every PodDisruptionBudget declared under `folder`: identity, spec as plain data, file:line."""
    budgets: dict[tuple[str, str], Budget] = {}
    for path in manifest_files(folder):
        for line, document in documents_of_kinds(path, ("PodDisruptionBudget",)):
            budget = _budget(path, line, document)
            key = (budget.namespace, budget.name)
            if key in budgets:
                also = budgets[key].origin
                raise GpudrvError(
                    f"PodDisruptionBudget {budget.ref} is declared twice (also {also})",
                    file=str(path),
                    line=line,
                )
            budgets[key] = budget
    return list(budgets.values())


def _budget(path: Path, line: int, document: dict[str, Any]) -> Budget:
    origin = f"{path}:{line}"
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise GpudrvError("PodDisruptionBudget without metadata.name", file=str(path), line=line)
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise GpudrvError(f"PodDisruptionBudget {name}: spec must be a mapping", file=str(path), line=line)
    # kubectl apply puts a manifest without a namespace in the context's; ours is always "default".
    return Budget(str(metadata.get("namespace") or "default"), name, plain(spec), origin)


def plain(value: Any) -> Any:
    """ruamel's round-trip types as plain dicts, lists and scalars, so they compare equal to JSON."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    for scalar in (bool, int, float, str):  # bool first: it is an int
        if isinstance(value, scalar):
            return scalar(value)
    return value


def _nodes_in(path: Path) -> Iterator[tuple[int, Node]]:
    for line, document in load_documents(path):
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "Node":
            yield line, _node(path, line, document)
        elif document.get("kind") == "List":
            for item in document.get("items") or []:
                if isinstance(item, dict) and item.get("kind") == "Node":
                    yield _line_of(item, line), _node(path, _line_of(item, line), item)


def _node(path: Path, line: int, document: dict[str, Any]) -> Node:
    origin = f"{path}:{line}"
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise GpudrvError("Node without metadata.name", file=str(path), line=line)
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if labels is None:
        return Node(name, {}, origin)
    if not isinstance(labels, dict):
        raise GpudrvError(f"node {name}: metadata.labels must be a mapping", file=str(path), line=line)
    for key, value in labels.items():
        if not isinstance(value, str):
            advice = node_schema.must_be_string(f"label {key}", value, written(path, labels, (key,)))
            raise GpudrvError(f"node {name}: {advice}", file=str(path), line=_key_line(labels, key, line))
    return Node(name, {str(key): value for key, value in labels.items()}, origin)


def written(path: Path, document: Any, at: Sequence[str | int]) -> str | None:
    """The value at `at` in `document` as the file at `path` writes it (see positions.written); None
    if unknown. The file is read again: only to word an error, as the documents do not keep the text."""
    try:
        text = read_text(path)
    except GpudrvError:
        return None
    return positions.written(text, document, at)


def _line_of(node: Any, default: int = 1) -> int:
    lc = getattr(node, "lc", None)
    return lc.line + 1 if lc is not None and lc.line is not None else default


def _key_line(mapping: Any, key: Any, default: int) -> int:
    try:
        return int(mapping.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError):
        return default
