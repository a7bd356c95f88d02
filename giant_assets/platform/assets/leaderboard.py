"""Assets across experiments: the leaderboard with the paper's rows, and paired comparisons."""

import pandas as pd
from dagster import AssetExecutionContext, AssetOut, MetadataValue, asset, multi_asset

from giant_assets.core.settings import DEFAULT_VIEWER_URL, VIEWER_URL_ENV, env
from giant_assets.eval.comparisons import experiment_comparisons as compare_experiments
from giant_assets.eval.leaderboard import leaderboard_long, leaderboard_markdown, leaderboard_table
from giant_assets.eval.scoring import write_results_json
from giant_assets.multipathqa.errata import errata_summary, errata_text
from giant_assets.platform.automation import FOLLOWS_RESULTS
from giant_assets.platform.resources import StorageResource
from giant_assets.report.viewer.items import disagreeing_items, disagreements_markdown

COMPARISON_COLUMNS_SHOWN = [
    "benchmark_name",
    "experiment_a",
    "experiment_b",
    "n_shared",
    "diff_pct",
    "p_le_0",
]


@multi_asset(
    outs={
        "leaderboard": AssetOut(
            description="one row per experiment plus the paper's rows, mean ± std",
            kinds={"pandas", "matplotlib"},
            automation_condition=FOLLOWS_RESULTS,
        ),
        "leaderboard_long": AssetOut(
            description="one row per known (experiment, benchmark) cell",
            kinds={"pandas"},
            automation_condition=FOLLOWS_RESULTS,
        ),
    },
    group_name="compare",
)
def leaderboard(
    context: AssetExecutionContext,
    benchmark_metrics: pd.DataFrame,
    multipathqa_csv: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per experiment plus the paper's rows, one column per benchmark in ``mean ± std``, and the
    same cells in long form (``experiment, source, benchmark_name, mean, std``).

    Also writes the chart (``results/leaderboard.png``) and one ``results/<experiment>/results.json``
    per experiment with its settings and provenance (including how the dataset's errata were handled).
    """
    from giant_assets.report.charts import leaderboard_chart_png, png_markdown  # matplotlib: when drawing

    long = leaderboard_long(benchmark_metrics)
    table = leaderboard_table(benchmark_metrics)
    out_dir = storage.root / "results"
    chart = leaderboard_chart_png(long, out_dir / "leaderboard.png")
    errata = errata_summary(benchmark_items)
    results = write_results_json(
        benchmark_metrics, multipathqa_csv, out_dir, storage.root / "experiments", errata=errata
    )
    context.add_output_metadata(
        {
            "leaderboard": MetadataValue.md(leaderboard_markdown(table)),
            "experiments": int((table["source"] == "ours").sum()),
            "errata": errata_text(errata),
            "chart": MetadataValue.path(str(chart)),
            "chart_md": MetadataValue.md(png_markdown(chart, "leaderboard")),
            "results_json": MetadataValue.json([str(p) for p in results]),
        },
        output_name="leaderboard",
    )
    context.add_output_metadata({"cells": len(long)}, output_name="leaderboard_long")
    return table, long


@asset(group_name="compare", kinds={"numpy"}, automation_condition=FOLLOWS_RESULTS)
def experiment_comparisons(context: AssetExecutionContext, item_predictions: pd.DataFrame) -> pd.DataFrame:
    """For each benchmark and pair of experiments sharing items: the metric difference with a paired
    bootstrap (same resampled items for both; 1000 replicates, seed 42): mean, std, 95% interval and
    the share of replicates in which the difference is <= 0."""
    table = compare_experiments(item_predictions)
    shown = [c for c in COMPARISON_COLUMNS_SHOWN if c in table.columns]
    disagree = disagreeing_items(item_predictions)
    viewer_url = env(VIEWER_URL_ENV) or DEFAULT_VIEWER_URL
    context.add_output_metadata(
        {
            "pairs": len(table),
            "disagreeing_items": int(disagree[["benchmark_name", "benchmark_id"]].drop_duplicates().shape[0]),
            "disagreements": MetadataValue.md(disagreements_markdown(disagree, viewer_url)),
            "comparisons": MetadataValue.md(
                table[shown].head(40).to_markdown(index=False) if len(table) else "none"
            ),
        }
    )
    return table
