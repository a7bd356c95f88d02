"""Every paid model reply of a result set, kept durably before the agent uses it: replay and ledger.

``ReplyStore`` is an append-only JSONL file beside a partition's journal
(``journals/<config_hash>/<benchmark>.replies.jsonl``). A provider (``agents/providers/base.py``) asks
the current run's ``RunReplies`` (``current()``) for a stored reply before it sends a request, and
records every reply it was sent (appended and fsynced) before it returns it to the agent, with its
tokens and cost. A line is keyed by the run (``run_identity.RunIdentity.key``: result set, item, run),
the SHA-256 of the request body, and the occurrence of that body within the run (the n-th time the run
sent it), never by the request alone: the runs of one item send byte-identical first requests and
must stay independent samples.

So a run that did not finish (killed, timed out, failed) replays its identical requests from the store
at no cost when it runs again, and pays only for requests that never got a reply; and the store is the
ledger of what the provider billed, finished runs or not (``ledger.py``). A torn last line (killed
mid-write) and lines that are not entries are skipped on reading. A failed write (disk full) does not
drop the reply the agent is waiting for: the store notes the failure (``broken``), and the runner then
starts no new run and fails naming the file.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from giant_assets.runs.run_identity import RunIdentity

SUFFIX = ".replies.jsonl"


def replies_path(journal_path: Path) -> Path:
    """The reply store of the partition whose journal is ``journal_path`` (``<benchmark>.jsonl``)."""
    journal_path = Path(journal_path)
    return journal_path.with_name(journal_path.name.removesuffix(".jsonl") + SUFFIX)


def request_digest(body: Any) -> str:
    """SHA-256 of a request body's canonical JSON (keys sorted, no spaces)."""
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=json_data)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def json_data(value: Any) -> Any:
    """A body's SDK object (Gemini's config and contents are pydantic models) as its JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else str(value)


class StoreWriteFailed(RuntimeError):
    """A journal or reply-store write failed: no new run may start (what it paid would not be kept)."""


class ReplyStore:
    """The stored replies of one partition, read once and appended to as replies arrive.

    ``replay_runs``: the run keys whose replies may be replayed (the runs about to execute); the replies
    of other runs are read for their cost only, not held in memory. None: every run's."""

    def __init__(self, path: Path, replay_runs: set[str] | None = None) -> None:
        self.path = Path(path)
        self._replay_runs = replay_runs
        self.skipped_lines = 0
        self.broken: str | None = None  # the first failed write, as a message naming the file
        self._entries: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.total_usd = 0.0  # every reply stored, earlier processes' and this one's
        self._lock = threading.Lock()
        self._read()

    def _read(self) -> None:
        if not self.path.is_file():  # absent (nothing stored yet), or a device a test fills the disk with
            return
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                    self._index(entry)
                except (ValueError, RecursionError, TypeError, KeyError):
                    self.skipped_lines += bool(line.strip())

    def _index(self, entry: dict[str, Any]) -> None:
        key = (str(entry["run"]), str(entry["digest"]), int(entry["n"]))
        if key in self._entries:  # a reply is recorded once; a duplicate line is never paid twice
            return
        cost = float(entry.get("cost_usd") or 0.0)
        if self._replay_runs is not None and key[0] not in self._replay_runs:
            entry = {k: v for k, v in entry.items() if k != "response"}  # a finished run's: cost only
        self._entries[key] = entry
        self.total_usd += cost

    def get(self, run: str, digest: str, n: int) -> dict[str, Any] | None:
        entry = self._entries.get((run, digest, n))
        return entry if entry is not None and "response" in entry else None

    def put(self, entry: dict[str, Any]) -> None:
        """Append one reply and fsync it; a failed write marks the store ``broken`` (never raises)."""
        entry = {**entry, "at": datetime.now(UTC).isoformat()}
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as fh:
                    if fh.tell() and not _ends_with_newline(self.path):
                        fh.write("\n")  # seal a torn line left by a killed writer
                    fh.write(json.dumps(entry, default=str) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:
                self.broken = self.broken or f"cannot write the reply store {self.path}: {exc}"
            self._index(entry)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


@dataclass
class RunReplies:
    """The replies of the run the current task executes: what it may replay, what it paid now."""

    store: ReplyStore
    identity: RunIdentity
    paid_usd: float = 0.0  # replies of this execution that were paid (not replayed)
    recorded: int = 0  # replies paid and stored by this execution
    replayed: int = 0  # replies replayed from the store
    _seen: dict[str, int] = field(default_factory=dict)

    def occurrence(self, digest: str) -> int:
        """How many times this execution sent ``digest`` before (0 for the first)."""
        n = self._seen.get(digest, 0)
        self._seen[digest] = n + 1
        return n

    def lookup(self, digest: str, n: int) -> dict[str, Any] | None:
        entry = self.store.get(self.identity.key, digest, n)
        self.replayed += entry is not None
        return entry

    def record(self, digest: str, n: int, response: dict[str, Any], **accounting: Any) -> None:
        self.paid_usd += float(accounting.get("cost_usd") or 0.0)
        self.recorded += 1
        self.store.put(
            {"run": self.identity.key, "digest": digest, "n": n, "benchmark_id": self.identity.benchmark_id,
             "run_index": self.identity.run_index, **accounting, "response": response}
        )  # fmt: skip


_CURRENT: contextvars.ContextVar[RunReplies | None] = contextvars.ContextVar("giant_replies", default=None)


def current() -> RunReplies | None:
    """The current run's replies, or None outside a run with a store (``giant-run`` on one item)."""
    return _CURRENT.get()


@contextlib.contextmanager
def recording(replies: RunReplies | None) -> Iterator[RunReplies | None]:
    """Model calls of the current task (and tasks it starts) replay from and record into ``replies``."""
    token = _CURRENT.set(replies)
    try:
        yield replies
    finally:
        _CURRENT.reset(token)
