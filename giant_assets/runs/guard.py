"""One writer per journal, and no batch outliving the process that started it.

``journal_lock``: an OS file lock (``fcntl.flock``) on ``<journal>.lock`` beside the journal, held for
the whole batch. A second run of the same result set waits up to ``GIANT_JOURNAL_LOCK_WAIT_S`` seconds
(default 30), logging who holds it (pid, host, since), then fails naming the holder. The OS drops the
lock when its holder dies, even by SIGKILL, so a lock is never stale; the file's text is only a label.
flock is reliable on local file systems; on NFS it is emulated with POSIX locks (best effort).

``stop_when_orphaned``: a batch notices when the process that started it is gone. ``kill -9`` of
``dagster asset materialize`` leaves its step subprocess running, reparented, still calling the paid
model. A watchdog task polls ``os.getppid()`` every half second; when the parent changes it cancels
the batch (finished runs are already in the journal) and raises ``Orphaned``. If the batch has not
stopped ``ORPHAN_GRACE_S`` seconds later (an agent stuck outside the event loop), the process exits
with status 70. ``GIANT_STOP_WHEN_ORPHANED=0`` turns the watchdog off. (PR_SET_PDEATHSIG is not used:
it fires when the parent *thread* ends, which a thread pool's worker may do while its process lives on.)
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from giant_assets.core.settings import JOURNAL_LOCK_WAIT_ENV, ORPHAN_WATCHDOG_ENV, env_flag, env_seconds

DEFAULT_LOCK_WAIT_S = 30.0
LOCK_POLL_S = 0.2
LOCK_REPORT_EVERY_S = 10.0
ORPHAN_POLL_S = 0.5
ORPHAN_GRACE_S = 15.0
ORPHAN_EXIT_STATUS = 70
_LOG = logging.getLogger(__name__)


class JournalBusy(RuntimeError):
    """Another process is writing the journal and did not finish within the wait."""


class Orphaned(RuntimeError):
    """The process that started the batch is gone; the batch stopped."""


def lock_path(journal_path: Path) -> Path:
    return journal_path.with_name(journal_path.name + ".lock")


UNLABELLED = "a process that has not labelled the lock yet"
LABEL_GRACE_S = 1.0  # a holder writes its label just after taking the lock: wait this long to name it


def describe_holder(path: Path) -> str:
    """``pid 123 on host h since 2026-...`` from a lock file's label (or why it is unknown)."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        holder = {}
    if not isinstance(holder, dict) or "pid" not in holder:
        return UNLABELLED
    return f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('since', '?')}"


@asynccontextmanager
async def journal_lock(
    journal_path: Path, *, wait_s: float | None = None, log: Callable[[str], None] = _LOG.warning
) -> AsyncIterator[Path]:
    """Hold the journal's lock for the block; wait (bounded) for another holder, then JournalBusy."""
    wait = env_seconds(JOURNAL_LOCK_WAIT_ENV, DEFAULT_LOCK_WAIT_S) if wait_s is None else wait_s
    path = lock_path(Path(journal_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        started = time.monotonic()
        deadline = started + wait
        next_report = started
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    raise JournalBusy(
                        f"journal {journal_path} is being written by {describe_holder(path)} "
                        f"(lock {path}); waited {wait:.0f}s. Let that run finish or stop it, then run again"
                    ) from None
                holder = describe_holder(path) if now >= next_report else ""
                # the holder labels the lock just after taking it: name it once it has, or after the grace
                if holder and (holder != UNLABELLED or now - started >= LABEL_GRACE_S):
                    log(
                        f"journal {journal_path} is being written by {holder}; "
                        f"waiting up to {deadline - now:.0f}s more"
                    )
                    next_report = now + LOCK_REPORT_EVERY_S
                await asyncio.sleep(LOCK_POLL_S)
        label = {"pid": os.getpid(), "host": socket.gethostname(), "since": datetime.now(UTC).isoformat()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(label).encode("utf-8"), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@asynccontextmanager
async def stop_when_orphaned(
    *,
    poll_s: float = ORPHAN_POLL_S,
    grace_s: float = ORPHAN_GRACE_S,
    enabled: bool | None = None,
    log: Callable[[str], None] = _LOG.error,
) -> AsyncIterator[None]:
    """Cancel the enclosing task and raise ``Orphaned`` when this process's parent goes away."""
    parent = os.getppid()
    if not (env_flag(ORPHAN_WATCHDOG_ENV, True) if enabled is None else enabled) or parent == 1:
        yield  # nothing to watch: already a child of init, or turned off
        return
    task = asyncio.current_task()
    assert task is not None, "stop_when_orphaned runs inside a task"
    orphaned = False

    async def watch() -> None:
        nonlocal orphaned
        while os.getppid() == parent:
            await asyncio.sleep(poll_s)
        orphaned = True
        log(
            f"parent process {parent} is gone (killed?): stopping this batch (pid {os.getpid()}); "
            "finished runs are in the journal, a rerun resumes from there"
        )
        _exit_later(grace_s)
        task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        yield
    except asyncio.CancelledError:
        if orphaned:
            task.uncancel()
            raise Orphaned(f"parent process {parent} is gone: batch stopped (pid {os.getpid()})") from None
        raise
    finally:
        watcher.cancel()


def _exit_later(grace_s: float) -> None:
    """Backstop: end the process if cancelling the batch has not ended it within ``grace_s``."""
    timer = threading.Timer(grace_s, os._exit, args=(ORPHAN_EXIT_STATUS,))
    timer.daemon = True
    timer.start()
