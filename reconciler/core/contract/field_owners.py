"""What applying a declared resource would change in the live one, and who owns those fields.

gpudrv applies a driver resource or a PodDisruptionBudget (server-side apply, field manager gpudrv)
only where git and the cluster differ, and never with `force`: a field that another field manager
owns (Helm, Argo CD, Flux, a person's kubectl) is that manager's to change. The API server records
ownership in `metadata.managedFields[].fieldsV1`, a tree of `f:<field>` keys (`k:`/`v:`/`i:` for list
items) in which an empty object marks an owned leaf; a manager owns a path when the tree has it. An
unforced apply that would change such a field is refused by the API server (409) with the fields
and their managers; `apply_conflicts` reads them and `refusal` words the one line gpudrv prints.
Everything here is pure: plain JSON data in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]
GPUDRV = "gpudrv"  # gpudrv's field manager (adapters/fleet.FIELD_MANAGER)


@dataclass(frozen=True)
class Difference:
    """A declared field whose live value differs (`live` None: the cluster lacks it)."""

    path: Path
    desired: Any
    live: Any

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Owned:
    """A differing field and the other managers that own it now."""

    difference: Difference
    managers: tuple[str, ...]


_MISSING = object()


def differences(desired: Mapping[str, Any], live: Any, base: Path = ()) -> list[Difference]:
    """Every declared leaf whose live value is not the same: a mapping is compared key by key
    (fields the cluster has and git does not declare are defaults or another manager's, not a
    difference); anything else (lists included) as a whole. A bool is never equal to 1."""
    found: list[Difference] = []
    live_map = live if isinstance(live, Mapping) else {}
    for key, want in desired.items():
        path = (*base, str(key))
        have = live_map.get(key, _MISSING)
        if isinstance(want, Mapping) and isinstance(have, Mapping):
            found.extend(differences(want, have, path))
        elif have is _MISSING or not same(want, have):
            found.append(Difference(path, want, None if have is _MISSING else have))
    return found


def same(a: Any, b: Any) -> bool:
    """JSON equality with types kept apart (True != 1, 1 == 1.0 as JSON numbers are)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def owners(managed_fields: Any, path: Path, me: str = GPUDRV) -> tuple[str, ...]:
    """The field managers other than `me` that own `path` or something under it, in the order the
    server lists them. A malformed managedFields entry owns nothing (the server would not write one)."""
    found: list[str] = []
    for entry in managed_fields if isinstance(managed_fields, list) else []:
        if not isinstance(entry, Mapping):
            continue
        manager = entry.get("manager")
        if not isinstance(manager, str) or manager == me or entry.get("subresource"):
            continue  # status and other subresources are not the fields gpudrv applies
        if _has(entry.get("fieldsV1"), path) and manager not in found:
            found.append(manager)
    return tuple(found)


def _has(tree: Any, path: Path) -> bool:
    for part in path:
        if not isinstance(tree, Mapping):
            return False
        tree = tree.get(f"f:{part}", _MISSING)
        if tree is _MISSING:
            return False
    return True


def owned_by_others(
    desired: Mapping[str, Any], live: Mapping[str, Any], managed_fields: Any, base: Path = ("spec",)
) -> tuple[list[Difference], list[Owned]]:
    """The differences between the declared and the live spec, and those another manager owns."""
    found = differences(desired, live, base)
    owned = [Owned(item, who) for item in found if (who := owners(managed_fields, item.path))]
    return found, owned


def manager_list(owned: Sequence[Owned]) -> tuple[str, ...]:
    names: list[str] = []
    for item in owned:
        names.extend(name for name in item.managers if name not in names)
    return tuple(names)


# --- an unforced server-side apply the API server refused (409) ---------------------------------------

FIELD_MANAGER_CONFLICT = "FieldManagerConflict"  # metav1.CauseTypeFieldManagerConflict: a 409's causes
NO_FORCE = "gpudrv does not take fields from another manager (no forced apply)"
_QUOTED = r'"((?:[^"\\]|\\.)*)"'  # a manager's name as Go's %q writes it
_MANAGER = re.compile(_QUOTED)
_WITH = re.compile(rf"conflicts? with {_QUOTED}")


@dataclass(frozen=True)
class Conflict:
    """A field an unforced apply would have changed, and the field manager that owns it."""

    field: str  # dotted as Difference.dotted: spec.minAvailable
    manager: str


def apply_conflicts(causes: Iterable[tuple[str, str, str]], message: str = "") -> tuple[Conflict, ...]:
    """The fields and their managers in the API server's refusal of an unforced server-side apply
    (apimachinery pkg/util/managedfields/internal/conflict.go): each cause (reason, message, field) of
    reason FieldManagerConflict names the field (`.spec.minAvailable`) and the manager (`conflict with
    "helm"`; `"helm" using policy/v1` when it wrote with an update). Without such causes, the message:
    `Apply failed with 1 conflict: conflict with "helm": .spec.minAvailable`, or, for several,
    `conflicts with "helm":` followed by a `- .spec.x` line per field. In the server's order, each once."""
    found = [
        Conflict(_dotted(field), _unquote(named.group(1)))
        for reason, text, field in causes
        if reason == FIELD_MANAGER_CONFLICT and field.strip() and (named := _MANAGER.search(text))
    ]
    return tuple(dict.fromkeys(found or _from_message(message)))


def _from_message(message: str) -> list[Conflict]:
    found: list[Conflict] = []
    manager: str | None = None
    for line in (line.strip() for line in message.splitlines()):
        if line.startswith("- ") and manager is not None:
            found.append(Conflict(_dotted(line[2:]), manager))
        elif named := _WITH.search(line):
            manager = _unquote(named.group(1))
            _, colon, field = line[named.end() :].partition(": .")
            if colon and field.strip():
                found.append(Conflict(_dotted(field), manager))
    return found


def _dotted(field: str) -> str:
    return field.strip().removeprefix(".")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def owned_by(names: Sequence[str]) -> str:
    """`field manager 'helm' owns`, `field managers 'helm', 'argocd-controller' own`."""
    listed = ", ".join(map(repr, names))
    return f"field manager {listed} owns" if len(names) == 1 else f"field managers {listed} own"


def refusal(ref: str, conflicts: Sequence[Conflict], said: str, advice: str) -> str:
    """The one line for an unforced apply the API server refused: each manager with the fields it owns
    (the server's own words, `said`, where it named none), that gpudrv never forces, and `advice`."""
    fields: dict[str, list[str]] = {}
    for conflict in conflicts:
        fields.setdefault(conflict.manager, []).append(conflict.field)
    owners = "; ".join(f"{owned_by([name])} {', '.join(owned)}" for name, owned in fields.items())
    why = owners or f"the API server refused gpudrv's server-side apply ({said or 'no message'})"
    return f"{ref}: {why}: {NO_FORCE}. {advice}"
