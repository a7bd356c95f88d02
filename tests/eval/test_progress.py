"""How far a cell got, from its journal against today's items: which journal rows count, what the cell
still needs, what it spent (status's grid reads every cell this way)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.eval.progress import journal_progress, todays_items
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.journal import Journal

EXP = Experiment(name="e", agent="random", runs_per_item=2)


def _items() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark_name": ["tcga", "tcga", "tcga", "gtex"],
            "benchmark_id": ["a", "b", "gone", "a"],  # gtex's "a" is another item than tcga's
            "wsi_status": ["ok", "ok", "missing", "ok"],
            "item_fingerprint": ["fa", "fb", "fg", "ga"],
        }
    )


def _row(bid: str, run: int, fp: str | None, **fields) -> dict:
    return {"config_hash": EXP.config_hash(), "benchmark_name": "tcga", "benchmark_id": bid,
            "run_index": run, "item_fingerprint": fp, "cost_usd": 0.25} | fields  # fmt: skip


def test_only_runs_todays_readable_items_need_count(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    Journal(journals / EXP.config_hash() / "tcga.jsonl").append(
        [
            _row("a", 0, "fa"),  # answered
            _row("a", 1, "fa", error_kind="timeout", error="read timed out"),  # failed (retryable)
            _row("b", 0, None),  # a row from before fingerprints: counts
            _row("b", 1, "old"),  # the item changed since: not today's run
            _row("b", 2, "fb"),  # beyond runs_per_item
            _row("gone", 0, "fg"),  # its slide is missing today
            _row("zzz", 0, "fz"),  # no longer an item
        ]
    )
    todays = todays_items(_items())
    assert todays == {"tcga": {"a": "fa", "b": "fb"}, "gtex": {"a": "ga"}}
    progress = journal_progress(EXP, "tcga", todays["tcga"], journals)
    assert progress.runs_needed == 2 * 2  # two readable items x runs_per_item
    assert progress.answered == 2 and progress.failures.failed == 1 and progress.journalled == 3
    assert progress.cost_usd == 0.75  # the three rows that count
    nothing = journal_progress(EXP, "gtex", todays["gtex"], journals)
    assert (nothing.runs_needed, nothing.answered, nothing.cost_usd) == (2, 0, 0.0)


def test_without_fingerprints_or_slide_statuses_every_item_counts(tmp_path: Path) -> None:
    items = _items().drop(columns=["wsi_status", "item_fingerprint"])
    assert todays_items(items)["tcga"] == {"a": None, "b": None, "gone": None}
    journals = tmp_path / "journals"
    Journal(journals / EXP.config_hash() / "tcga.jsonl").append([_row("gone", 0, "fg"), _row("a", 1, "x")])
    progress = journal_progress(EXP, "tcga", todays_items(items)["tcga"], journals)
    assert (progress.runs_needed, progress.answered) == (6, 2)
