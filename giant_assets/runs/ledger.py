"""What a partition (and a whole experiment) has paid so far, read from its files as they grow.

A partition's spend is every reply in its reply store (``replies.py``: finished runs or not, failed,
retried or killed ones included) plus the cost of each journalled run whose replies are not in the
store (runs journalled before the store existed, and batch mode, whose replies are kept by the provider
batch store). A journal line is covered by the store when its run has a reply stored before the line
was written. A journal line is one execution (its run, start and end): the same line written again,
or a legacy line rewritten with its item fingerprint (``plan.py`` adopts it), is paid once. Each file is
read incrementally (only the bytes appended since the last look), so the runner can ask before every
run it starts, and cells of one experiment running at the same time see what the others paid.

A reply or run of a model without a price has cost ``NaN`` (``agents/pricing.py``): it is not added as
0 but counted in ``unpriced``, and ``billed()`` is then NaN (unknown), never a total that leaves it out.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from giant_assets.runs.replies import SUFFIX, replies_path
from giant_assets.runs.run_identity import RunIdentity


def row_identity(row: dict[str, Any]) -> RunIdentity:
    """The run a journal row (or a planned run's base) belongs to."""
    return RunIdentity(
        config_hash=str(row["config_hash"]),
        benchmark_name=str(row["benchmark_name"]),
        benchmark_id=str(row["benchmark_id"]),
        run_index=int(row["run_index"]),
        item_fingerprint=row.get("item_fingerprint") or None,
    )


class _Tail:
    """The complete JSON-object lines appended to a file since the last ``new()``."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size  # 0 for a device: what it reads is not a ledger
                fh.seek(self.offset)
                data = fh.read(max(0, size - self.offset))
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a torn or still-written last line waits for its newline
        self.offset += end
        rows = []
        for line in data[:end].splitlines():
            try:
                row = json.loads(line.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


class PartitionLedger:
    """The spend of one partition (``journals/<config_hash>/<benchmark>.jsonl`` and its reply store)."""

    def __init__(self, journal_path: Path) -> None:
        self._replies = _Tail(replies_path(journal_path))
        self._journal = _Tail(Path(journal_path))
        self._first_reply: dict[str, str] = {}  # run key -> when its first reply was stored
        self._seen_replies: set[tuple] = set()
        self._seen_rows: set[tuple] = set()
        self.replies_usd = 0.0
        self.journal_only_usd = 0.0
        self.unpriced = 0  # replies and journal-only runs of unknown cost (no price)

    def spent(self) -> float:
        """USD paid so far (replies stored, plus journalled runs whose replies are not stored)."""
        for entry in self._replies.new():  # before the journal: a run's replies precede its row
            try:
                key = (str(entry["run"]), str(entry["digest"]), int(entry["n"]))
            except (KeyError, TypeError, ValueError):
                continue
            if key in self._seen_replies:
                continue
            self._seen_replies.add(key)
            self._first_reply.setdefault(key[0], str(entry.get("at") or ""))
            self.unpriced += _unknown(entry.get("cost_usd"))
            self.replies_usd += _usd(entry.get("cost_usd"))
        for row in self._journal.new():
            try:
                identity = row_identity(row)
            except (KeyError, TypeError, ValueError):
                continue
            # one execution: a row rewritten as it was (or adopted with its fingerprint, plan.py) is the
            # same run, start and end, whatever fingerprint it carries now; it is paid once
            stamp = (
                replace(identity, item_fingerprint=None).key,
                row.get("started_at"),
                row.get("finished_at"),
            )
            if stamp in self._seen_rows:
                continue
            self._seen_rows.add(stamp)
            first = self._first_reply.get(identity.key)
            if first is not None and str(row.get("finished_at") or "") >= first:
                continue  # its replies are in the store
            self.unpriced += _unknown(row.get("cost_usd"))
            self.journal_only_usd += _usd(row.get("cost_usd"))
        return self.replies_usd + self.journal_only_usd

    def billed(self) -> float:
        """``spent()``, or NaN when any of it is of unknown cost (a model without a price)."""
        spent = self.spent()
        return math.nan if self.unpriced else spent


class ExperimentLedger:
    """The spend of every partition of one result set (``journals/<config_hash>/``), new ones included."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._parts: dict[Path, PartitionLedger] = {}

    def spent(self) -> float:
        for path in sorted(self.folder.glob("*.jsonl")):
            if not path.name.endswith(SUFFIX) and path not in self._parts:
                self._parts[path] = PartitionLedger(path)
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):  # a partition with replies, no journal yet
            journal = path.with_name(path.name.removesuffix(SUFFIX) + ".jsonl")
            self._parts.setdefault(journal, PartitionLedger(journal))
        return sum(part.spent() for part in self._parts.values())

    @property
    def unpriced(self) -> int:
        """Replies and runs of unknown cost seen by the last ``spent()``."""
        return sum(part.unpriced for part in self._parts.values())


def _unknown(value: Any) -> int:
    """1 for a cost recorded as NaN (no price), else 0."""
    try:
        return int(math.isnan(float(value)))
    except (TypeError, ValueError):
        return 0


def _usd(value: Any) -> float:
    try:
        usd = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return usd if usd == usd and usd >= 0 else 0.0
