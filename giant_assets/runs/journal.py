"""An append-only JSONL journal of finished (item, run) results: the resume point of a batch.

Every finished run is appended and fsynced as it finishes, so a crash, kill or Ctrl-C loses at most
the run in flight. A torn last line (killed mid-write) is ignored on reading, as is any line that is not
a JSON object holding the key fields (counted in ``skipped_lines``). The latest row per key wins, so a
retried run replaces its earlier failure without duplicating it. One process writes a journal at a
time: ``run_batch`` holds its lock (runs/guard.py).

A row's key includes its ``item_fingerprint`` (multipathqa/fingerprint.py): an answer belongs to one
question about one slide. Rows journalled before fingerprints existed have ``None`` there (legacy rows;
runs/plan.py decides whether they still match their item).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RUN_FIELDS = ("config_hash", "benchmark_name", "benchmark_id", "run_index")
FINGERPRINT_FIELD = "item_fingerprint"


def row_key(row: dict[str, Any]) -> tuple:
    """(result set, benchmark, id, run, item fingerprint); the fingerprint is None in a legacy row."""
    return (*(row[k] for k in RUN_FIELDS), row.get(FINGERPRINT_FIELD))


class Journal:
    """Results of one (config hash, benchmark) batch, persisted line by line."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.skipped_lines = 0

    def read(self) -> dict[tuple, dict[str, Any]]:
        """Latest row per key; torn, non-UTF-8 or non-row lines are skipped (``skipped_lines``)."""
        latest: dict[tuple, dict[str, Any]] = {}
        self.skipped_lines = 0
        if not self.path.exists():
            return latest
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                    latest[row_key(row)] = row
                except (ValueError, RecursionError, TypeError, KeyError):
                    self.skipped_lines += bool(line.strip())
        return latest

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            if fh.tell() and not self._ends_with_newline():
                fh.write("\n")  # seal a torn line left by a killed writer
            for row in rows:
                fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"
