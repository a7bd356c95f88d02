"""The durable store of one result set's batches: records of batches, answers and intents."""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from pathlib import Path
from typing import Any

ENDED = "ended"
KINDS = frozenset({"succeeded", "errored", "expired", "canceled"})  # an answer's kind
LATEST_S = 1e11  # a time field past this (year 5138) is not a unix time


class BatchStore:
    """One result set's batches on one benchmark: ``batches.jsonl`` (each batch and its status),
    ``answers.jsonl`` (each line's outcome) and ``intents.jsonl`` (each batch about to be submitted:
    its round tag and custom ids, then how a search for it was resolved), all append-only; the latest
    record per key wins, except that a succeeded answer is never replaced. A folder written before
    intents existed simply has none. A line that is not a record of its file (not JSON, a field
    missing or of the wrong type: edited by hand, or a disk error) is left out and named in
    ``problems`` (file and line number); every good line is still read."""

    def __init__(self, folder: Path, partition: dict[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self.partition = partition or {}  # experiment and benchmark, for the sensor
        self.batches: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self._open_by_cid: dict[str, str] = {}
        self.submissions: dict[str, int] = {}
        self.intents: dict[str, dict[str, Any]] = {}  # round tag -> intent, merged with its resolution
        self._lock_fd: int | None = None
        self.problems: list[str] = []  # "<file> line <n>: <why>", each line left out
        self._load()

    def reload(self) -> None:
        """Read the store again from disk (another process may have written it since)."""
        self.batches, self.answers, self._open_by_cid, self.submissions, self.intents = {}, {}, {}, {}, {}
        self.problems = []
        self._load()

    def try_lock(self) -> bool:
        """Take the store's OS file lock (``store.lock``: one submitter per store) without waiting;
        True when held. The OS drops it when the process dies, even by SIGKILL."""
        if self._lock_fd is not None:
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "store.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _read(self, name: str) -> list[dict[str, Any]]:
        """The file's records that pass its check; every other line named in ``problems``."""
        path = self.folder / name
        if not path.exists():
            return []
        check = CHECKS[name]
        rows = []
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):  # a torn line of a killed writer, or worse
                    self.problems.append(f"{path} line {n}: not JSON (left out)")
                    continue
                why = check(row) if isinstance(row, dict) else "not a JSON object"
                if why:
                    self.problems.append(f"{path} line {n}: {why} (left out)")
                else:
                    rows.append(row)
        return rows

    def _load(self) -> None:
        for row in self._read("batches.jsonl"):
            self._index_batch(row)
        for row in self._read("answers.jsonl"):
            self._keep_answer(row)
        for row in self._read("intents.jsonl"):
            self.intents[row["round_tag"]] = self.intents.get(row["round_tag"], {}) | row

    def _index_batch(self, row: dict[str, Any]) -> None:
        """A batch's records merge, the later's fields winning, but an ended batch stays ended: a record
        written from an older reading (the sensor remembering a look beside the cell's run) reopens
        nothing."""
        old = self.batches.get(row["batch_id"])
        first = old is None
        if old is not None:
            row = old | row | ({"status": ENDED} if old.get("status") == ENDED else {})
        self.batches[row["batch_id"]] = row
        for cid in row.get("custom_ids", []):
            if first:
                self.submissions[cid] = self.submissions.get(cid, 0) + 1
            if row.get("status") == ENDED:
                self._open_by_cid.pop(cid, None)
            else:
                self._open_by_cid[cid] = row["batch_id"]

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Append ``rows``, fsynced; after a torn last line (a writer killed mid-line) on a new line, so
        the torn line stays the only one lost."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / name
        torn = False
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        with open(path, "a", encoding="utf-8") as fh:
            if torn:
                fh.write("\n")
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def record_batch(self, row: dict[str, Any]) -> None:
        row = self.partition | row
        self._append("batches.jsonl", [row])
        self._index_batch(row)

    def remember_end(self, batch_id: str, seen: dict[str, Any]) -> None:
        """A look showed the batch ended (``BatchStatus.seen()``: its status word, counts and where its
        results are): kept, once, so that a later look showing it running again changes nothing."""
        record = self.batches.get(batch_id)
        if record is not None and "seen_ended" not in record and record.get("status") != ENDED:
            self.record_batch(record | {"seen_ended": seen | {"at": time.time()}})

    def note_contradiction(self, batch_id: str, shown: str) -> bool:
        """A look shows ``shown`` (running) for a batch seen ended before: kept the first time (True),
        for ``giant-experiments status``."""
        record = self.batches.get(batch_id)
        if record is None or "contradicted" in record or record.get("status") == ENDED:
            return False
        self.record_batch(record | {"contradicted": {"status": shown, "at": time.time()}})
        return True

    def _keep_answer(self, row: dict[str, Any]) -> bool:
        """Index ``row`` unless it would replace a succeeded answer (a paid answer is never dropped for
        a later error of the same line); True when kept."""
        if not _replaces(self.answers.get(row["custom_id"]), row):
            return False
        self.answers[row["custom_id"]] = row
        return True

    def record_answers(self, rows: list[dict[str, Any]]) -> None:
        """Store result rows, then hold them as answered (rows that could not be written are not held);
        one that would replace a succeeded answer is left out."""
        kept: dict[str, dict[str, Any]] = {}
        for row in rows:
            cid = row["custom_id"]
            if _replaces(kept.get(cid, self.answers.get(cid)), row):
                kept[cid] = row
        if kept:
            self._append("answers.jsonl", list(kept.values()))
            self.answers.update(kept)

    def record_intent(self, tag: str, custom_ids: list[str]) -> None:
        """Before a batch is submitted: what it holds, so a batch whose id is lost can be found."""
        self._append_intent(self.partition | {"round_tag": tag, "custom_ids": custom_ids, "at": time.time()})

    def resolve_intent(self, tag: str, how: str, **details: Any) -> None:
        """The search for an intent's batch is over with none adopted (``not_found``, ``ambiguous``);
        an adopted batch's record resolves its intent by its round tag."""
        self._append_intent({"round_tag": tag, "resolved": how, "resolved_at": time.time()} | details)

    def _append_intent(self, row: dict[str, Any]) -> None:
        self._append("intents.jsonl", [row])
        self.intents[row["round_tag"]] = self.intents.get(row["round_tag"], {}) | row

    def unresolved_intents(self) -> list[dict[str, Any]]:
        """Intents with no batch recorded for their round tag and no search resolved, oldest first."""
        recorded = {b.get("round_tag") for b in self.batches.values()}
        rows = [
            i
            for tag, i in self.intents.items()
            if tag not in recorded and "resolved" not in i and "custom_ids" in i
        ]
        return sorted(rows, key=lambda i: i["at"])

    def open_batch(self, cid: str) -> str | None:
        return self._open_by_cid.get(cid)

    def open_batches(self) -> list[dict[str, Any]]:
        return [b for b in self.batches.values() if b.get("status") != ENDED]


def _replaces(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether ``new`` may stand for its line instead of ``old``: anything but an error after a success."""
    return old is None or old["kind"] != "succeeded" or new["kind"] == "succeeded"


def _text(row: dict[str, Any], key: str, required: bool = False) -> str | None:
    """Why ``row[key]`` is not a non-empty string (absent: only when ``required``); None when it is."""
    if key not in row:
        return f"no {key}" if required else None
    value = row[key]
    return None if isinstance(value, str) and value else f"{key} is not a non-empty string"


def _time(row: dict[str, Any], key: str, required: bool = False) -> str | None:
    """Why ``row[key]`` is not a unix time (a finite number in range)."""
    if key not in row:
        return f"no {key}" if required else None
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key} is not a number"
    return None if math.isfinite(value) and 0 <= value <= LATEST_S else f"{key} {value!r} is not a unix time"


def _ids(row: dict[str, Any], required: bool = False) -> str | None:
    """Why ``row["custom_ids"]`` is not a list of custom ids."""
    if "custom_ids" not in row:
        return "no custom_ids" if required else None
    ids = row["custom_ids"]
    ok = isinstance(ids, list) and all(isinstance(c, str) and c for c in ids)
    return None if ok else "custom_ids is not a list of strings"


def _first(*whys: str | None) -> str | None:
    return next((why for why in whys if why), None)


def _look_why(row: dict[str, Any], key: str) -> str | None:
    """Why ``row[key]`` (a remembered look: ``seen_ended``, ``contradicted``) is not one."""
    look = row.get(key)
    if key not in row:
        return None
    if not isinstance(look, dict):
        return f"{key} is not an object"
    bad = _text(look, "status", True) or _time(look, "at", True)
    handle, counts = look.get("handle", {}), look.get("counts", {})
    if not bad and not (isinstance(handle, dict) and all(isinstance(v, str) for v in handle.values())):
        bad = "handle is not an object of strings"
    if not bad and not isinstance(counts, dict):
        bad = "counts is not an object"
    return f"{key}: {bad}" if bad else None


def _batch_why(row: dict[str, Any]) -> str | None:
    return _first(_text(row, "batch_id", True), _ids(row), _text(row, "status"), _text(row, "round_tag"),
                  _time(row, "submitted_at"), _look_why(row, "seen_ended"),
                  _look_why(row, "contradicted"))  # fmt: skip


def _answer_why(row: dict[str, Any]) -> str | None:
    why = _text(row, "custom_id", True)
    if why or row.get("kind") not in KINDS:
        return why or f"kind is not one of {', '.join(sorted(KINDS))}"
    if row["kind"] == "succeeded" and not isinstance(row.get("body"), dict):
        return "a succeeded answer without a body object"
    status = row.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 100 <= status < 600
    ):
        return "status is not an HTTP status"
    return None


def _intent_why(row: dict[str, Any]) -> str | None:
    announced = "custom_ids" in row or "at" in row  # an intent; else the resolution of one
    return _first(_text(row, "round_tag", True), _ids(row, announced), _time(row, "at", announced),
                  None if announced else _text(row, "resolved", True))  # fmt: skip


CHECKS = {"batches.jsonl": _batch_why, "answers.jsonl": _answer_why, "intents.jsonl": _intent_why}
