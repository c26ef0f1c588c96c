"""The driver resources of an operator-mode apply: what git would change in the cluster, who owns it,
and writing only that (or waiting for the GitOps engine that owns it to write it).

gpudrv applies a ClusterPolicy or NVIDIADriver only when the live one differs from git in a field git
declares, and never forces: a field another field manager owns (Helm, Argo CD, Flux) is refused here
with that manager's name, before any node is touched. `--hold` / `--await-sync` stage the rollout
around that manager's own sync instead (docs/gitops.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.adapters import kube
from reconciler.adapters.cluster import operator_fleet
from reconciler.core.contract import field_owners
from reconciler.core.contract.field_owners import Difference, Owned
from reconciler.core.contract.operator import DriverResource
from reconciler.errors import GpudrvError

SYNC_POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Change:
    """One declared resource against the cluster: what differs, and what of that others own."""

    item: DriverResource
    exists: bool
    differences: tuple[Difference, ...]
    owned: tuple[Owned, ...]

    @property
    def needed(self) -> bool:
        return not self.exists or bool(self.differences)

    def what(self) -> str:
        """The differences in a few words: `spec.driver.version '550' -> '570'`."""
        if not self.exists:
            return "not in the cluster yet"
        shown = [f"{d.dotted} {_value(d.live)} -> {_value(d.desired)}" for d in self.differences[:3]]
        more = len(self.differences) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def changes(gateway: kube.Gateway, declared: Sequence[DriverResource]) -> list[Change]:
    """Each declared resource compared with the live one, field by field (one GET each)."""
    found = []
    for item in declared:
        live = operator_fleet.live_document(gateway, item.kind, item.name)
        if live is None:
            found.append(Change(item, False, (), ()))
            continue
        spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
        managed = (live.get("metadata") or {}).get("managedFields")
        differences, owned = field_owners.owned_by_others(dict(item.spec), spec or {}, managed)
        found.append(Change(item, True, tuple(differences), tuple(owned)))
    return found


def refuse_owned(found: Sequence[Change]) -> None:
    """gpudrv never takes a field from another manager: one line naming it, and what to do."""
    for change in found:
        if not change.owned:
            continue
        first = change.owned[0]
        owned_by = field_owners.owned_by(field_owners.manager_list(change.owned))
        where = change.item.origin or "DIR"
        raise GpudrvError(
            f"{change.item.ref}: {first.difference.dotted} is {_value(first.difference.live)} in the cluster "
            f"and {_value(first.difference.desired)} in {where}, and {owned_by} it: "
            f"{field_owners.NO_FORCE}. Let that manager apply "
            "the change and stage the rollout around its sync: gpudrv apply --hold before it, gpudrv "
            "apply --await-sync after it (docs/gitops.md); or remove the resource from that manager first"
        )


def apply_needed(gateway: kube.Gateway, found: Sequence[Change], say: Callable[[str], None]) -> None:
    """Server-side apply of the resources that differ; the others get no request at all."""
    for change in found:
        if not change.needed:
            say(f"{change.item.ref}: as declared, nothing to apply")
            continue
        operator_fleet.apply_resource(gateway, change.item)
        say(f"applied {change.item.ref} ({change.what()}; server-side apply, field manager gpudrv)")


def await_sync(
    gateway: kube.Gateway,
    declared: Sequence[DriverResource],
    timeout: float,
    say: Callable[[str], None],
) -> bool:
    """Waits until every declared resource is live as declared (written by the GitOps engine or Helm
    that owns it); False after `timeout`. Says what it waits for once, and again when that changes."""
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        pending = [change for change in changes(gateway, declared) if change.needed]
        if not pending:
            say("the driver resources in the cluster are as declared: the operator rolls them out now")
            return True
        text = "; ".join(f"{change.item.ref}: {change.what()}" for change in pending)
        if text != said:
            said = text
            owners = field_owners.manager_list([o for change in pending for o in change.owned])
            by = f" (owned by {', '.join(repr(name) for name in owners)})" if owners else ""
            say(f"waiting for the GitOps engine to apply the driver resources{by}: {text}")
        if time.monotonic() >= deadline:
            return False
        time.sleep(SYNC_POLL_SECONDS)
