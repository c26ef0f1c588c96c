"""Headless Chromium (Debian's package) driven over the DevTools protocol on a pipe: no library, no port.

`--remote-debugging-pipe` makes Chromium read protocol messages on fd 3 and write its answers and
events on fd 4, each a JSON text ended by a NUL byte. That is all this needs: open a page, wait for it
to load, evaluate JavaScript in it, take a screenshot, and collect what a person with DevTools open
would see in the console (console API calls, log entries such as CSP violations or failed loads,
uncaught exceptions) and every request the page made.

Also a script: `python -m tests.browser.chromium PAGE.html SHOT.png [WIDTH HEIGHT]` takes the README's
screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "chromium-headless-shell")
CONSOLE_EVENTS = ("Runtime.consoleAPICalled", "Log.entryAdded", "Runtime.exceptionThrown")


def executable() -> str | None:
    for name in NAMES:
        if found := shutil.which(name):
            return found
    return None


class Unavailable(RuntimeError):
    """No Chromium, and it could not be installed: the reason."""


def install() -> str:
    """Chromium's path; Debian's package is installed first when it is missing (as root, apt-get)."""
    if found := executable():
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("chromium is missing, and apt-get cannot install it here (not root, or no apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"])
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True, env=env, timeout=900, check=False)
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-5:])
            raise Unavailable(f"{' '.join(step)} failed (exit {result.returncode}):\n{tail}")
    if found := executable():
        return found
    raise Unavailable("apt-get installed chromium, but no chromium executable is on PATH")


class ProtocolError(RuntimeError):
    pass


@dataclass
class Browser:
    """One headless Chromium with one page (a target attached in flat mode)."""

    process: subprocess.Popen[bytes]
    to_browser: int
    from_browser: int
    profile: Path
    session: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    _buffer: bytes = b""
    _next_id: int = 0

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline, method)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise ProtocolError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, event: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = next((item for item in self.events if item.get("method") == event), None)
            if found is not None:
                return found
            self.events.append(self._receive(deadline, event))

    def _receive(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise ProtocolError(f"no answer from Chromium in time ({waiting_for})")
            os.set_blocking(self.from_browser, False)
            try:
                chunk = os.read(self.from_browser, 1 << 20)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            if not chunk:
                raise ProtocolError(f"Chromium closed the pipe (exit {self.process.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    # --- what a test asks for ------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Navigate the page and wait for its load event."""
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise ProtocolError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        path.write_bytes(data)
        return data

    def clip(self, x: float, y: float, width: float, height: float) -> bytes:
        """A PNG of one rectangle of the page, in CSS pixels."""
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png", "clip": clip})["data"])

    def console(self) -> list[str]:
        """Everything the console shows: messages, log entries, uncaught exceptions."""
        return [_describe(event) for event in self.events if event.get("method") in CONSOLE_EVENTS]

    def requests(self) -> list[str]:
        return [
            event["params"]["request"]["url"]
            for event in self.events
            if event.get("method") == "Network.requestWillBeSent"
        ]


def _describe(event: dict[str, Any]) -> str:
    params = event["params"]
    if event["method"] == "Log.entryAdded":
        entry = params["entry"]
        return f"{entry['level']} ({entry['source']}): {entry['text']}"
    if event["method"] == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return f"exception: {details.get('exception', {}).get('description') or details.get('text')}"
    texts = [str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])]
    return f"console.{params['type']}: {' '.join(texts)}"


@contextlib.contextmanager
def launch(width: int = 1400, height: int = 1000) -> Iterator[Browser]:
    """Chromium with a window of width x height CSS pixels and one page attached, console and network
    recorded from the start."""
    binary = executable()
    if binary is None:
        raise ProtocolError("chromium is not installed (apt-get install chromium)")
    profile = Path(tempfile.mkdtemp(prefix="gpudrv-chromium-"))
    # Chromium reads fd 3 and writes fd 4. Its ends are first moved to fds >= 10, so that putting them
    # at 3 and 4 in the child cannot overwrite one with the other.
    browser_reads, we_write = _high(os.pipe())
    we_read, browser_writes = _high(os.pipe())
    command = [
        binary,
        "--headless",
        "--no-sandbox",  # as root (CI) Chromium refuses to start with its sandbox
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "about:blank",
    ]

    def child_fds() -> None:
        os.dup2(browser_reads, 3)  # dup2 leaves the copies inheritable
        os.dup2(browser_writes, 4)

    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=False,  # Python's own fds are not inheritable anyway; 3 and 4 must survive the exec
        preexec_fn=child_fds,  # noqa: PLW1509
    )
    os.close(browser_reads)
    os.close(browser_writes)
    browser = Browser(process, we_write, we_read, profile)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        browser.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics)
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable")
        yield browser
    finally:
        with contextlib.suppress(ProtocolError, OSError):
            browser.send("Browser.close", timeout=10)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(we_write)
        os.close(we_read)
        shutil.rmtree(profile, ignore_errors=True)


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """Both fds moved to numbers >= 10 (non-inheritable, as os.pipe makes them)."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved[0], moved[1]


def main(argv: list[str]) -> int:
    page, shot = Path(argv[0]).resolve(), Path(argv[1])
    width, height = (int(argv[2]), int(argv[3])) if len(argv) > 3 else (1400, 1000)
    with launch(width, height) as browser:
        browser.open(page.as_uri())
        browser.screenshot(shot)
        for line in browser.console():
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
