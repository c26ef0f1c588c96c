"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it, pure.

A candidate never trusts another host's clock: a lease held by someone else is expired when this
candidate has seen it unchanged for a whole lease duration on its own monotonic clock (the holder's
renewTime only tells whether it changed). The leader renews every retry period and steps down when it
could not renew within the renew deadline, which is shorter than the lease duration: it has stopped
acting before anyone else may start.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True)
class Timing:
    lease_duration: float = 15.0  # a standby takes over after seeing the lease unrenewed this long
    renew_deadline: float = 10.0  # the leader steps down when it could not renew for this long
    retry_period: float = 2.0  # how often candidates try, and the leader renews

    def problem(self) -> str | None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            return (
                "leader election needs retry period < renew deadline < lease duration "
                f"(got {self.retry_period:g}s, {self.renew_deadline:g}s, {self.lease_duration:g}s)"
            )
        return None


@dataclass(frozen=True)
class Record:
    """The Lease's spec, and its resourceVersion for a compare-and-swap update."""

    holder: str | None
    duration: float
    acquired: datetime | None = None
    renewed: datetime | None = None
    transitions: int = 0
    version: str = ""

    def fingerprint(self) -> tuple[str | None, datetime | None, str]:
        """What changes whenever anyone writes the lease."""
        return self.holder, self.renewed, self.version


class Step(StrEnum):
    CREATE = "create"  # no lease yet: create it, holding it
    TAKE = "take"  # free, or its holder has stopped renewing: take it over
    RENEW = "renew"  # ours: renew it
    WAIT = "wait"  # someone else holds it and renews it


def step(record: Record | None, me: str, observed_at: float, now: float) -> Step:
    """What a candidate does next. `observed_at` is when (monotonic) this candidate last saw the
    record change; `now` the monotonic time now."""
    if record is None:
        return Step.CREATE
    if record.holder == me:
        return Step.RENEW
    if record.holder and now < observed_at + record.duration:
        return Step.WAIT
    return Step.TAKE


def claim(record: Record | None, me: str, duration: float, wall: datetime) -> Record:
    """The record to write to create, take or renew the lease at wall-clock time `wall`."""
    if record is None:
        return Record(me, duration, wall, wall, 0)
    if record.holder == me:
        return replace(record, duration=duration, renewed=wall)
    return replace(record, holder=me, duration=duration, acquired=wall, renewed=wall,
                   transitions=record.transitions + 1)  # fmt: skip


def released(record: Record, wall: datetime) -> Record:
    """Given up on shutdown: no holder, so a standby takes it at its next try, not a lease later."""
    return replace(record, holder=None, duration=1.0, renewed=wall)


def lost(last_renewed: float, now: float, timing: Timing) -> bool:
    """The leader could not renew within the renew deadline: it must stop acting now."""
    return now - last_renewed >= timing.renew_deadline
