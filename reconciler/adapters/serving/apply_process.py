"""`gpudrv apply` as a child process of the reconcile loop (`reconcile --apply`).

The very command CI runs, with its gates, in its own process: the loop keeps auditing while an apply
drains a node, and an apply that fails cannot take the loop down. It runs in a working tree of its own
at the commit in force, with `--merged-ref` that commit: the image gate reads the matrix of the
newest commit of the configured branch, the one the loop fetched, and nothing else.

Stopping it sends SIGINT: apply finishes the node step it is in, releases its node claims and exits;
whatever it leaves is resumed by the next run, as after any interruption.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("gpudrv.apply")

INTERRUPTED = 130


class ApplyProcess:
    def __init__(self, arguments: Sequence[str], cwd: Path, commit: str) -> None:
        self.commit = commit
        self.cwd = cwd
        command = [sys.executable, "-m", "reconciler", "apply", *arguments]
        log.info("apply at %s: gpudrv apply %s", commit[:12], " ".join(arguments))
        # Its output goes to ours (the pod's log), each line as apply writes it.
        self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL)

    def poll(self) -> int | None:
        return self.process.poll()

    def interrupt(self, grace: float) -> int:
        """SIGINT, then SIGKILL after `grace` seconds; the exit status."""
        if self.process.poll() is None:
            log.info("interrupting apply (pid %d)", self.process.pid)
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                log.warning("apply did not stop within %.0fs: killed (the next run resumes it)", grace)
                self.process.kill()
                self.process.wait()
        return self.process.returncode
