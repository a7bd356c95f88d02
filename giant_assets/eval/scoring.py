"""From per-run predictions to voted items, per-benchmark metrics, the summary table and results JSON.

Plain pandas/numpy; the Dagster assets call these. Items whose slide was unavailable (every run of the
item is ``slide_unavailable``) are reported (``n_slide_unavailable`` counts items) but not scored
(``value``); an item with no run at all (e.g. stopped by the budget) is scored as a wrong answer.
``value_all_items_pct`` scores every item with unavailable slides counted wrong, as grading the exported
submission does. A run with no extractable label, an agent error or a timeout counts as a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from giant_assets import __version__
from giant_assets.batch.runner import SLIDE_UNAVAILABLE
from giant_assets.eval.bootstrap import bootstrap_metric
from giant_assets.eval.metrics import METRICS
from giant_assets.eval.paper import paper_results
from giant_assets.eval.voting import vote_frame
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

PREDICTION_DTYPES: dict[str, str] = {
    "config_hash": "object",
    "agent": "object",
    "model": "object",
    "benchmark_name": "object",
    "benchmark_id": "object",
    "run_index": "int64",
    "started_at": "object",
    "answer_text": "object",
    "predicted_label": "Int64",
    "extraction": "object",
    "truth_label": "int64",
    "correct": "bool",
    "error_kind": "object",
    "error": "object",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cost_usd": "float64",
    "latency_s": "float64",
    "n_steps": "int64",
    "trajectory_json": "object",
    "finished_at": "object",
}
ITEM_KEY = ["benchmark_name", "benchmark_id"]
PAPER_MODELS = {
    "paper_giant": "GPT-5 + GIANT",
    "paper_giant_x5": "GPT-5 + GIANT x5",
    "paper_titan": "TITAN (zero-shot)",
    "paper_slidechat": "SlideChat (zero-shot)",
}


def trajectory_steps(predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per trajectory step, with the requested level-0 box split into columns for SQL."""
    records = []
    for row in predictions.itertuples(index=False):
        for step in json.loads(row.trajectory_json or "[]"):
            box = step.get("box") or [None] * 4
            size = step.get("image_size") or [None, None]
            records.append(
                {
                    "config_hash": row.config_hash,
                    "benchmark_name": row.benchmark_name,
                    "benchmark_id": row.benchmark_id,
                    "run_index": row.run_index,
                    "step": step["index"],
                    "action": step["action"],
                    "box_x": box[0],
                    "box_y": box[1],
                    "box_w": box[2],
                    "box_h": box[3],
                    "level": step.get("level"),
                    "image_w": size[0],
                    "image_h": size[1],
                    "text": step.get("text", ""),
                    "input_tokens": step.get("input_tokens", 0),
                    "output_tokens": step.get("output_tokens", 0),
                    "cost_usd": step.get("cost_usd", 0.0),
                    "latency_s": step.get("latency_s", 0.0),
                    "error": step.get("error"),
                }
            )
    steps = pd.DataFrame.from_records(records)
    if steps.empty:
        return pd.DataFrame({"config_hash": pd.Series(dtype="object"), "step": pd.Series(dtype="int64")})
    for col in ("box_x", "box_y", "box_w", "box_h", "level", "image_w", "image_h"):
        steps[col] = steps[col].astype("Int64")
    return steps


def _keys(frame: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([frame[c].astype(str) for c in ITEM_KEY])


def vote_items(predictions: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Majority-vote each item's runs; items with no available slide are kept but not scored.

    An item's slide is unavailable when it has runs and all of them are ``slide_unavailable``; an item
    without runs counts as available with no prediction (wrong), so it is never silently left out.
    """
    base = items[[*ITEM_KEY, "metric_type", "truth_label"]].copy()
    base["benchmark_id"] = base["benchmark_id"].astype(str)
    usable = predictions[predictions["error_kind"].fillna("") != SLIDE_UNAVAILABLE]
    voted = vote_frame(usable, ITEM_KEY, run_col="run_index", label_col="predicted_label")
    errors = (
        usable.assign(failed=usable["error_kind"].notna()).groupby(ITEM_KEY, as_index=False)["failed"].sum()
    )
    ids = predictions[["config_hash", "agent", "model"]].drop_duplicates()
    out = base.merge(voted, on=ITEM_KEY, how="left").merge(errors, on=ITEM_KEY, how="left")
    unavailable = _keys(predictions).difference(_keys(usable))
    out["slide_available"] = ~_keys(out).isin(unavailable)
    out["predicted_label"] = out["predicted_label"].astype("Int64")
    out["correct"] = (out["predicted_label"] == out["truth_label"]).fillna(False).astype(bool)
    out["n_failed_runs"] = out.pop("failed").fillna(0).astype("int64")
    for col in ("config_hash", "agent", "model"):
        out[col] = ids[col].iloc[0] if len(ids) else None
    return out


def benchmark_metrics_row(benchmark: str, voted: pd.DataFrame, predictions: pd.DataFrame) -> dict:
    """Metric, bootstrap mean/std/CI (as percentages), counts, errors and cost of one benchmark."""
    scored = voted[voted["slide_available"]]
    metric_types = voted["metric_type"].unique().tolist()
    if len(metric_types) > 1:
        raise ValueError(f"{benchmark}: items disagree on metric_type: {metric_types}")
    metric = metric_types[0] if metric_types else "accuracy"
    kinds = predictions["error_kind"].fillna("ok").value_counts()
    row = {
        "benchmark_name": benchmark,
        "agent": voted["agent"].iloc[0] if len(voted) else None,
        "model": voted["model"].iloc[0] if len(voted) else None,
        "config_hash": voted["config_hash"].iloc[0] if len(voted) else None,
        "metric_type": metric,
        "n_items": len(voted),
        "n_scored": len(scored),
        "n_correct": int(scored["correct"].sum()),
        "runs_per_item": int(predictions["run_index"].max() + 1) if len(predictions) else 0,
        "n_slide_unavailable": int((~voted["slide_available"]).sum()),  # items, not runs
        "n_agent_errors": int(kinds.get("agent_error", 0)),
        "n_timeouts": int(kinds.get("timeout", 0)),
        "n_no_label": int(kinds.get("no_answer", 0)),
        "cost_usd": float(predictions["cost_usd"].sum()),
        "input_tokens": int(predictions["input_tokens"].sum()),
        "output_tokens": int(predictions["output_tokens"].sum()),
    }
    if len(scored) == 0:
        nan = float("nan")
        return row | {
            "value": nan,
            "value_pct": nan,
            "value_all_items_pct": nan if len(voted) == 0 else 0.0,
            "boot_mean_pct": nan,
            "boot_std_pct": nan,
            "ci_low_pct": nan,
            "ci_high_pct": nan,
            "paper_format": "n/a (no scored items)",
        }
    y_true = scored["truth_label"].to_numpy(dtype=np.int64)
    y_pred = scored["predicted_label"].fillna(-1).to_numpy(dtype=np.int64)
    boot = bootstrap_metric(y_true, y_pred, metric)
    every = METRICS[metric](
        voted["truth_label"].to_numpy(dtype=np.int64),
        voted["predicted_label"].fillna(-1).to_numpy(dtype=np.int64),
    )
    return row | {
        "value_all_items_pct": 100 * every,
        "value": boot.point,
        "value_pct": 100 * boot.point,
        "boot_mean_pct": 100 * boot.mean,
        "boot_std_pct": 100 * boot.std,
        "ci_low_pct": 100 * boot.ci_lower,
        "ci_high_pct": 100 * boot.ci_upper,
        "paper_format": f"{100 * boot.mean:.1f} ± {100 * boot.std:.1f}",
    }


def summary_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Metrics rows in benchmark order, with the paper's Table 1 (mean ± std) for each benchmark."""
    paper = paper_results()
    table = metrics.copy()
    for column, model in PAPER_MODELS.items():
        rows = paper[paper["model"] == model].set_index("benchmark")
        table[column] = table["benchmark_name"].map(
            lambda b, rows=rows: (
                f"{rows.at[b, 'mean']:.1f} ± {rows.at[b, 'std']:.1f}" if b in rows.index else None
            )
        )
    order = {name: i for i, name in enumerate(BENCHMARK_NAMES)}
    return table.sort_values("benchmark_name", key=lambda s: s.map(order)).reset_index(drop=True)


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def write_results_json(
    table: pd.DataFrame, raw_csv: pd.DataFrame, out_dir: Path, settings_dir: Path
) -> list[Path]:
    """One ``results/<config_hash>/results.json`` per result set, with full provenance."""
    source = raw_csv["source_file"].iloc[0] if "source_file" in raw_csv and len(raw_csv) else None
    csv_sha = None
    if source and Path(source).is_file():
        csv_sha = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    templates = "\n\x00".join(sorted(raw_csv["prompt"].unique())) if "prompt" in raw_csv else ""
    provenance = {
        "package_version": __version__,
        "git_sha": _git_sha(),
        "csv_source": source,
        "csv_sha256": csv_sha,
        "prompt_templates_sha256": hashlib.sha256(templates.encode()).hexdigest(),
        "created_at": datetime.now(UTC).isoformat(),
    }
    paths = []
    for config_hash, group in table.groupby("config_hash", dropna=False):
        settings_file = settings_dir / str(config_hash) / "settings.json"
        settings = json.loads(settings_file.read_text()) if settings_file.exists() else None
        doc = {
            "config_hash": config_hash,
            "agent_settings": settings,
            "provenance": provenance,
            "metrics": json.loads(group.to_json(orient="records")),
        }
        path = out_dir / str(config_hash) / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2))
        paths.append(path)
    return paths
