"""How far one cell of the results grid (experiment x benchmark) got, from its journal alone.

The runs a cell needs are today's items with a readable slide times ``runs_per_item``; a journal row
counts for an item only with the item's fingerprint (or none: an older row). A row is *answered* when it
ended without a retryable error; *failed* rows are those ``batch.failures`` counts as failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from giant_assets.experiments.spec import Experiment
from giant_assets.runs.failures import FailureReport, failure_report, is_slide_unavailable
from giant_assets.runs.journal import Journal
from giant_assets.runs.records import RETRYABLE


@dataclass
class JournalProgress:
    """One cell's journal against today's items."""

    runs_needed: int  # today's items with a readable slide x runs_per_item
    answered: int
    failures: FailureReport
    cost_usd: float  # of the journalled runs of today's items (answered or not)
    journal: Path

    @property
    def journalled(self) -> int:
        return self.answered + self.failures.failed


def todays_items(items: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """benchmark -> {benchmark_id: item_fingerprint (None without that column)} of today's items with a
    readable slide (``items``: today's ``benchmark_items``), read once for a whole grid of cells."""
    readable = items[items["wsi_status"] == "ok"] if "wsi_status" in items else items
    fingerprints = readable["item_fingerprint"] if "item_fingerprint" in readable else [None] * len(readable)
    out: dict[str, dict[str, Any]] = {}
    for benchmark, bid, fp in zip(
        readable["benchmark_name"].astype(str),
        readable["benchmark_id"].astype(str),
        fingerprints,
        strict=True,
    ):
        out.setdefault(benchmark, {})[bid] = fp
    return out


def journal_progress(
    exp: Experiment, benchmark: str, todays: dict[str, Any], journals_dir: Path
) -> JournalProgress:
    """``todays``: the benchmark's entry of :func:`todays_items`."""
    journal = Journal(journals_dir / exp.config_hash() / f"{benchmark}.jsonl")
    rows: dict[tuple[str, int], dict] = {}
    for row in journal.read().values():
        bid, run = str(row.get("benchmark_id")), int(row.get("run_index", 0) or 0)
        stored, now = row.get("item_fingerprint"), todays.get(bid, "")
        if now == "" or run >= exp.runs_per_item or (stored and now and stored != now):
            continue  # not a run today's items need
        rows[(bid, run)] = row
    kept = [r for r in rows.values() if not is_slide_unavailable(r)]
    answered = sum(r.get("error_kind") not in RETRYABLE for r in kept)
    cost = sum(float(r.get("cost_usd") or 0.0) for r in rows.values())
    return JournalProgress(
        runs_needed=len(todays) * exp.runs_per_item,
        answered=answered,
        failures=failure_report(list(rows.values()), exp.max_failed_share),
        cost_usd=cost,
        journal=journal.path,
    )
