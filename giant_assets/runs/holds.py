"""Reservations of runs in flight, seen by every process that runs a partition of one result set.

An experiment budget caps every partition of a result set, and its cells may run in different processes
at the same time (a backfill, several run workers). What they have *paid* is in their reply stores and
journals (``ledger.py``); what they have *reserved* for the runs they have started and not finished is
here: each batch keeps one hold file ``<result set>/holds/<benchmark>.<pid>.<token>.hold`` for as long as
it runs, ``flock``-ed by it, holding the USD it reserves. A process killed releases its lock, and its
file then counts for nothing (the next reader removes it). Every creation, read and write of the hold
files, and a batch's decision to start a run together with recording its reservation, happen under one
lock (``holds/.lock``): two processes cannot both take the last room under the cap, and no reader finds
a hold file between its creation and its ``flock`` (and removes it as a dead process's).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

FOLDER = "holds"
SUFFIX = ".hold"


class HoldBoard:
    """This process's hold file in the result set ``folder`` (``journals/<config_hash>/``), and the
    holds of the other live processes."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = Path(folder) / FOLDER
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{name}.{os.getpid()}.{secrets.token_hex(4)}{SUFFIX}"
        self._lock_file = open(self.folder / ".lock", "a")  # noqa: SIM115
        self._depth = 0
        with self.locked():  # created and locked at once: no reader sees it unlocked (and removes it)
            self._file = open(self.path, "w+")  # noqa: SIM115 - open for the batch's lifetime, locked
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Every hold file as it stands, no other process reading or writing one (re-entrant)."""
        if self._depth == 0:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def others(self) -> tuple[float, int]:
        """USD held by the other live processes of the result set, and how many hold something."""
        total, holders = 0.0, 0
        with self.locked():
            for path in self.folder.glob(f"*{SUFFIX}"):
                if path == self.path:
                    continue
                usd = _live_hold(path)
                if usd > 0:
                    total, holders = total + usd, holders + 1
        return total, holders

    def hold(self, usd: float) -> None:
        """Record what this process now reserves for its runs in flight."""
        with self.locked():
            self._file.seek(0)
            self._file.truncate()
            self._file.write(repr(max(0.0, float(usd))))
            self._file.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._file.close()
        self._lock_file.close()


def _live_hold(path: Path) -> float:
    """The USD a hold file holds if its process still runs; a file nobody locks is removed, and is 0."""
    try:
        fh = open(path)  # noqa: SIM115
    except OSError:
        return 0.0
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # its process holds it: alive
            try:
                return max(0.0, float(fh.read() or 0.0))
            except ValueError:
                return 0.0
        with contextlib.suppress(OSError):  # nobody holds it: its process ended without closing it
            path.unlink()
        return 0.0
