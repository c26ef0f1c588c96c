"""gpudrv probe: the kernel this node boots next, as an NFD feature file (docs/commands/probe.md).

The rules are core.boot's; this reads the host root, writes or prints the file, and loops with
--every. Cannot decide: one line on stderr, exit 2, and the feature file removed (a stale
next-kernel label is worse than none: it would name a kernel the node no longer boots).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters import files
from reconciler.adapters.files.host_root import HostRoot, remove
from reconciler.commands import ERROR, OK
from reconciler.core import boot
from reconciler.errors import GpudrvError

POLL = 5.0  # seconds between looks at --trigger


@dataclass(frozen=True)
class Settings:
    root: Path
    write: Path | None
    every: float | None  # seconds; None: once
    trigger: str | None  # a file inside --root a kernel hook touches


def run(settings: Settings) -> int:
    host = HostRoot(settings.root)
    if settings.every is None:
        return once(host, settings.write)
    while True:  # SIGTERM ends the process between runs or during a sleep
        stamp = host.stamp(settings.trigger) if settings.trigger else None
        try:
            once(host, settings.write)
        except GpudrvError as exc:  # the loop goes on: the next run may decide (update-grub finished)
            print(f"gpudrv: {exc}", file=sys.stderr)
        _wait(host, settings, stamp)


def once(host: HostRoot, write: Path | None) -> int:
    try:
        decision = boot.decide(host, host.running_kernel())
    except boot.Undecided as exc:
        removed = write is not None and remove(write)
        note = f"; removed {write}" if removed else ""
        raise GpudrvError(f"probe: cannot decide the next kernel: {exc}{note}") from None
    if write is None:
        sys.stdout.write(decision.features)
        return OK
    files.write_atomic(write, decision.features)
    change = "the running one" if decision.value is None else f"label {boot.nfd.LABEL}={decision.value}"
    print(f"next kernel {decision.release} ({change}), from {decision.source}")
    return OK


def _wait(host: HostRoot, settings: Settings, stamp: tuple[int, int] | None) -> None:
    deadline = time.monotonic() + (settings.every or 0)
    while time.monotonic() < deadline:
        time.sleep(min(POLL, max(deadline - time.monotonic(), 0)))
        if settings.trigger and host.stamp(settings.trigger) != stamp:
            return


__all__ = ["ERROR", "Settings", "once", "run"]
