"""Assets of the pathologist review (``giant-review``): the stored reviews, and what they say."""

import pandas as pd
from dagster import AssetExecutionContext, MetadataValue, asset

from giant_assets.eval.review_metrics import REVIEW_COLUMNS, review_metrics_table, reviews_table
from giant_assets.eval.reviews import ReviewFiles
from giant_assets.platform.resources import StorageResource

SHOWN = ["experiment", "benchmark_name", "reviewers", "runs_reviewed", "share_regions_relevant",
         "share_answers_correct", "cohen_kappa_answer", "alpha_answer", "alpha_regions"]  # fmt: skip


@asset(group_name="review", kinds={"pandas"})
def pathologist_reviews(context: AssetExecutionContext, storage: StorageResource) -> pd.DataFrame:
    """One row per (reviewer, reviewed run): the reviewer's latest ratings, unblinded (experiment,
    benchmark, item, run, the run's grade), read from ``<data>/reviews/`` (``giant-review``)."""
    frame, counts = reviews_table(ReviewFiles(storage.root / "reviews"))
    context.add_output_metadata(
        {
            "reviews": len(frame),
            "reviewers": int(frame["reviewer"].nunique()) if len(frame) else 0,
            "revisions_kept": counts["submissions"] - len(frame),
            "queue": counts["queue"],
            "cut_lines_skipped": counts["cut_lines_skipped"],
        }
    )
    return frame if len(frame) else pd.DataFrame(columns=REVIEW_COLUMNS)


@asset(group_name="review", kinds={"pandas"})
def review_metrics(context: AssetExecutionContext, pathologist_reviews: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and benchmark: shares of regions rated relevant, answers rated correct and findings
    rated supporting (bootstrap std over runs), Cohen's kappa and Krippendorff's alpha between reviewers,
    IoU of the agent's regions with the reviewers' drawn ones (see ``eval/review_metrics.py``)."""
    metrics = review_metrics_table(pathologist_reviews)
    if metrics.empty:
        context.add_output_metadata({"groups": 0})
        return metrics
    table = metrics[SHOWN].round(3)
    context.add_output_metadata(
        {"groups": len(metrics), "metrics": MetadataValue.md(table.to_markdown(index=False))}
    )
    return metrics
