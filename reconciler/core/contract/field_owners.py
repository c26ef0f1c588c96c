"""What applying a declared resource would change in the live one, and who owns those fields.

gpudrv applies a driver resource (server-side apply, field manager gpudrv) only where git and the
cluster differ, and never with `force`: a field that another field manager owns (Helm, Argo CD,
Flux, a person's kubectl) is that manager's to change. The API server records ownership in
`metadata.managedFields[].fieldsV1`, a tree of `f:<field>` keys (`k:`/`v:`/`i:` for list items) in
which an empty object marks an owned leaf; a manager owns a path when the tree has it.
Everything here is pure: plain JSON data in, data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
