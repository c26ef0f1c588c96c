"""Where a pod may run: its nodeSelector and required node affinity, evaluated as the scheduler does.

The semantics are Kubernetes' own (component-helpers `nodeaffinity`, apimachinery `labels`): the
nodeSelector's pairs must all be labels of the node; the terms of the required node affinity are
ORed and the expressions of a term ANDed. A term without expressions or fields matches no node,
and so does a term the scheduler cannot parse (an unknown operator, the wrong number of values, a
Gt/Lt value that is not an integer, an invalid key or value), while the other terms still count.
Gt and Lt read the node's label as a base-10 int64; a label that is not one never matches. NotIn
and DoesNotExist match a node that lacks the label. Preferred affinity never decides feasibility.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.base import selectors
from reconciler.core.base.selectors import IN, NOT_IN, Requirement
from reconciler.core.images.tags import Node
from reconciler.core.upgrades import budget

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"  # preferred terms never decide feasibility
NODE_NAME_FIELD = "metadata.name"  # the only field a node offers to matchFields
DEFAULT_NAMESPACE = "default"

# The pod spec inside each workload kind that gpudrv explains.
POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Job": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


Path = tuple[str | int, ...]


class SpecError(ValueError):
    """A pod spec that is not shaped like one; `path` leads from the document to the culprit."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{dotted(path)} {message}")
        self.path = path


class NotAString(SpecError):
    """A number or boolean where Kubernetes wants a string: YAML read an unquoted value as one. The
    adapter, which has the file's text, words the advice from what the file says (`value` is what
    YAML made of it)."""

    def __init__(self, path: Path, value: bool | float) -> None:
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        super().__init__(path, f'must be a string; quote it: "{shown}"')
        self.value = value


@dataclass(frozen=True)
class Term:
    """One nodeSelectorTerm: every expression and every field requirement must hold."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def problem(self) -> str | None:
        """Why the scheduler cannot parse this term (it then matches no node), or None."""
        if not self.expressions and not self.fields:
            return "the term is empty, and an empty term matches no node"
        problems = [selectors.problem(r) for r in self.expressions] + [_field_problem(r) for r in self.fields]
        first = next((problem for problem in problems if problem), None)
        return None if first is None else f"the scheduler cannot parse the term: {first}"

    def why_not(self, node: Node) -> str | None:
        """The first requirement the node fails, or None when the term matches it."""
        if (problem := self.problem()) is not None:
            return problem
        for requirement in self.expressions:
            if (reason := selectors.why_not(requirement, node.labels)) is not None:
                return reason
        if not node.name:  # the scheduler skips fields for a node without a name
            return None
        fields = {NODE_NAME_FIELD: node.name}
        return next(filter(None, (_field_why_not(r, fields) for r in self.fields)), None)


@dataclass(frozen=True)
class Placement:
    """The hard constraints a pod puts on its node's labels and name."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[Term, ...] | None = None  # None: no required node affinity at all

    def why_not(self, node: Node) -> str | None:
        """Why the node cannot take the pod (the first failing condition per term), or None."""
        for key, wanted in self.node_selector:
            if (reason := _selector_why_not(key, wanted, node.labels)) is not None:
                return reason
        if self.terms is None:
            return None
        reasons: list[str] = []
        for term in self.terms:
            if (reason := term.why_not(node)) is None:
                return None
            reasons.append(reason)
        return _join_terms(reasons)

    def label_keys(self) -> frozenset[str]:
        """Every label key the placement looks at."""
        in_terms = (r.key for term in self.terms or () for r in term.expressions)
        return frozenset([*(key for key, _ in self.node_selector), *in_terms])


@dataclass(frozen=True)
class Fit:
    nodes: tuple[str, ...]  # the nodes that admit the pod, in name order
    reasons: Mapping[str, str]  # every other node: why not


@dataclass(frozen=True)
class Workload:
    """A pod, or the pod template of a controller, as gpudrv explains it."""

    kind: str
    namespace: str
    name: str
    placement: Placement
    images: tuple[str, ...] = ()
    file: str | None = None  # manifest file and line, for --from
    line: int | None = None
    scheduler: str | None = None  # live: the scheduler's PodScheduled=False message
    gpu_images: tuple[str, ...] = ()  # the images of the containers that request a GPU

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def origin(self) -> str | None:
        return None if self.file is None else f"{self.file}:{self.line or 1}"


def evaluate(placement: Placement, nodes: Iterable[Node]) -> Fit:
    verdicts = sorted(((node.name, placement.why_not(node)) for node in nodes), key=lambda v: v[0])
    admitted = tuple(name for name, reason in verdicts if reason is None)
    return Fit(admitted, {name: reason for name, reason in verdicts if reason is not None})


def dotted(path: Path) -> str:
    """`spec.affinity.nodeAffinity...nodeSelectorTerms[0].matchExpressions[1]`"""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


# --- evaluating -------------------------------------------------------------------------------


def _field_why_not(requirement: Requirement, fields: Mapping[str, str]) -> str | None:
    # A field the node does not have reads as "" (fields.Set.Get), so it is never "missing".
    return selectors.value_why_not(requirement, fields.get(requirement.key, ""))


def _selector_why_not(key: str, wanted: str, labels: Mapping[str, str]) -> str | None:
    if key not in labels:
        return f"{key} is missing (nodeSelector {key}={wanted})"
    return None if labels[key] == wanted else f"{key}={labels[key]} is not {wanted} (nodeSelector)"


def _join_terms(reasons: Sequence[str]) -> str:
    if not reasons:
        return "the required node affinity has no terms, so it matches no node"
    if len(reasons) == 1:
        return reasons[0]
    return "; ".join(f"term {number}: {reason}" for number, reason in enumerate(reasons, start=1))


# --- what the scheduler refuses to parse in matchFields (labels: selectors.problem) --------------


def _field_problem(requirement: Requirement) -> str | None:
    if len(requirement.values) != 1:
        return f"field {requirement.key}: needs exactly one value"
    if requirement.operator not in (IN, NOT_IN):
        return f"field {requirement.key}: operator {requirement.operator!r} is not In or NotIn"
    return None


# --- reading pod specs (plain data, as JSON or YAML gives it) -----------------------------------


def workload(
    document: Mapping[str, Any],
    file: str | None = None,
    line: int | None = None,
    scheduler: str | None = None,
) -> Workload:
    """The Workload a Pod/Job/CronJob/Deployment/StatefulSet document describes; SpecError if malformed."""
    kind = str(document.get("kind"))
    if kind not in POD_SPEC_PATHS:
        raise SpecError(("kind",), f"{kind!r} is not one of {', '.join(POD_SPEC_PATHS)}")
    metadata = _mapping(document.get("metadata"), ("metadata",))
    if not metadata.get("name"):
        raise SpecError(("metadata", "name"), "is missing")
    name = _string(metadata["name"], ("metadata", "name"))
    namespace = _string(metadata.get("namespace") or DEFAULT_NAMESPACE, ("metadata", "namespace"))
    path = POD_SPEC_PATHS[kind]
    spec = _dig(document, path)
    images = images_of(spec, path)  # checked first: a malformed image is a SpecError with its path
    return Workload(
        kind,
        namespace,
        name,
        placement_of(spec, path),
        images,
        file,
        line,
        scheduler,
        budget.gpu_images(spec),
    )


def placement_of(spec: Mapping[str, Any], path: Path = ()) -> Placement:
    selector = _node_selector(spec.get("nodeSelector"), (*path, "nodeSelector"))
    affinity_path = (*path, "affinity", "nodeAffinity")
    affinity = _mapping(spec.get("affinity"), affinity_path[:-1])
    node_affinity = _mapping(affinity.get("nodeAffinity"), affinity_path)
    required = node_affinity.get(REQUIRED)
    return Placement(selector, None if required is None else _terms(required, (*affinity_path, REQUIRED)))


def images_of(spec: Mapping[str, Any], path: Path = ()) -> tuple[str, ...]:
    images: list[str] = []
    for group in ("initContainers", "containers"):
        for i, container in enumerate(_sequence(spec.get(group), (*path, group))):
            image = _mapping(container, (*path, group, i)).get("image")
            if image is not None:
                images.append(_string(image, (*path, group, i, "image")))
    return tuple(images)


def _dig(document: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    node: Any = document
    for depth, key in enumerate(path):
        node = _mapping(node, path[:depth]).get(key)
    return _mapping(node, path)


def _terms(required: Any, path: Path) -> tuple[Term, ...]:
    terms_path = (*path, "nodeSelectorTerms")
    terms = _sequence(_mapping(required, path).get("nodeSelectorTerms"), terms_path)
    return tuple(_term(term, (*terms_path, i)) for i, term in enumerate(terms))


def _node_selector(value: Any, path: Path) -> tuple[tuple[str, str], ...]:
    selector = _mapping(value, path)
    return tuple((str(key), _string(wanted, (*path, str(key)))) for key, wanted in selector.items())


def _term(value: Any, path: Path) -> Term:
    term = _mapping(value, path)
    return Term(_requirements(term, "matchExpressions", path), _requirements(term, "matchFields", path))


def _requirements(term: Mapping[str, Any], group: str, path: Path) -> tuple[Requirement, ...]:
    entries = _sequence(term.get(group), (*path, group))
    return tuple(_requirement(entry, (*path, group, i)) for i, entry in enumerate(entries))


def _requirement(value: Any, path: Path) -> Requirement:
    entry = _mapping(value, path)
    values = _sequence(entry.get("values"), (*path, "values"))
    return Requirement(
        _string(entry.get("key", ""), (*path, "key")),
        _string(entry.get("operator", ""), (*path, "operator")),
        tuple(_string(item, (*path, "values", i)) for i, item in enumerate(values)),
    )


def _mapping(value: Any, path: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be a mapping, not {_shape(value)}")
    return value


def _sequence(value: Any, path: Path) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise SpecError(path, f"must be a list, not {_shape(value)}")
    return value


def _string(value: Any, path: Path) -> str:
    if isinstance(value, str):
        return str(value)  # a plain str, whatever subclass the YAML parser made
    if isinstance(value, bool | int | float):
        # Kubernetes refuses numbers and booleans here; YAML reads 22.04 and true as them.
        raise NotAString(path, value)
    raise SpecError(path, f"must be a string, not {_shape(value)}")


def _shape(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "a list"
    return "null" if value is None else f"{type(value).__name__} {value!r}"
