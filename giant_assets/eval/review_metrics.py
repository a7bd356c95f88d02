"""What a pathologist review says, per experiment and benchmark: the tables behind the
``pathologist_reviews`` and ``review_metrics`` assets (plain pandas over ``eval/reviews.py``'s files).

Shares (regions rated relevant, answers rated correct, findings rated supporting) count a reviewer's
latest rating; ``partly`` counts as not. Their bootstrap std resamples the reviewed runs (1000 replicates,
seed 42, ``eval/bootstrap.bootstrap_indices``). Agreement: Cohen's kappa of the answer ratings when
exactly two reviewers rated the group (over the runs both rated), Krippendorff's alpha (ordinal) of the
answer and of the region ratings for any number. Reviewer-drawn regions are matched against the agent's
regions through ``geometry.roi``: the best IoU of an agent region with a drawn one, and whether any hit.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.eval.agreement import cohen_kappa, krippendorff_alpha
from giant_assets.eval.bootstrap import bootstrap_indices
from giant_assets.eval.reviews import (
    ANSWER_RATINGS,
    REGION_RATINGS,
    SUPPORT_RATINGS,
    ReviewError,
    ReviewFiles,
    demo_files,
    is_demo_review,
    latest_reviews,
    load_queue,
    read_reviews,
    validate_review,
)
from giant_assets.geometry.boxes import level0_box_problem
from giant_assets.geometry.roi import Region, evaluate_viewed_regions

REVIEW_COLUMNS = [
    "experiment",
    "benchmark_name",
    "benchmark_id",
    "run_index",
    "config_hash",
    "unit",
    "reviewer",
    "submitted_at",
    "n_submissions",
    "answer",
    "supports",
    "region_ratings",  # JSON list, one per agent region (null: not rated)
    "agent_regions",  # JSON list of the agent's level-0 boxes, in order
    "drawn",  # JSON list of the reviewer's level-0 boxes
    "comment",
    "agent_correct",  # the run's grade against the truth label (never shown to the reviewer)
]
N_REPLICATES, SEED = 1000, 42


def reviews_table(files: ReviewFiles, real: bool = False) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per (reviewer, unit): the latest submission joined to what it reviewed; and counts.

    A latest submission that does not pass ``validate_review`` against its unit today (stored before a
    check existed, or edited by hand) is left out, counted in ``invalid_skipped`` and named, one line
    each, in ``invalid`` (reviewer, unit, run and the field); the stored files are never changed.
    ``real``: ``files`` is the real review's folder, where the demo's scripted reviewers wrote before
    they had their own: their submissions there are left out, counted in ``demo_left_out`` and their
    files named in ``demo_files`` (to delete)."""
    units = {u["unit"]: u for u in load_queue(files)}
    records, skipped = read_reviews(files)
    demo = [r for r in records if is_demo_review(r)] if real else []
    if demo:
        records = [r for r in records if not is_demo_review(r)]
    submissions: dict[tuple[str, str], int] = {}
    for r in records:
        submissions[(r["reviewer"], r["unit"])] = submissions.get((r["reviewer"], r["unit"]), 0) + 1
    rows = []
    invalid: list[str] = []
    for (reviewer, unit_id), record in sorted(latest_reviews(records).items()):
        unit = units.get(unit_id)
        if unit is None:  # a unit taken out of the queue: its reviews stay stored, uncounted
            continue
        try:
            validate_review(unit, record)
        except ReviewError as exc:
            where = f"{unit['experiment']}/{unit['benchmark_name']} item {unit['benchmark_id']}"
            invalid.append(f"{reviewer}'s review of unit {unit_id} ({where} run {unit['run_index']}): {exc}")
            continue
        rows.append(
            {
                "experiment": unit["experiment"],
                "benchmark_name": unit["benchmark_name"],
                "benchmark_id": unit["benchmark_id"],
                "run_index": unit["run_index"],
                "config_hash": unit["config_hash"],
                "unit": unit_id,
                "reviewer": reviewer,
                "submitted_at": record["submitted_at"],
                "n_submissions": submissions[(reviewer, unit_id)],
                "answer": record.get("answer"),
                "supports": record.get("supports"),
                "region_ratings": json.dumps(record.get("regions", [])),
                "agent_regions": json.dumps([r["box"] for r in unit["shown"]["regions"]]),
                "drawn": json.dumps(record.get("drawn", [])),
                "comment": record.get("comment", ""),
                "agent_correct": bool(unit["correct"]),
            }
        )
    counts = {"submissions": len(records), "cut_lines_skipped": skipped, "queue": len(units)}
    counts |= {"invalid_skipped": len(invalid), "invalid": invalid, "demo_left_out": len(demo)}
    counts["demo_files"] = [str(path) for path in demo_files(files, demo)]
    frame = pd.DataFrame(rows, columns=REVIEW_COLUMNS)
    return frame.astype({"run_index": "int64", "n_submissions": "int64", "agent_correct": "bool"}), counts


def _share_with_std(per_run: pd.DataFrame, hits: str, total: str) -> tuple[float, float, int]:
    """Pooled share sum(hits) / sum(total) over runs, and its bootstrap std over runs."""
    per_run = per_run[per_run[total] > 0]
    if per_run.empty:
        return float("nan"), float("nan"), 0
    h, t = per_run[hits].to_numpy(float), per_run[total].to_numpy(float)
    idx = bootstrap_indices(len(per_run), N_REPLICATES, SEED)
    replicates = h[idx].sum(axis=1) / t[idx].sum(axis=1)
    return float(h.sum() / t.sum()), float(replicates.std(ddof=1)), len(per_run)


def _drawn_match(agent: list, drawn: list) -> tuple[float, bool] | None:
    if not agent or not drawn:
        return None
    score = evaluate_viewed_regions(agent, [Region("box", b) for b in drawn])
    return score.best_iou, score.hit


def _group_metrics(group: pd.DataFrame) -> dict[str, Any]:
    ratings = group["region_ratings"].map(json.loads)
    per_review = pd.DataFrame(
        {
            "unit": group["unit"].to_numpy(),
            "relevant": ratings.map(lambda rs: sum(r == "relevant" for r in rs)).to_numpy(),
            "rated_regions": ratings.map(lambda rs: sum(r is not None for r in rs)).to_numpy(),
            "correct": group["answer"].eq("correct").to_numpy(int),
            "rated_answer": group["answer"].notna().to_numpy(int),
            "supported": group["supports"].eq("yes").to_numpy(int),
            "rated_support": group["supports"].notna().to_numpy(int),
        }
    )
    per_run = per_review.groupby("unit").sum()  # resample runs, every reviewer's ratings of a run together
    out: dict[str, Any] = {"runs_reviewed": int(group["unit"].nunique()), "reviews": len(group)}
    out["reviewers"] = int(group["reviewer"].nunique())
    for name, hits, total in (
        ("regions_relevant", "relevant", "rated_regions"),
        ("answers_correct", "correct", "rated_answer"),
        ("findings_support", "supported", "rated_support"),
    ):
        share, std, _ = _share_with_std(per_run, hits, total)
        out[f"share_{name}"], out[f"share_{name}_std"] = share, std
    reviewers = sorted(group["reviewer"].unique())
    # one row per (reviewer, unit): a plain pivot keeps a reviewer who rated no answer (all null)
    answers = group.pivot(index="unit", columns="reviewer", values="answer").reindex(columns=reviewers)
    out["cohen_kappa_answer"] = float("nan")
    if len(reviewers) == 2:
        both = answers.dropna()
        out["cohen_kappa_answer"] = cohen_kappa(list(both[reviewers[0]]), list(both[reviewers[1]]))
    answer_matrix = [[None if pd.isna(v) else v for v in answers[r]] for r in answers.columns]
    out["alpha_answer"] = krippendorff_alpha(answer_matrix, ordered=list(reversed(ANSWER_RATINGS)))
    region_cells: dict[str, dict[tuple[str, int], str | None]] = {}
    for row, rs in zip(group.itertuples(index=False), ratings, strict=True):
        for k, rating in enumerate(rs):
            region_cells.setdefault(row.reviewer, {})[(row.unit, k)] = rating
    keys = sorted({key for cells in region_cells.values() for key in cells})
    region_matrix = [[region_cells[r].get(key) for key in keys] for r in sorted(region_cells)]
    out["alpha_regions"] = krippendorff_alpha(region_matrix, ordered=list(reversed(REGION_RATINGS)))
    matches = [
        m
        for a, d in zip(group["agent_regions"], group["drawn"], strict=True)
        if (m := _drawn_match(json.loads(a), json.loads(d))) is not None
    ]
    out["reviews_with_drawn"] = len(matches)
    out["mean_best_iou_drawn"] = float(np.mean([m[0] for m in matches])) if matches else float("nan")
    out["share_drawn_hit"] = float(np.mean([m[1] for m in matches])) if matches else float("nan")
    return out


METRIC_KEYS = ["experiment", "benchmark_name"]
METRIC_COLUMNS = [
    *METRIC_KEYS,
    "runs_reviewed",
    "reviews",
    "reviewers",
    *(
        f"share_{name}{std}"
        for name in ("regions_relevant", "answers_correct", "findings_support")
        for std in ("", "_std")
    ),
    "cohen_kappa_answer",
    "alpha_answer",
    "alpha_regions",
    "reviews_with_drawn",
    "mean_best_iou_drawn",
    "share_drawn_hit",
]


def review_metrics_table(reviews: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per (experiment, benchmark) of the reviews (see the module docstring), and the rows left
    out, one line each naming the reviewer, run and field (a review stored before its check existed:
    ``row_problem``); such a row never stops the others from counting."""
    problems = [row_problem(row) for row in reviews.itertuples(index=False)]
    skipped = [
        f"{row.reviewer}'s review of {row.experiment}/{row.benchmark_name} item {row.benchmark_id} "
        f"run {row.run_index}: {problem}"
        for row, problem in zip(reviews.itertuples(index=False), problems, strict=True)
        if problem is not None
    ]
    usable = reviews[[p is None for p in problems]] if len(reviews) else reviews
    rows = [
        {"experiment": experiment, "benchmark_name": benchmark, **_group_metrics(group)}
        for (experiment, benchmark), group in usable.groupby(METRIC_KEYS, sort=True)
    ]
    return pd.DataFrame(rows, columns=METRIC_COLUMNS), skipped


def row_problem(row: Any) -> str | None:
    """What makes a ``pathologist_reviews`` row unusable (a field and why), or None."""
    for name, choices in (("answer", ANSWER_RATINGS), ("supports", SUPPORT_RATINGS)):
        value = getattr(row, name)
        if not (value is None or (isinstance(value, float) and np.isnan(value)) or value in choices):
            return f"{name}: {str(value)[:40]!r} is not one of {choices}"
    parsed = {}
    for name in ("region_ratings", "drawn", "agent_regions"):
        try:
            parsed[name] = json.loads(getattr(row, name))
        except (TypeError, ValueError, RecursionError):
            return f"{name}: not a JSON list"
        if not isinstance(parsed[name], list):
            return f"{name}: not a JSON list"
    bad = [r for r in parsed["region_ratings"] if r not in (*REGION_RATINGS, None)]
    if bad:
        return f"region_ratings: {str(bad[0])[:40]!r} is not one of {REGION_RATINGS}"
    for name in ("drawn", "agent_regions"):
        for i, box in enumerate(parsed[name]):
            problem = level0_box_problem(box)
            if problem is not None:
                return f"{name}[{i}]: {problem}"
    return None
