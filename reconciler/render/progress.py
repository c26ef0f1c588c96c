"""What a long operation shows while it runs."""

from __future__ import annotations

import sys
import time


class Progress:
    """One line per transition; on a terminal a wait updates one line in place, otherwise a wait is
    printed when it changes and every 30 s, so CI logs stay short during a long drain."""

    QUIET_SECONDS = 30.0

    def __init__(self, node: str) -> None:
        self.node = node
        self.tty = sys.stdout.isatty()
        self.waiting = False
        self.last_wait = ("", 0.0)

    def say(self, text: str) -> None:
        if self.waiting:
            print(file=sys.stdout)
            self.waiting = False
        print(f"{self.node}: {text}", flush=True)

    def wait(self, text: str) -> None:
        if self.tty:
            print(f"\r\033[K{self.node}: {text}", end="", flush=True)
            self.waiting = True
            return
        gist, now = text.split(" (", 1)[0], time.monotonic()
        if gist != self.last_wait[0] or now - self.last_wait[1] >= self.QUIET_SECONDS:
            print(f"{self.node}: {text}", flush=True)
            self.last_wait = (gist, now)
