"""Run one judge process with bounded waits, and kill everything it left behind.

A judge runs in a new session. Its stdin is written and its stdout/stderr are read by one loop over
non-blocking pipes (``selectors``), so no read or join can block past the deadline. On a timeout, an
oversized output, or when the judge has exited but something still holds its pipes open for more than
``EXIT_GRACE_S``, the judge's process group and session are killed, and so is every other process
(of this user, except this one and its direct children) still holding one of the judge's pipes: that
catches a grandchild that escaped into a new session with ``setsid``.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

EXIT_GRACE_S = 0.5
_CHUNK = 65536
_POLL_S = 0.05


@dataclass
class ProcessOutcome:
    """What happened: return code (None if it never finished), stdout, stderr tail and why it stopped."""

    returncode: int | None
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool
    output_over_cap: bool
    duration_s: float


def _pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, session, ..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def leftover_pids(session: int, pipe_inodes: set[int]) -> list[int]:
    """Processes in the judge's session or holding one of its pipes (never this process).

    Parentage is not a criterion: an escaped grandchild is re-parented when the judge dies, possibly to
    this process when it is a child subreaper; other judges' processes hold neither the session nor
    these pipes (pipes are not inherited across ``Popen``), so they are never matched.
    """
    me, found = os.getpid(), []
    targets = {f"pipe:[{inode}]" for inode in pipe_inodes}
    for pid in _pids():
        fields = _stat_fields(pid)
        if pid == me or fields is None:
            continue
        if int(fields[3]) == session:
            found.append(pid)
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in targets:
                        found.append(pid)
                        break
    return found


def kill_all(proc: subprocess.Popen, pipe_inodes: set[int]) -> None:
    """SIGKILL the judge's process group, its session and any holder of its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in leftover_pids(proc.pid, pipe_inodes):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_process(argv: list[str], data: bytes, timeout_s: float, max_output_bytes: int) -> ProcessOutcome:
    """Run ``argv`` with ``data`` on stdin; never waits past ``timeout_s`` (plus a kill and a reap)."""
    start = time.monotonic()
    deadline = start + timeout_s
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    in_fd, out_fd, err_fd = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
    streams = {in_fd: proc.stdin, out_fd: proc.stdout, err_fd: proc.stderr}
    inodes = {os.fstat(fd).st_ino for fd in streams}
    for fd in streams:
        os.set_blocking(fd, False)
    out, err_tail = bytearray(), collections.deque(maxlen=64)
    offset, timed_out, over, exited_at = 0, False, False, None
    sel = selectors.DefaultSelector()
    sel.register(out_fd, selectors.EVENT_READ)
    sel.register(err_fd, selectors.EVENT_READ)
    if data:
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()

    def done(fd: int) -> None:
        sel.unregister(fd)
        streams[fd].close()

    try:
        while sel.get_map() and not over:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if proc.poll() is not None:
                exited_at = exited_at or now
                if now - exited_at > EXIT_GRACE_S:
                    break  # the judge is gone; something it started still holds a pipe
            for key, _ in sel.select(timeout=min(_POLL_S, deadline - now)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        offset += os.write(fd, data[offset : offset + _CHUNK])
                    except (BrokenPipeError, OSError):
                        offset = len(data)  # the judge closed stdin without reading everything
                    if offset >= len(data):
                        done(fd)
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    done(fd)
                elif fd == out_fd:
                    out.extend(chunk)
                    over = len(out) > max_output_bytes
                else:
                    err_tail.append(chunk)
        if not timed_out and not over and proc.poll() is None:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        pipes_open = any(fd != in_fd for fd in sel.get_map())
        kill_all(proc, inodes if pipes_open else set())  # sweeps the session; pipes only if still held
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        for fd in list(sel.get_map()):
            done(fd)
        sel.close()
    return ProcessOutcome(
        returncode=proc.returncode if not timed_out and not over else None,
        stdout=bytes(out),
        stderr_tail=b"".join(err_tail),
        timed_out=timed_out,
        output_over_cap=over,
        duration_s=time.monotonic() - start,
    )
