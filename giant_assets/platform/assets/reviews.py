"""Assets of the pathologist review (``giant-review``): the stored reviews, and what they say."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, asset

from giant_assets.eval.review_metrics import REVIEW_COLUMNS, review_metrics_table, reviews_table
from giant_assets.eval.reviews import DEMO_REVIEW_FOLDER, REVIEW_FOLDER, ReviewFiles
from giant_assets.platform.resources import StorageResource

SHOWN_SKIPPED = 30  # left-out reviews named in the metadata and the log; all are counted
SHOWN = ["experiment", "benchmark_name", "reviewers", "runs_reviewed", "share_regions_relevant",
         "share_answers_correct", "cohen_kappa_answer", "alpha_answer", "alpha_regions"]  # fmt: skip


class ReviewsConfig(Config):
    demo: bool = False  # also count the demo's scripted reviewers (<data>/reviews-demo/), as the demo does


@asset(group_name="review", kinds={"pandas"})
def pathologist_reviews(
    context: AssetExecutionContext, config: ReviewsConfig, storage: StorageResource
) -> pd.DataFrame:
    """One row per (reviewer, reviewed run): the reviewer's latest ratings, unblinded (experiment,
    benchmark, item, run, the run's grade), read from ``<data>/reviews/`` (``giant-review``); the demo's
    scripted reviews (``<data>/reviews-demo/``) only with ``demo: true``."""
    folders = [REVIEW_FOLDER, DEMO_REVIEW_FOLDER] if config.demo else [REVIEW_FOLDER]
    tables = [reviews_table(ReviewFiles(storage.root / f), real=f == REVIEW_FOLDER) for f in folders]
    frames = [f for f, _ in tables if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else tables[0][0]
    counts = tables[0][1]
    for _, more in tables[1:]:
        counts = {k: counts[k] + more[k] for k in counts}  # numbers add, the named lines join
    context.add_output_metadata(
        {
            "reviews": len(frame),
            "reviewers": int(frame["reviewer"].nunique()) if len(frame) else 0,
            "revisions_kept": counts["submissions"] - len(frame),
            "queue": counts["queue"],
            "cut_lines_skipped": counts["cut_lines_skipped"],
            "invalid_skipped": counts["invalid_skipped"],
            "invalid_first": MetadataValue.md(_listed(counts["invalid"])),
            "old_demo_reviews_left_out": counts["demo_left_out"],
        }
    )
    if counts["demo_left_out"]:
        context.log.warning(
            f"left out {counts['demo_left_out']} reviews of the demo's scripted reviewers found in the real "
            f"review's folder (written by a demo before they moved to {DEMO_REVIEW_FOLDER}/); delete "
            f"{' and '.join(counts['demo_files'])} to keep them out for good"
        )
    for line in counts["invalid"][:SHOWN_SKIPPED]:
        context.log.warning(f"review left out: {line}")
    return frame if len(frame) else pd.DataFrame(columns=REVIEW_COLUMNS)


@asset(group_name="review", kinds={"pandas"})
def review_metrics(context: AssetExecutionContext, pathologist_reviews: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and benchmark: shares of regions rated relevant, answers rated correct and findings
    rated supporting (bootstrap std over runs), Cohen's kappa and Krippendorff's alpha between reviewers,
    IoU of the agent's regions with the reviewers' drawn ones (see ``eval/review_metrics.py``)."""
    metrics, skipped = review_metrics_table(pathologist_reviews)
    for line in skipped[:SHOWN_SKIPPED]:
        context.log.warning(f"review left out: {line}")
    left_out = {"reviews_skipped": len(skipped), "skipped_first": MetadataValue.md(_listed(skipped))}
    if metrics.empty:
        context.add_output_metadata({"groups": 0} | left_out)
        return metrics
    table = metrics[SHOWN].round(3)
    context.add_output_metadata(
        {"groups": len(metrics), "metrics": MetadataValue.md(table.to_markdown(index=False))} | left_out
    )
    return metrics


def _listed(lines: list[str]) -> str:
    shown = "\n".join(f"- {line}" for line in lines[:SHOWN_SKIPPED])
    more = f"\n- ... and {len(lines) - SHOWN_SKIPPED} more" if len(lines) > SHOWN_SKIPPED else ""
    return shown + more or "none"
