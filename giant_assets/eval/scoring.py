"""From stored run records to voted items and per-benchmark metrics, re-extracting every label.

Plain pandas/numpy; the Dagster assets call these. Labels are extracted again from each run's stored
answer text (``rescore``), so an improved extractor or a changed scoring setting re-scores every result
set without a model call.

Headline (``value``, the bootstrap and ``paper_format``): over ALL items of the benchmark, as the paper
reports it: an item whose slide is missing or unreadable, whose runs all failed, or that was never run
(budget stop) counts wrong. Coverage (``n_slide_readable``, ``n_answered``) stands beside it, and
``value_readable_pct`` is the secondary value over items with a readable slide only.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from giant_assets import __version__
from giant_assets.benchmarks.registry import ordered
from giant_assets.core.files import file_sha256
from giant_assets.eval.bootstrap import bootstrap_metric
from giant_assets.eval.itemsets import ITEM_SET
from giant_assets.eval.metrics import METRICS
from giant_assets.eval.voting import vote_frame
from giant_assets.experiments.binding import read_binding
from giant_assets.runs.extraction import PANDA_NULL_REASON, extract_label
from giant_assets.runs.ledger import PartitionLedger
from giant_assets.runs.records import (
    AGENT_ERROR,
    MAX_RETRIES_EXCEEDED,
    NO_ANSWER,
    SLIDE_UNAVAILABLE,
    TIMEOUT,
)
from giant_assets.runs.replies import replies_path

ITEM_KEY = ["benchmark_name", "benchmark_id"]
EXTRACTOR_VERSION = "6"  # bump when extraction rules change: item_predictions re-scores (code_version)


def rescore(predictions: pd.DataFrame, items: pd.DataFrame, panda_null_grade: str = "benign") -> pd.DataFrame:
    """Runs with labels extracted again from their stored answer text by the current extractor.

    Runs that answered (no error, or ``no_answer``) get ``predicted_label``, ``extraction``,
    ``correct`` and ``error_kind`` (``no_answer`` when no label is found) anew; failed runs keep theirs.
    """
    out = predictions.copy()
    if out.empty:
        return out
    options = {
        (b, str(i)): (None if o is None else [str(x) for x in o])
        for b, i, o in items[[*ITEM_KEY, "options"]].itertuples(index=False)
    }
    answered = out["error_kind"].isna() | out["error_kind"].eq(NO_ANSWER)
    labels, reasons = [], []
    for bench, ident, text in out.loc[answered, [*ITEM_KEY, "answer_text"]].itertuples(index=False):
        found = extract_label(
            text or "",
            benchmark_name=bench,
            options=options.get((bench, str(ident))),
            panda_null_grade=panda_null_grade,
        )
        labels.append(found.label)
        reasons.append(found.reason)
    out.loc[answered, "predicted_label"] = pd.array(labels, dtype="Int64")
    out.loc[answered, "extraction"] = reasons
    no_label = answered & out["predicted_label"].isna()
    out.loc[answered, "error_kind"] = None
    out.loc[no_label, "error_kind"] = NO_ANSWER
    out.loc[no_label, "error"] = "no label could be extracted: " + out.loc[no_label, "extraction"].astype(str)
    out.loc[answered & ~no_label, "error"] = None
    out["predicted_label"] = out["predicted_label"].astype("Int64")
    out["correct"] = (out["predicted_label"] == out["truth_label"]).fillna(False).astype(bool)
    return out


def _keys(frame: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([frame[c].astype(str) for c in ITEM_KEY])


def vote_items(predictions: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Majority-vote each item's runs: one row per item of ``items``, whatever happened to it.

    An item's slide is unavailable when it has runs and all of them are ``slide_unavailable``; an item
    without runs (never started) has no prediction. Both count wrong in the headline.
    """
    fingerprint = ["item_fingerprint"] if "item_fingerprint" in items.columns else []
    base = items[[*ITEM_KEY, "metric_type", "truth_label", *fingerprint]].copy()
    base["benchmark_id"] = base["benchmark_id"].astype(str)
    usable = predictions[predictions["error_kind"].fillna("") != SLIDE_UNAVAILABLE]
    voted = vote_frame(usable, ITEM_KEY, run_col="run_index", label_col="predicted_label")
    errors = (
        usable.assign(
            failed=usable["error_kind"].notna(),
            no_label=usable["error_kind"].eq(NO_ANSWER),
            null_grade=usable["extraction"].fillna("").str.startswith(PANDA_NULL_REASON),
        )
        .groupby(ITEM_KEY, as_index=False)[["failed", "no_label", "null_grade"]]
        .sum()
    )
    ids = predictions[["config_hash", "agent", "model"]].drop_duplicates()
    out = base.merge(voted, on=ITEM_KEY, how="left").merge(errors, on=ITEM_KEY, how="left")
    unavailable = _keys(predictions).difference(_keys(usable))
    out["slide_available"] = ~_keys(out).isin(unavailable)
    out["predicted_label"] = out["predicted_label"].astype("Int64")
    out["correct"] = (out["predicted_label"] == out["truth_label"]).fillna(False).astype(bool)
    out["n_runs"] = out["n_runs"].fillna(0).astype("int64")
    out["n_votes"] = out["n_votes"].fillna(0).astype("int64")
    out["n_failed_runs"] = out.pop("failed").fillna(0).astype("int64")
    out["n_no_label_runs"] = out.pop("no_label").fillna(0).astype("int64")
    out["n_null_grade_runs"] = out.pop("null_grade").fillna(0).astype("int64")
    for col in ("config_hash", "agent", "model"):
        out[col] = ids[col].iloc[0] if len(ids) else None
    return out


def benchmark_metrics_row(
    benchmark: str, voted: pd.DataFrame, predictions: pd.DataFrame, journal_path: Path | None = None
) -> dict:
    """Headline metric over all items with its bootstrap (as percentages), coverage, errors and cost.

    ``voted`` comes from ``vote_items`` (its label counts reflect the current extraction); ``predictions``
    are the stored runs (errors, tokens and cost do not depend on extraction). ``journal_path``: the
    cell's journal, whose ledger gives what the provider billed (``billed_costs``; NaN without it).
    """
    metric_types = voted["metric_type"].unique().tolist()
    if len(metric_types) > 1:
        raise ValueError(f"{benchmark}: items disagree on metric_type: {metric_types}")
    metric = metric_types[0] if metric_types else "accuracy"
    kinds = predictions["error_kind"].fillna("ok").value_counts()
    readable = voted[voted["slide_available"]]
    first = voted.iloc[0] if len(voted) else None
    row = {
        "benchmark_name": benchmark,
        "agent": None if first is None else first["agent"],
        "model": None if first is None else first["model"],
        "config_hash": None if first is None else first["config_hash"],
        # the item set the metric is over (item_predictions'; None when scored before fingerprints)
        ITEM_SET: _item_set(voted),
        "metric_type": metric,
        "n_items": len(voted),
        "n_slide_readable": len(readable),
        "n_answered": int(voted["predicted_label"].notna().sum()),
        "n_correct": int(voted["correct"].sum()),
        "runs_per_item": int(predictions["run_index"].max() + 1) if len(predictions) else 0,
        "n_slide_unavailable": int((~voted["slide_available"]).sum()),  # items, not runs
        "n_agent_errors": int(kinds.get(AGENT_ERROR, 0)),
        "n_timeouts": int(kinds.get(TIMEOUT, 0)),
        "n_max_retries_exceeded": int(kinds.get(MAX_RETRIES_EXCEEDED, 0)),
        "n_no_label": int(voted["n_no_label_runs"].sum()),
        "n_null_grades": int(voted["n_null_grade_runs"].sum()),
        # answers read from the whole reply because it had no <response>...</response> tags
        "n_untagged_responses": int(predictions["response_tagged"].eq(False).sum()),
        "cost_usd": float(predictions["cost_usd"].sum(skipna=False)),  # NaN: a run without a price
        **billed_costs(journal_path, predictions),
        "input_tokens": int(predictions["input_tokens"].sum()),
        "cached_input_tokens": int(predictions["cached_input_tokens"].sum()),
        "output_tokens": int(predictions["output_tokens"].sum()),
        "coverage_readable_pct": 100 * len(readable) / len(voted) if len(voted) else float("nan"),
        "coverage_answered_pct": 100 * voted["predicted_label"].notna().mean()
        if len(voted)
        else float("nan"),
    }
    nan = float("nan")
    if len(voted) == 0:
        return row | dict.fromkeys(_VALUE_COLUMNS, nan) | {"paper_format": "n/a (no items)"}
    boot = bootstrap_metric(voted["truth_label"].to_numpy(np.int64), _labels(voted), metric)
    readable_value = (
        100 * METRICS[metric](readable["truth_label"].to_numpy(np.int64), _labels(readable))
        if len(readable)
        else nan
    )
    return row | {
        "value": boot.point,
        "value_pct": 100 * boot.point,
        "boot_mean_pct": 100 * boot.mean,
        "boot_std_pct": 100 * boot.std,
        "ci_low_pct": 100 * boot.ci_lower,
        "ci_high_pct": 100 * boot.ci_upper,
        "paper_format": f"{100 * boot.mean:.1f} ± {100 * boot.std:.1f}",
        "value_readable_pct": readable_value,
    }


def billed_costs(journal_path: Path | None, predictions: pd.DataFrame) -> dict[str, float]:
    """``cost_usd_billed``: what the provider billed for the cell, every paid call of every process and
    run (failed, killed, retried and replaced ones too; ``runs/ledger.py``), and ``cost_usd_not_counted``:
    of it, what was paid beyond the runs that count (stored runs without an error). NaN for both when
    the cell has neither a journal nor a reply store at ``journal_path`` (nothing to read the bill from).
    """
    nan = float("nan")
    if journal_path is None or not (journal_path.is_file() or replies_path(journal_path).is_file()):
        return {"cost_usd_billed": nan, "cost_usd_not_counted": nan}
    billed = PartitionLedger(journal_path).billed()
    counted = (
        float(predictions.loc[predictions["error_kind"].isna(), "cost_usd"].sum(skipna=False))
        if len(predictions)
        else 0.0
    )
    return billed_columns(billed, counted)


def billed_columns(billed: float, counted: float) -> dict[str, float]:
    """``cost_usd_billed`` and ``cost_usd_not_counted`` (billed beyond ``counted``); both NaN when
    either is unknown (a reply or run of a model without a price), never $0."""
    if math.isnan(billed) or math.isnan(counted):
        return {"cost_usd_billed": math.nan, "cost_usd_not_counted": math.nan}
    return {"cost_usd_billed": round(billed, 6), "cost_usd_not_counted": round(max(0.0, billed - counted), 6)}


def _item_set(voted: pd.DataFrame) -> str | None:
    values = voted[ITEM_SET].dropna().unique().tolist() if ITEM_SET in voted.columns else []
    if len(values) > 1:
        raise ValueError(f"item_predictions mixes {len(values)} item sets: re-materialize it")
    return str(values[0]) if values else None


_VALUE_COLUMNS = (
    "value",
    "value_pct",
    "boot_mean_pct",
    "boot_std_pct",
    "ci_low_pct",
    "ci_high_pct",
    "value_readable_pct",
)


def _labels(voted: pd.DataFrame) -> np.ndarray:
    """Voted labels with no prediction as -1 (never a valid label: counts wrong)."""
    return voted["predicted_label"].fillna(-1).to_numpy(np.int64)


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def write_results_json(
    metrics: pd.DataFrame,
    raw_csv: pd.DataFrame,
    out_dir: Path,
    bindings_dir: Path,
    errata: dict | None = None,
    prompts: dict[str, dict] | None = None,
) -> list[Path]:
    """One ``results/<experiment>/results.json`` per experiment: its answer settings (as bound), the
    metrics of every benchmark it ran, and provenance (package, git, CSV and prompt hashes,
    ``errata``: the dataset's errata mode and the items it touched, multipathqa/errata.py, and
    ``prompts``: where the experiment's texts come from, ``experiments.prompts.prompt_provenance``)."""
    source = raw_csv["source_file"].iloc[0] if "source_file" in raw_csv and len(raw_csv) else None
    csv_sha = None
    if source and Path(source).is_file():
        csv_sha = file_sha256(source)
    templates = "\n\x00".join(sorted(raw_csv["prompt"].unique())) if "prompt" in raw_csv else ""
    provenance = {
        "package_version": __version__,
        "git_sha": _git_sha(),
        "csv_source": source,
        "csv_sha256": csv_sha,
        "prompt_templates_sha256": hashlib.sha256(templates.encode()).hexdigest(),
        "errata": errata,
        "created_at": datetime.now(UTC).isoformat(),
    }
    order = {name: i for i, name in enumerate(ordered(metrics["benchmark_name"]))}
    paths = []
    for experiment, group in metrics.groupby("experiment"):
        binding = bindings_dir / f"{experiment}.json"
        doc = {
            "experiment": experiment,
            "binding": read_binding(binding) if binding.exists() else None,
            "provenance": provenance | {"prompts": (prompts or {}).get(str(experiment))},
            "metrics": json.loads(
                group.sort_values("benchmark_name", key=lambda s: s.map(order)).to_json(orient="records")
            ),
        }
        path = out_dir / str(experiment) / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2))
        paths.append(path)
    return paths
