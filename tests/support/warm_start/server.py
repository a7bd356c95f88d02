"""Start and stop the warm-start server (zygote.py) of a test process and the commands it starts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

WARM_START_ENV = "TESTS_WARM_START"  # the server's socket; "0": every command cold
HERE = Path(__file__).resolve().parent
SITE = HERE / "warm_site"  # its sitecustomize hands a command over


class ServerExited(RuntimeError):
    """The server exited (``returncode`` zygote.UNSUPPORTED: this system lacks what it needs)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"the warm-start server exited ({returncode})")
        self.returncode = returncode


class WarmStart:
    """A server started in the background (it listens after ~3 s; commands started before run cold).
    ``env``: the variables that send a process's commands to it (the socket, and PYTHONPATH with
    ``warm_site`` first)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="giant-warm-")
        self.socket = os.path.join(self.folder, "socket")
        own = {k: v for k, v in environ.items() if k not in (WARM_START_ENV, "PYTHONWARNINGS")}
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "zygote.py"), self.socket],
            env=own,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        path = os.pathsep.join(p for p in (str(SITE), environ.get("PYTHONPATH", "")) if p)
        self.env = {WARM_START_ENV: self.socket, "PYTHONPATH": path}

    def wait_listening(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self.socket):
            if self.process.poll() is not None:
                raise ServerExited(self.process.returncode)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the warm-start server did not listen within {timeout_s:.0f}s")
            time.sleep(0.05)

    def stop(self) -> None:
        """End the server and the waiters it forked (commands still running are their own groups)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
