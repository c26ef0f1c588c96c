"""Node manifests in git: every *.yaml / *.yml under a folder, multi-document, Node or List of Nodes."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from reconciler.adapters.files import positions, read_text, yaml_load
from reconciler.core.images import node_schema
from reconciler.core.images.tags import Node
from reconciler.core.views.diff import Budget
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


def forget(path: Path) -> None:
    """Drop the parse kept of `path`, for a reader that reads each file once (manifests validate):
    10,000 files' documents kept alive cost more in garbage collection than they could save."""
    _parsed.pop(path, None)


def _parse(path: Path, text: str) -> tuple[tuple[tuple[int, Any], ...], GpudrvError | None]:
    documents: list[tuple[int, Any]] = []
    try:
        for document in yaml_load.documents(text):  # with depth, alias and tag limits
            documents.append((_line_of(document), document))
    except yaml_load.Problem as exc:
        return tuple(documents), GpudrvError(exc.message, file=str(path), line=exc.line or 1)
    return tuple(documents), None


def documents_of_kinds(path: Path, kinds: Collection[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, document) for each document of one of `kinds` in the file, `kind: List` items too."""
    for line, kind, document in _kinded(path):
        if kind in kinds:
            yield line, document


def _kinded(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line, kind, document) for each object of the file that has a kind; a List's items instead of it."""
    for line, document in load_documents(path):
        kind = kind_of(path, line, document)
        if kind != "List":
            if kind is not None:
                yield line, kind, document
            continue
        for item in list_items(path, line, document):
            at = _line_of(item, line)
            if (item_kind := kind_of(path, at, item)) is not None:
                yield at, item_kind, item


def kind_of(path: Path, line: int, document: Any) -> str | None:
    """The document's kind; None for what is not an object or has none. A kind that is not a string
    (a list, a mapping) is no manifest any tool applies: an error at its line."""
    if not isinstance(document, dict):
        return None
    kind = document.get("kind")
    if kind is None or isinstance(kind, str):
        return kind
    at = _key_line(document, "kind", line)
    raise GpudrvError(f"kind must be a string, not {_kind(kind)}", file=str(path), line=at)


def list_items(path: Path, line: int, document: dict[str, Any]) -> list[Any]:
    """A `kind: List`'s items; items that are not objects (numbers, strings) are no kind of ours."""
    items = document.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        at = _key_line(document, "items", line)
        raise GpudrvError(f"kind: List: items must be a list, not {_kind(items)}", file=str(path), line=at)
    return items


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:60]


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
    for line, document in documents_of_kinds(path, ("Node",)):
        yield line, _node(path, line, document)


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
    if unknown. The text is that of the file's last parse, which the document comes from: a file with
    thousands of such values is read once, not once per value."""
    cached = _parsed.get(path)
    if cached is not None:
        return positions.written(cached[0], document, at)
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
