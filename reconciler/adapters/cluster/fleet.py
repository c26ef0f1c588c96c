"""Reads and writes an upgrade needs: GPU nodes, pods on nodes, PDBs, evictions, patches, events; and
gpudrv's server-side apply, never forced (apply_without_force: lab mode's PDBs here, operator mode's
driver resources in operator_fleet).

Everything goes through the gateway (adapters.kube): it sends the requests, parses the JSON and maps
HTTP errors; request bodies are plain dicts. Reads of the whole fleet are a constant number of
requests whatever its size: one metadata-only node list plus the names of the cordoned nodes, one
pod list for any number of nodes (docs/scale.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.adapters import kube
from reconciler.adapters.cluster import GPU_SELECTOR, Cluster, events, label_selector
from reconciler.core.base.label_selector import LabelSelector
from reconciler.core.contract import field_owners
from reconciler.core.lab.executor import DRIVER_APP, StepFailed
from reconciler.core.upgrades import budget
from reconciler.core.upgrades.budget import Role
from reconciler.core.upgrades.upgrade import LiveNode
from reconciler.core.views import reads
from reconciler.errors import GpudrvError

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "gpudrv"
CONFLICT_RETRIES = 10  # a node write that lost this many races in a row gives up
REVISION_HASH_LABEL = "controller-revision-hash"  # the DaemonSet controller's label on its pods


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"
    REFUSED = "refused"  # a disruption budget said no (its cause DisruptionBudget; 500: several budgets)
    THROTTLED = "throttled"  # 429 without that cause: a busy server, still busy after the waits it asked
    GONE = "gone"  # the pod was already gone


@dataclass(frozen=True)
class Eviction:
    """The eviction API's answer."""

    outcome: EvictionOutcome
    message: str = ""


class Fleet:
    """The cluster as the upgrade executor sees it (it implements core.executor.UpgradeFleet)."""

    def __init__(self, gateway: kube.Gateway) -> None:
        self.gateway = gateway
        self.cluster = Cluster(gateway)
        self.host = gateway.host
        self.conflicts = 0  # node writes sent again after a 409

    # --- reads -----------------------------------------------------------------------------------

    def gpu_nodes(
        self, selector: LabelSelector | None = None, labels: Collection[str] | None = None
    ) -> list[LiveNode]:
        """Every GPU node (matching `selector`) with only `labels` (None: all) and gpudrv's annotations:
        two requests."""
        return self.live_nodes(label_selector(GPU_SELECTOR, selector), labels)

    def live_nodes(self, selector: str, labels: Collection[str] | None = None) -> list[LiveNode]:
        """The nodes the label selector picks ("" for all). Whole Node objects would carry the status
        (images, conditions) for nothing: metadata, and the names of the cordoned nodes beside it."""
        cordoned = self.cluster.cordoned(selector)
        return [
            LiveNode(node, node.name in cordoned, kube.kept_annotations(document, reads.ANNOTATIONS))
            for node, document in self.cluster.node_documents(selector, labels)
        ]

    def node(self, name: str) -> tuple[LiveNode, str] | None:
        """The node and its resourceVersion, or None if there is no such node."""
        document = self.gateway.get(kube.NODES, name, missing_ok=True)
        if document is None:
            return None
        return kube.live_node(document), str(document["metadata"].get("resourceVersion") or "")

    def pods_on(self, node: str) -> list[budget.Pod]:
        items = self.gateway.items(kube.PODS, query={"fieldSelector": f"spec.nodeName={node}"})
        return [kube.pod(item) for item in items]

    def pods_on_nodes(self, nodes: Collection[str]) -> dict[str, list[budget.Pod]]:
        """The pods on each of `nodes`: one list of every pod, streamed, keeping theirs (none asked:
        no request). Per-node field selectors would be one request per node."""
        found: dict[str, list[budget.Pod]] = {name: [] for name in nodes}
        if not found:
            return found
        for item in self.gateway.items(kube.PODS):
            on = (item.get("spec") or {}).get("nodeName")
            if on in found:
                found[on].append(kube.pod(item))
        return found

    def budgets(self) -> list[budget.Budget]:
        items = self.gateway.items(kube.BUDGETS)
        return [kube.disruption_budget(item) for item in items]

    # --- writes ----------------------------------------------------------------------------------

    def patch_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        unschedulable: bool | None = None,
        resource_version: str | None = None,
        expect: Callable[[LiveNode], None] | None = None,
    ) -> None:
        """A JSON merge patch; a None value removes the key.

        With resource_version, the patch only applies to that version: a lost race raises kube.Conflict
        (a compare-and-swap: the caller decides). Without, the node is read fresh and the patch is sent
        with that version; another writer between the two (409 Conflict) makes it read the node again
        and retry, up to CONFLICT_RETRIES times. `expect` sees each fresh node first and raises to stop
        (e.g. the lease on it is no longer this run's).
        """
        if resource_version is not None:
            self._patch(name, _patch_body(labels, annotations, unschedulable, resource_version))
            return
        for attempt in range(CONFLICT_RETRIES):
            found = self.node(name)
            if found is None:
                raise kube.NotFound(self.host, 404, "Not Found", f'nodes "{name}" not found')
            live, version = found
            if expect is not None:
                expect(live)
            try:
                self._patch(name, _patch_body(labels, annotations, unschedulable, version or None))
                return
            except kube.Conflict:
                self.conflicts += 1
                time.sleep(min(0.05 * 2**attempt, 1.0))  # another writer: read its change, then try again
        raise kube.Conflict(
            self.host,
            409,
            "Conflict",
            f"node {name} changed under {CONFLICT_RETRIES} writes in a row; gave up",
        )

    def swap_node(self, name: str, resource_version: str, annotations: Mapping[str, str | None]) -> bool:
        """A compare-and-swap: the annotations, only onto that version of the node."""
        try:
            self.patch_node(name, annotations=annotations, resource_version=resource_version)
        except kube.Conflict:
            self.conflicts += 1
            return False
        return True

    def drain(
        self,
        node: str,
        roles: Collection[Role],
        *,
        timeout: float,
        force: bool,
        say: Callable[[str], None],
        wait: Callable[[str], None],
    ) -> None:
        from reconciler.adapters.cluster.drainer import (  # the drainer reads through a Fleet
            Drain,
            DrainTimeout,
        )

        try:
            Drain(self, node, roles, timeout, force, say=say, wait=wait).run()
        except DrainTimeout as exc:
            raise StepFailed(str(exc)) from None

    def restart_driver(self, node: str) -> list[str]:
        """Delete the node's driver pods (app=nvidia-driver-daemonset) that are out of date, as the
        operator does at pod-restart-required (k8s-operator-libs upgrade_state.go ProcessPodRestartNodes):
        its controller-revision-hash is not its DaemonSet's newest ControllerRevision's, or it has no
        DaemonSet at all (orphaned). Pods already terminating are left to go."""
        query = {"fieldSelector": f"spec.nodeName={node}", "labelSelector": f"app={DRIVER_APP}"}
        # Whole, before the requests below: a streamed list would stay open under them.
        items = list(self.gateway.items(kube.PODS, query=query))
        deleted = []
        revisions: dict[tuple[str, str], str | None] = {}
        for item in items:
            metadata = item.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                continue
            pod = kube.pod(item)
            owner = _daemonset_owner(metadata)
            if owner is not None:
                key = (pod.namespace, owner)
                if key not in revisions:
                    revisions[key] = self._newest_revision(*key)
                current = (metadata.get("labels") or {}).get(REVISION_HASH_LABEL)
                if revisions[key] is None or current == revisions[key]:
                    continue  # in sync (or no revision to compare with yet)
            self.delete_pod(pod)
            deleted.append(pod.ref)
        return deleted

    def _newest_revision(self, namespace: str, daemonset: str) -> str | None:
        """The hash of the DaemonSet's newest ControllerRevision (the libs'
        GetDaemonsetControllerRevisionHash: the revision's name without the DaemonSet's name)."""
        items = self.gateway.items(kube.CONTROLLER_REVISIONS, namespace)
        owned = [
            item
            for item in items
            if _daemonset_owner(item.get("metadata") or {}) == daemonset
            and isinstance(item.get("revision"), int)
        ]
        if not owned:
            return None
        newest = max(owned, key=lambda item: int(item["revision"]))
        return str(newest["metadata"]["name"]).removeprefix(f"{daemonset}-")

    def _patch(self, name: str, body: dict[str, Any]) -> None:
        self.gateway.write("PATCH", kube.NODES, name=name, body=body, content_type=MERGE_PATCH)

    def evict(self, target: budget.Pod) -> Eviction:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": target.name, "namespace": target.namespace},
        }
        try:
            self.gateway.write(
                "POST",
                kube.PODS,
                namespace=target.namespace,
                name=target.name,
                subresource="eviction",
                body=body,
                content_type=kube.JSON,
            )
        except kube.NotFound:
            return Eviction(EvictionOutcome.GONE)
        except kube.ApiError as exc:
            if exc.status == 429 and not exc.by_budget:  # the cause decides, not the status code
                return Eviction(EvictionOutcome.THROTTLED, exc.explanation())
            if exc.status in (429, 500):  # 429: a budget said no; 500: several budgets select the pod
                return Eviction(EvictionOutcome.REFUSED, exc.explanation())
            raise
        return Eviction(EvictionOutcome.EVICTED)

    def delete_pod(self, target: budget.Pod) -> None:
        with contextlib.suppress(kube.NotFound):  # already gone: what we wanted
            self.gateway.write("DELETE", kube.PODS, namespace=target.namespace, name=target.name)

    def apply_budget(
        self,
        namespace: str,
        name: str,
        spec: Mapping[str, Any],
        *,
        ref: str,
        advice: str,
        dry_run: bool = False,
    ) -> None:
        """The budget as git declares it, by apply_without_force: a field another manager owns is
        refused in one line (`ref`, the manager, `advice`), the budget left as it is."""
        manifest = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": dict(spec),
        }
        apply_without_force(
            self.gateway, kube.BUDGETS, manifest, ref=ref, advice=advice, namespace=namespace, dry_run=dry_run
        )

    def event(
        self, node: str, reason: str, message: str, warning: bool = False, name: str | None = None
    ) -> None:
        """A Node event, so `kubectl describe node` and `kubectl get events` show what gpudrv did.
        With `name`, sent again after a lost answer it is not a second event (409: it exists)."""
        event = events.NodeEvent(node, reason, message, key="", warning=warning)
        document = events.node_event(event, FIELD_MANAGER, socket.gethostname(), events.now(), name)
        with contextlib.suppress(kube.Conflict):  # already there: this very event, sent before
            events.create(self.gateway, document)


def apply_without_force(
    gateway: kube.Gateway,
    resource: kube.Resource,
    manifest: Mapping[str, Any],
    *,
    ref: str,
    advice: str,
    namespace: str | None = None,
    dry_run: bool = False,
) -> None:
    """Server-side apply of `manifest` as field manager gpudrv, never forced: where it would change a
    field another manager owns (Helm, Argo CD, Flux, a person's kubectl), the API server refuses the
    whole apply (409) and writes nothing; that refusal is a GpudrvError of one line naming the fields
    and their managers (core/contract/field_owners.refusal), then `advice`. Fields gpudrv applied
    before stay its own (a resource it created, fields it once took by a forced apply), so applying
    them again is never a conflict. `dry_run`: the API server checks it all and writes nothing."""
    query: dict[str, str | bool | None] = {"fieldManager": FIELD_MANAGER}
    if dry_run:
        query["dryRun"] = "All"
    name = str(manifest["metadata"]["name"])
    try:
        gateway.write(
            "PATCH",
            resource,
            namespace=namespace,
            name=name,
            query=query,
            body=manifest,
            content_type=APPLY_PATCH,
        )
    except kube.Conflict as exc:
        conflicts = field_owners.apply_conflicts(exc.cause_details, exc.detail)
        raise GpudrvError(field_owners.refusal(ref, conflicts, exc.explanation(), advice)) from None


def _patch_body(
    labels: Mapping[str, str | None] | None,
    annotations: Mapping[str, str | None] | None,
    unschedulable: bool | None,
    resource_version: str | None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if resource_version:
        metadata["resourceVersion"] = resource_version
    body: dict[str, Any] = {"metadata": metadata} if metadata else {}
    if unschedulable is not None:
        body["spec"] = {"unschedulable": unschedulable or None}
    return body


class SystemHost:
    """The executor's clocks and waits, and whether a lease holder on this host still runs."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def alive(self, holder: str) -> bool | None:
        host, _, rest = holder.partition("/")
        if host != socket.gethostname():
            return None
        try:
            os.kill(int(rest.partition("/")[0]), 0)
        except (ValueError, ProcessLookupError):
            return False
        except PermissionError:
            return True
        return True


def run_owner() -> str:
    """A lease holder's name: this host, this process, and a random part for this node run."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def _daemonset_owner(metadata: Mapping[str, Any]) -> str | None:
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet" and ref.get("controller"):
            return str(ref.get("name") or "")
    return None
