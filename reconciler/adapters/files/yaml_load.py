"""YAML from files gpudrv did not write, read with limits: the one YAML reader for manifests,
gpudrv.yaml and the kubeconfig check.

libyaml (PyYAML's C parser) turns the text into events, fast; this module composes them into nodes
with a loop, not recursion, and hands each document to ruamel's round-trip constructor, which keeps
the line and column of every key and item (adapters/files/positions.py reads them). Composing here is
where the limits are enforced, each as one Problem with the line it is at:

- nesting deeper than MAX_DEPTH (10,000 levels would exhaust the stack of a recursive reader);
- aliases that expand a document by more than MAX_ALIAS_NODES nodes (a billion laughs: 9 aliases of 9
  aliases ... is small text and an exponential walk for anyone who reads the data), and an alias
  inside its own anchor (a structure that contains itself);
- explicit tags other than YAML's own scalar and collection tags: `!!python/object:...`, local tags
  like `!foo`, `!!binary`, `!!set`: a document that needs them is not a Kubernetes manifest, and
  reading it as if it were would be wrong silently.

An explicit `!!str` is a plain string, as Kubernetes reads it (ruamel would keep it as a tagged
scalar for round-tripping). Everything else (what a plain scalar resolves to, merge keys, duplicate
keys) is ruamel's YAML 1.2 round-trip behaviour, as before.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MantissaNoDotYAML1_1Warning, MarkedYAMLError, StreamMark
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.tag import Tag

MAX_DEPTH = 100
MAX_ALIAS_NODES = 100_000
_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset(
    _CORE + name for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
)


class Problem(Exception):
    """Why the text is not YAML gpudrv reads; `line` is 1-based, None when unknown."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


# Idle round-trip readers. Making one (its plug-ins are looked for on disk, its resolver built) cost
# more than parsing a Node manifest: 10,000 files made 10,000 readers. Each text takes one for itself
# (two texts read at once never share one) and gives it back only when every document was read: a
# constructor that stopped at an error may hold half its state.
_IDLE: list[YAML] = []


def documents(text: str, version: tuple[int, int] | None = None) -> Iterator[Any]:
    """Each document of the text as ruamel's round-trip data (CommentedMap, CommentedSeq, scalars),
    in order; a Problem at the first thing that is not YAML gpudrv reads (after the documents before).
    `version`: the YAML version of documents without a %YAML directive (None: 1.2)."""
    reader = _IDLE.pop() if _IDLE else YAML(typ="rt")
    construct = reader.constructor.construct_document
    import yaml  # here: commands that read no YAML do not pay for it

    shielded, restore = _shield(text)
    # libyaml when it is there (PyYAML's wheels have it); PyYAML's own parser otherwise.
    parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(shielded)
    try:
        for root in _Composer(yaml, reader, restore, version).nodes(parser):
            yield _construct(construct, root)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, such as NUL
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        raise Problem(f"invalid YAML: {exc.reason} (character {exc.character!r})", line) from None
    finally:
        parser.dispose()
    _IDLE.append(reader)


def _construct(construct: Any, root: Node) -> Any:
    try:
        with warnings.catch_warnings():
            # ruamel warns, in many lines on stderr, about YAML 1.1 floats with no dot (1e3), and loads
            # them as floats: gpudrv writes one line per error, and its checks name such values.
            warnings.simplefilter("ignore", MantissaNoDotYAML1_1Warning)
            return construct(root)
    except MarkedYAMLError as exc:  # a duplicate key, a value its explicit tag cannot read
        mark = exc.problem_mark or exc.context_mark
        line = _line(mark) or _line(root.start_mark)
        raise Problem(f"invalid YAML: {exc.problem or exc.context}", line) from None
    except (ValueError, TypeError, ArithmeticError) as exc:  # e.g. `!!int abc`
        raise Problem(f"invalid YAML: {_first_line(str(exc))}", _line(root.start_mark)) from None


@dataclass
class _Open:
    """A collection being composed: its node, a mapping's key awaiting its value, and the number of
    nodes it stands for once every alias in it is expanded."""

    node: MappingNode | SequenceNode
    key: Node | None = None
    size: int = 1


@dataclass
class _Composer:
    yaml: Any  # PyYAML, imported by documents()
    loader: YAML  # its resolver and constructor follow its `version`: a document's %YAML directive
    restore: dict[int, int] | None  # str.translate table undoing _shield, None if nothing was shielded
    default_version: tuple[int, int] | None  # of a document without a %YAML directive (None: 1.2)
    anchors: dict[str, Node] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # anchor -> expanded size, once it is complete
    added: int = 0  # nodes the aliases of this document add
    rules: Any = None  # the resolver's implicit rules for this document's YAML version
    _tags: dict[str, Tag] = field(default_factory=dict)
    _by_first: dict[str, Any] = field(default_factory=dict)  # the rules for a scalar's first character

    def nodes(self, parser: Any) -> Iterator[Node]:
        """The root node of each document."""
        events = self.yaml  # the event classes, looked up once, scalars (the most of them) first
        scalar, start, end = events.ScalarEvent, events.MappingStartEvent, events.MappingEndEvent
        opening = (events.SequenceStartEvent, start)
        closing = (events.SequenceEndEvent, end)
        stack: list[_Open] = []
        root: Node | None = None
        while True:
            event = self._next(parser)
            kind = type(event)
            if kind is scalar:
                root = self._attach(stack, self._scalar(event), 1) or root
            elif kind in opening:
                if len(stack) >= MAX_DEPTH:
                    raise Problem(f"YAML nested deeper than {MAX_DEPTH} levels", self._line(event.start_mark))
                stack.append(_Open(self._collection(event)))
            elif kind in closing:
                done = stack.pop()
                done.node.end_mark = self._mark(event.end_mark)
                if done.node.anchor is not None:
                    self.sizes[done.node.anchor] = done.size
                root = self._attach(stack, done.node, done.size) or root
            elif kind is events.StreamEndEvent:
                return
            elif kind is events.DocumentStartEvent:
                self.anchors, self.sizes, self.added, root = {}, {}, 0, None
                self._version(event)
            elif kind is events.DocumentEndEvent:
                if root is not None:
                    yield root
            elif kind is events.AliasEvent:
                node, size = self._alias(event)
                root = self._attach(stack, node, size) or root

    def _mark(self, mark: Any) -> StreamMark:
        return StreamMark(None, mark.index, mark.line, mark.column)

    def _version(self, event: Any) -> None:
        """YAML 1.2 unless the document says `%YAML 1.1` (then `yes` is a boolean, `017` octal)."""
        if event.version not in (None, (1, 1), (1, 2)):
            shown = ".".join(map(str, event.version))
            raise Problem(
                f"invalid YAML: %YAML {shown} is not supported (1.1 or 1.2)", self._line(event.start_mark)
            )
        self.loader.version = event.version or self.default_version
        self.rules = self.loader.resolver.versioned_resolver
        self._by_first = {}

    def _resolve(self, kind: type[Node], value: str | None, implicit: Any) -> Tag:
        """ruamel's resolver.resolve, with the version's rules looked up once per document (ruamel
        looks them up for every scalar, through an exception, which dominated large directories)."""
        if kind is ScalarNode and value is not None and implicit[0]:
            first = value[:1]
            rules = self._by_first.get(first)
            if rules is None:
                rules = self._by_first[first] = self.rules.get(first, []) + self.rules.get(None, [])
            for tag, pattern in rules:
                if pattern.match(value):
                    return self._tags.setdefault(tag, Tag(suffix=tag))
        resolver = self.loader.resolver
        if kind is ScalarNode:
            return resolver.DEFAULT_SCALAR_TAG  # type: ignore[no-any-return]
        return resolver.DEFAULT_SEQUENCE_TAG if kind is SequenceNode else resolver.DEFAULT_MAPPING_TAG  # type: ignore[no-any-return]

    def _line(self, mark: Any) -> int | None:
        return None if mark is None else self._mark(mark).line + 1

    def _next(self, parser: Any) -> Any:
        try:
            return parser.get_event()
        except self.yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise Problem(f"invalid YAML: {exc.problem or exc.context}", self._line(mark)) from None
        except self.yaml.reader.ReaderError:
            raise  # documents() knows the text, to name the line
        except self.yaml.YAMLError as exc:
            raise Problem(f"invalid YAML: {_first_line(str(exc))}", None) from None

    def _attach(self, stack: list[_Open], node: Node, size: int) -> Node | None:
        """Put a complete node into the collection being composed; the node itself if it is a root."""
        if not stack:
            return node
        parent = stack[-1]
        parent.size += size
        if isinstance(parent.node, SequenceNode):
            parent.node.value.append(node)
        elif parent.key is None:
            parent.key = node
        else:
            parent.node.value.append((parent.key, node))
            parent.key = None
        return None

    def _scalar(self, event: Any) -> ScalarNode:
        value = event.value if self.restore is None else event.value.translate(self.restore)
        tag = self._tag(event, ScalarNode, value)
        node = ScalarNode(
            tag, value, self._mark(event.start_mark), self._mark(event.end_mark), style=event.style
        )
        self._anchor(event, node, complete=True)
        return node

    def _collection(self, event: Any) -> MappingNode | SequenceNode:
        kind = SequenceNode if type(event) is self.yaml.SequenceStartEvent else MappingNode
        node = kind(
            self._tag(event, kind, None), [], self._mark(event.start_mark), None, flow_style=event.flow_style
        )
        self._anchor(event, node, complete=False)
        return node

    def _anchor(self, event: Any, node: Node, complete: bool) -> None:
        if event.anchor is None:
            return
        node.anchor = event.anchor
        self.anchors[event.anchor] = node
        self.sizes.pop(event.anchor, None)  # a reused anchor name: its new node is not complete yet
        if complete:
            self.sizes[event.anchor] = 1

    def _alias(self, event: Any) -> tuple[Node, int]:
        name = event.anchor
        if name not in self.anchors:
            raise Problem(
                f"invalid YAML: alias *{name} has no anchor &{name} before it", self._line(event.start_mark)
            )
        if name not in self.sizes:
            raise Problem(f"YAML alias *{name} is inside its own anchor", self._line(event.start_mark))
        size = self.sizes[name]
        self.added += size
        if self.added > MAX_ALIAS_NODES:
            raise Problem(
                f"YAML aliases expand this document by more than {MAX_ALIAS_NODES:,} nodes (an alias bomb?)",
                self._line(event.start_mark),
            )
        return self.anchors[name], size

    def _tag(self, event: Any, kind: type[Node], value: str | None) -> Tag:
        tag = event.tag
        if tag is None or tag == "!":
            return self._resolve(kind, value, getattr(event, "implicit", (True, False)))
        if tag not in ALLOWED_TAGS:
            shown = "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag
            raise Problem(
                f"YAML tag {shown} is not allowed: manifests are plain YAML (strings, numbers, booleans, "
                "null, mappings and sequences)",
                self._line(event.start_mark),
            )
        return Tag(suffix=tag)


_YAML_11_BREAKS = "\x85\u2028\u2029"


def _shield(text: str) -> tuple[str, dict[int, int] | None]:
    """libyaml breaks lines at NEL, LS and PS too (YAML 1.1); YAML 1.2, ruamel and positions.py do not.
    Where the text has one, each is replaced by a private-use character the text does not contain (same
    length: every position stays), and the table that puts them back in scalar values."""
    if not any(char in text for char in _YAML_11_BREAKS):
        return text, None
    spare = (chr(code) for code in range(0xE000, 0xF900) if chr(code) not in text)
    shield = {ord(char): next(spare) for char in _YAML_11_BREAKS}
    return text.translate(shield), {ord(stand_in): code for code, stand_in in shield.items()}


def _line(mark: Any) -> int | None:
    return None if mark is None else int(mark.line) + 1


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unreadable"
