"""Leader election: a coordination.k8s.io/v1 Lease, campaigned for in a thread (see
core/incluster/election.py).

Every write is a compare-and-swap on the Lease's resourceVersion (a PUT that names it): two replicas
that try at once cannot both win, the loser gets 409 Conflict and tries again a retry period later.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters import kube
from reconciler.core.incluster import election
from reconciler.core.incluster.election import Record, Step, Timing
from reconciler.errors import GpudrvError

log = logging.getLogger("gpudrv.lease")


class LeaseLock:
    """One Lease object: read it, create it, replace it."""

    def __init__(self, gateway: kube.Gateway, namespace: str, name: str) -> None:
        self.gateway, self.namespace, self.name = gateway, namespace, name

    def get(self) -> Record | None:
        document = self.gateway.get(kube.LEASES, self.name, self.namespace, missing_ok=True)
        return None if document is None else record(document)

    def create(self, wanted: Record) -> Record:
        return record(self.gateway.create(kube.LEASES, self._document(wanted), self.namespace))

    def update(self, wanted: Record) -> Record:
        """Only if the Lease is still at `wanted.version`: else kube.Conflict."""
        return record(self.gateway.replace(kube.LEASES, self.name, self._document(wanted), self.namespace))

    def _document(self, wanted: Record) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if wanted.version:
            metadata["resourceVersion"] = wanted.version
        spec: dict[str, Any] = {
            "holderIdentity": wanted.holder,
            "leaseDurationSeconds": max(1, math.ceil(wanted.duration)),
            "acquireTime": _micro(wanted.acquired),
            "renewTime": _micro(wanted.renewed),
            "leaseTransitions": wanted.transitions,
        }
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {key: value for key, value in spec.items() if value is not None},
        }


def record(document: dict[str, Any]) -> Record:
    spec = document.get("spec") or {}
    return Record(
        holder=spec.get("holderIdentity") or None,
        duration=float(spec.get("leaseDurationSeconds") or 0),
        acquired=_parse(spec.get("acquireTime")),
        renewed=_parse(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        version=str((document.get("metadata") or {}).get("resourceVersion", "")),
    )


def _micro(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


class Elector:
    """Campaigns until stopped; `leading` is set while this replica holds the lease. `changed(True or
    False)` is called from the elector's thread on every change."""

    def __init__(
        self,
        lock: LeaseLock,
        identity: str,
        timing: Timing,
        changed: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        self.lock, self.identity, self.timing, self.changed = lock, identity, timing, changed
        self.leading = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self.observed: tuple[Any, ...] | None = None
        self.observed_at = time.monotonic()
        self.renewed_at = 0.0
        self.holder: str | None = None
        self.warned: tuple[str, float] = ("", 0.0)

    def start(self) -> Elector:
        self.thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        """Stop campaigning; release the lease if held, so a standby takes over at its next try."""
        self.stopping.set()
        self.thread.join(self.timing.retry_period + 10)
        was_leading = self.leading.is_set()
        self._set(False)
        if release and was_leading:
            self._release()

    def is_leading(self) -> bool:
        """Leading, and renewed within the renew deadline (even if this thread were stuck)."""
        return self.leading.is_set() and not election.lost(self.renewed_at, time.monotonic(), self.timing)

    def alive(self) -> bool:
        return self.thread.is_alive() or self.stopping.is_set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._try()
            except Exception:  # never die: a dead elector would look like a leader that stopped renewing
                log.exception("leader election: unexpected error")
            if self.leading.is_set() and election.lost(self.renewed_at, time.monotonic(), self.timing):
                log.error("could not renew the lease within %.0fs: stepping down", self.timing.renew_deadline)
                self._set(False)
            # Candidates spread their tries a little; the leader renews on time.
            wait = self.timing.retry_period
            if not self.leading.is_set():
                wait *= 1 + 0.2 * random.random()
            self.stopping.wait(wait)

    def _try(self) -> None:
        try:
            current = self.lock.get()
            now = time.monotonic()
            if current is None or current.fingerprint() != self.observed:
                self.observed = None if current is None else current.fingerprint()
                self.observed_at = now
            self._note_holder(current)
            step = election.step(current, self.identity, self.observed_at, now)
            if step is Step.WAIT:
                if self.leading.is_set():
                    log.error("the lease is held by %s now: stepping down", current and current.holder)
                self._set(False)
                return
            wanted = election.claim(current, self.identity, self.timing.lease_duration, datetime.now(UTC))
            written = self.lock.create(wanted) if step is Step.CREATE else self.lock.update(wanted)
            self.observed, self.observed_at = written.fingerprint(), time.monotonic()
            self.renewed_at = time.monotonic()
            if not self.leading.is_set():
                log.info(
                    "leading: took the lease %s/%s (%s)",
                    self.lock.namespace,
                    self.lock.name,
                    "created" if step is Step.CREATE else f"was {current.holder if current else None}",
                )
            self._set(True)
        except kube.Conflict:
            pass  # another replica wrote first: read again at the next try
        except (kube.ApiError, kube.Unreachable, GpudrvError) as exc:
            self._warn(str(exc))

    def _warn(self, text: str) -> None:
        """The same failure every retry period is logged once a minute, a new one at once."""
        now = time.monotonic()
        if text != self.warned[0] or now - self.warned[1] >= 60:
            log.warning("leader election: %s", text)
            self.warned = (text, now)

    def _note_holder(self, current: Record | None) -> None:
        holder = current.holder if current else None
        if holder not in (self.holder, self.identity):
            log.info("lease %s/%s held by %s", self.lock.namespace, self.lock.name, holder or "nobody")
        self.holder = holder

    def _set(self, leading: bool) -> None:
        if leading == self.leading.is_set():
            return
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        self.changed(leading)

    def _release(self) -> None:
        try:
            current = self.lock.get()
            if current is not None and current.holder == self.identity:
                self.lock.update(election.released(current, datetime.now(UTC)))
                log.info("released the lease %s/%s", self.lock.namespace, self.lock.name)
        except (kube.ApiError, kube.Unreachable, GpudrvError) as exc:
            log.warning("could not release the lease (a standby takes over when it expires): %s", exc)
