"""Start and stop the warm-start server (zygote.py) of a test session and the commands it starts."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.warm_start.zygote import EXIT_SUFFIX, parent_pid

WARM_START_ENV = "TESTS_WARM_START"  # the server's socket; "0": every command cold
WARM_CODE_ENV = "TESTS_WARM_START_CODE"  # "1": ``python -c CODE`` runs warm too (warm_code below)


def warm_code(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with ``python -c CODE`` commands run warm: a test's own -c
    code stays cold unless its test asks, as it may probe what a fresh interpreter has (imported
    modules, frozen objects) or kill its starting process and expect it gone at once."""
    return {**(os.environ if env is None else env), WARM_CODE_ENV: "1"}


HERE = Path(__file__).resolve().parent
SITE = HERE / "warm_site"  # its sitecustomize hands a command over


class ServerExited(RuntimeError):
    """The server exited (``returncode`` zygote.UNSUPPORTED: this system lacks what it needs)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"the warm-start server exited ({returncode})")
        self.returncode = returncode


def inherited_environment() -> dict[str, str]:
    """The environment this process's children inherit: the C library's, which can hold more than
    ``os.environ`` (GNU readline, which pytest imports, sets LINES and COLUMNS there, so xdist's workers
    start with them)."""
    try:
        entries = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
    except (OSError, ValueError):  # a C library without an exported ``environ``: os.environ is the best guess
        return dict(os.environ)
    environ: dict[str, str] = {}
    index = 0
    while (entry := entries[index]) is not None:
        key, _, value = os.fsdecode(entry).partition("=")
        environ[key] = value
        index += 1
    return environ


class WarmStart:
    """A server started in the background (it listens after ~3 s; commands started before run cold).
    ``env``: the variables that send a process's commands to it (the socket, and PYTHONPATH with
    ``warm_site`` first). One per test session: xdist's workers inherit them from the controller that
    started it and share it (``attached``)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="giant-warm-")
        self.socket = os.path.join(self.folder, "socket")
        own = {k: v for k, v in environ.items() if k not in (WARM_START_ENV, "PYTHONWARNINGS")}
        self.process: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, str(HERE / "zygote.py"), self.socket],
            env=own,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        path = os.pathsep.join(p for p in (str(SITE), environ.get("PYTHONPATH", "")) if p)
        self.env = {WARM_START_ENV: self.socket, "PYTHONPATH": path}

    @classmethod
    def attached(cls, socket: str) -> WarmStart:
        """The server another process started (an xdist worker's view of its controller's): waited
        for here, stopped by its starter."""
        server = cls.__new__(cls)
        server.folder, server.socket, server.process, server.env = os.path.dirname(socket), socket, None, {}
        return server

    def exit_status(self) -> int | None:
        """The server's exit status once it has exited (None while it runs)."""
        if self.process is not None:
            return self.process.poll()
        try:  # not our child: the status the server wrote as it exited (zygote.py)
            return int(Path(self.socket + EXIT_SUFFIX).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def wait_listening(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self.socket):
            status = self.exit_status()
            if status is not None:
                raise ServerExited(status)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the warm-start server did not listen within {timeout_s:.0f}s")
            time.sleep(0.05)

    def stop(self) -> None:
        """End the server, the waiters it forked and the commands still running (each its own process
        group: killing the waiters alone left them orphaned, e.g. a code server whose daemon a test
        had stopped, waiting for a run forever); only the process that started it does."""
        if self.process is None:
            return
        kill_groups_below(self.process.pid)
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def kill_groups_below(root: int) -> None:
    """SIGKILL every process descended from ``root`` and the process group of each (never this
    process's own group)."""
    own = os.getpgrp()
    for pid in _descendants(root):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != own:
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)


def _descendants(root: int) -> list[int]:
    """The processes below ``root``, from each process's parent in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = parent_pid(int(entry))
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found
