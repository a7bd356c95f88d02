"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no
websocket, no Python package, no network. Enough of CDP to load a page, run JavaScript in it and
collect console errors, exceptions and failed loads.

Chromium reads NUL-terminated JSON commands on its fd 3 and writes replies and events on its fd 4.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

REQUIRE_ENV = "GIANT_REQUIRE_BROWSER"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--allow-file-access-from-files",
    "--remote-debugging-pipe",
)


def chromium_path() -> str:
    """The Chromium executable; skips the test (or fails it under GIANT_REQUIRE_BROWSER=1) if absent."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    message = (
        "headless Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install chromium`) "
        "to run the browser tests of the trajectory viewer"
    )
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)")
    pytest.skip(message)


def require_openseadragon() -> None:
    """Skip the test (or fail it under GIANT_REQUIRE_BROWSER=1, as in CI) when OpenSeadragon is not
    installed where the servers serve it (``make`` installs it: npm ci in frontend/)."""
    from giant_assets.report.vendor import HINT, deep_zoom_available

    if deep_zoom_available():
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{HINT} ({REQUIRE_ENV}=1)")
    pytest.skip(HINT)


class BrowserError(RuntimeError):
    pass


PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """Become the subreaper of our descendants, so Chromium's helper processes that outlive the browser
    process come back to us to be reaped (a container's PID 1 may never reap them)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_chromium_orphans(deadline_s: float = 5.0) -> None:
    """Wait for our child processes named chromium (the adopted helpers) to exit, and reap them."""
    me = str(os.getpid())
    end = time.monotonic() + deadline_s
    while True:
        left = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)
                comm, rest = fields[0].split("(", 1)[1], fields[1].split()
            except (OSError, IndexError):
                continue
            if rest[1] == me and comm.startswith("chrom"):
                pid = int(stat.parent.name)
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if not done:
                    left.append(pid)
        if not left or time.monotonic() > end:
            return
        time.sleep(0.05)


class Browser:
    """One headless Chromium process with one page; a context manager."""

    def __init__(self, executable: str, timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        _adopt_orphans()
        self._profile = tempfile.mkdtemp(prefix="giant-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # in the child: our pipe ends become its fds 3 and 4
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire_fds,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(BrowserError, OSError):
                self.send("Browser.close", session=False)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        _reap_chromium_orphans()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    # ---- protocol

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 16)
                if not chunk:
                    raise BrowserError(f"Chromium closed its pipe (exit code {self.process.poll()})")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send a command and wait for its reply; events that arrive meanwhile go to ``events``."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first event named ``method`` at or after ``events[since]`` (waiting for it if needed)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            for event in self.events[since:]:
                if event.get("method") == method:
                    return event
            self.events.append(self._read_message(deadline))

    # ---- page

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        since = len(self.events)
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self.wait_for("Page.loadEventFired", since)

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (promises awaited) and return its JSON value."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, width: int = 1200, height: int = 900) -> bytes:
        """A PNG of the page at ``width`` x ``height`` CSS pixels (device scale 1)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        import base64

        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                found.append(f"load failed: {params.get('errorText')}")
        return found


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
