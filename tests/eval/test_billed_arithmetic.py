"""``cost_usd_billed`` / ``cost_usd_not_counted`` by hand: what the bill is when the runs that count cost
more or less than it, and when either side is unknown (a model without a price: NaN, never $0)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.eval.scoring import billed_columns, billed_costs


def test_not_counted_is_the_bill_beyond_the_counted_runs_never_below_zero() -> None:
    """Mutation: ``max(0.0, billed - counted)`` without the clamp."""
    assert billed_columns(1.0, 0.25) == {"cost_usd_billed": 1.0, "cost_usd_not_counted": 0.75}
    assert billed_columns(0.5, 0.75) == {"cost_usd_billed": 0.5, "cost_usd_not_counted": 0.0}


@pytest.mark.parametrize(("billed", "counted"), [(math.nan, 0.25), (1.0, math.nan)])
def test_either_side_unknown_makes_both_unknown(billed: float, counted: float) -> None:
    """Mutation: the NaN check on ``counted`` dropped (``max(0.0, nan)`` is 0.0: unknown shown as $0)."""
    assert all(math.isnan(v) for v in billed_columns(billed, counted).values())


def test_a_counted_run_without_a_price_makes_the_bill_unknown(tmp_path: Path) -> None:
    """Mutation: the counted runs summed with ``skipna=True`` (a run of unknown cost counted as $0)."""
    journal = tmp_path / "tcga.jsonl"
    row = {"config_hash": "h", "benchmark_name": "tcga", "benchmark_id": "i0", "run_index": 0,
           "cost_usd": 0.5, "started_at": "2026-01-01T00:00", "finished_at": "2026-01-01T00:01"}  # fmt: skip
    journal.write_text(json.dumps(row) + "\n")
    priced = pd.DataFrame({"error_kind": [None, "agent_error"], "cost_usd": [0.5, 0.125]})
    assert billed_costs(journal, priced) == {"cost_usd_billed": 0.5, "cost_usd_not_counted": 0.0}
    unpriced = pd.DataFrame({"error_kind": [None, None], "cost_usd": [0.25, math.nan]})
    assert all(math.isnan(v) for v in billed_costs(journal, unpriced).values())
