"""Assets across experiments: the leaderboard with the paper's rows, and paired comparisons.

Both show only results over today's items of declared experiments (eval/itemsets.py), never those of a
path-review experiment (it answers with a review JSON, not an option); a failed rebuild retires their
tables (platform/hooks.py), so a view never serves an outdated build.
"""

import pandas as pd
from dagster import AssetExecutionContext, AssetOut, MetadataValue, asset, multi_asset

from giant_assets.core.settings import DEFAULT_VIEWER_URL, VIEWER_URL_ENV, env
from giant_assets.eval.comparisons import experiment_comparisons as compare_experiments
from giant_assets.eval.itemsets import (
    REMOVED,
    STALE,
    cell_status,
    current_item_sets,
    set_aside_markdown,
    split_current,
)
from giant_assets.eval.leaderboard import (
    leaderboard_long,
    leaderboard_markdown,
    leaderboard_table,
    unscored_experiments,
    without_experiments,
)
from giant_assets.eval.scoring import write_results_json
from giant_assets.experiments.prompts import prompt_provenance
from giant_assets.multipathqa.errata import errata_summary, errata_text
from giant_assets.platform.automation import FOLLOWS_RESULTS
from giant_assets.platform.hooks import retire_on_failure
from giant_assets.platform.resources import ExperimentsResource, StorageResource
from giant_assets.platform.status import failed_cells
from giant_assets.report.viewer.items import disagreeing_items, disagreements_markdown

COMPARISON_COLUMNS_SHOWN = [
    "benchmark_name",
    "experiment_a",
    "experiment_b",
    "n_shared",
    "diff_pct",
    "p_le_0",
]


def _unscored(experiments: ExperimentsResource) -> set[str]:
    """Declared experiments that answer no benchmark question (the path review): no row, no pair."""
    return unscored_experiments({name: e.agent for name, e in experiments.all().items()})


@multi_asset(
    outs={
        "leaderboard": AssetOut(
            description="one row per experiment over today's items plus the paper's rows, mean ± std",
            kinds={"pandas", "matplotlib"},
            automation_condition=FOLLOWS_RESULTS,
        ),
        "leaderboard_long": AssetOut(
            description="one row per known (experiment, benchmark) cell over today's items",
            kinds={"pandas"},
            automation_condition=FOLLOWS_RESULTS,
        ),
        "leaderboard_stale": AssetOut(
            description="results set aside (another item set, removed experiment), failed cells with their "
            "reason, and what to re-run",
            kinds={"pandas"},
            automation_condition=FOLLOWS_RESULTS,
        ),
    },
    group_name="compare",
    hooks={retire_on_failure("leaderboard", "leaderboard_long", "leaderboard_stale")},
)
def leaderboard(
    context: AssetExecutionContext,
    benchmark_metrics: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    multipathqa_csv: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One row per experiment plus the paper's rows, one column per benchmark in ``mean ± std``, and the
    same cells in long form (``experiment, source, benchmark_name, mean, std, item_set_fingerprint``).

    Only cells computed over today's item set of their benchmark, of experiments still declared, are
    shown; the others are set aside in ``leaderboard_stale`` with the command that brings each back
    (eval/itemsets.py). Also writes the chart (``results/leaderboard.png``) and one
    ``results/<experiment>/results.json`` per experiment with its settings, provenance (including how
    the dataset's errata were handled) and each benchmark's item set and ``leaderboard_status``.
    """
    from giant_assets.report.charts import leaderboard_chart_png, png_markdown  # matplotlib: when drawing

    declared = set(experiments.all())
    benchmark_metrics = without_experiments(benchmark_metrics, _unscored(experiments))
    names = experiments.benchmark_names()  # a removed declaration's results: set aside, kept
    shown, stale = split_current(benchmark_metrics, benchmark_items, declared, str(experiments.file), names)
    failed = failed_cells(
        context.instance, storage.root, experiments.all(), benchmark_items, set(stale["partition"])
    )
    stale = pd.concat([stale, failed], ignore_index=True) if len(failed) else stale  # beside, with the reason
    long = leaderboard_long(shown)
    table = leaderboard_table(shown)
    out_dir = storage.root / "results"
    chart = leaderboard_chart_png(long, out_dir / "leaderboard.png")
    status = (
        cell_status(benchmark_metrics, current_item_sets(benchmark_items), declared, names)
        if len(benchmark_metrics)
        else None
    )
    errata = errata_summary(benchmark_items)
    results = write_results_json(
        benchmark_metrics.assign(leaderboard_status=status) if status is not None else benchmark_metrics,
        multipathqa_csv,
        out_dir,
        storage.root / "experiments",
        errata=errata,
        prompts=_prompt_sources(experiments),
    )
    if len(stale):
        context.log.warning(f"leaderboard: {len(stale)} result(s) set aside:\n{set_aside_markdown(stale)}")
    context.add_output_metadata(
        {
            # first entry, one click in the UI: the chart (inside the metadata) above the table
            "leaderboard": MetadataValue.md(
                png_markdown(chart, "leaderboard chart") + "\n\n" + leaderboard_markdown(table)
            ),
            "experiments": int((table["source"] == "ours").sum()),
            "errata": errata_text(errata),
            "set_aside": len(stale),
            "chart": MetadataValue.path(str(chart)),
            "results_json": MetadataValue.json([str(p) for p in results]),
            "paper_figures": MetadataValue.md(
                "The paper's figures (accuracy vs iterations, vs thumbnail resolution, GIANT vs the random "
                "ablation, x1 vs x5): asset [paper_figures](/assets/paper_figures), PNGs in "
                f"`{out_dir / 'figures'}`"
            ),
        },
        output_name="leaderboard",
    )
    context.add_output_metadata({"cells": len(long)}, output_name="leaderboard_long")
    context.add_output_metadata(
        {
            "set_aside": len(stale),
            "stale": int((stale["status"] == STALE).sum()),
            "removed": int((stale["status"] == REMOVED).sum()),
            "failed": len(failed),
            "what_to_rerun": MetadataValue.md(set_aside_markdown(stale)),
        },
        output_name="leaderboard_stale",
    )
    return table, long, stale


def _prompt_sources(experiments: ExperimentsResource) -> dict[str, dict]:
    """Per declared model experiment, where its texts come from (the built-in ones are not official)."""
    out = {}
    for name, exp in experiments.all().items():
        if exp.calls_model:
            try:
                out[name] = prompt_provenance(exp.prompt_file, exp.prompt_path)
            except ValueError as exc:  # an unreadable prompt file: said, not fatal for the leaderboard
                out[name] = {"error": str(exc)}
    return out


@asset(
    group_name="compare",
    kinds={"numpy"},
    hooks={retire_on_failure("experiment_comparisons")},
    automation_condition=FOLLOWS_RESULTS,
)
def experiment_comparisons(
    context: AssetExecutionContext,
    item_predictions: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """For each benchmark and pair of experiments sharing items: the metric difference with a paired
    bootstrap (same resampled items for both; 1000 replicates, seed 42): mean, std, 95% interval and
    the share of replicates in which the difference is <= 0.

    Only results over today's item set of declared experiments are compared; the others are named in
    the ``set_aside`` metadata (and the run's log) with what to re-run (eval/itemsets.py)."""
    declared = set(experiments.all())
    item_predictions = without_experiments(item_predictions, _unscored(experiments))
    rows, stale = split_current(
        item_predictions, benchmark_items, declared, str(experiments.file), experiments.benchmark_names()
    )

    table = compare_experiments(rows)
    shown = [c for c in COMPARISON_COLUMNS_SHOWN if c in table.columns]
    disagree = disagreeing_items(rows)  # over today's items only, as the pairs
    viewer_url = env(VIEWER_URL_ENV) or DEFAULT_VIEWER_URL
    if len(stale):
        context.log.warning(
            f"experiment_comparisons: {len(stale)} result(s) set aside:\n{set_aside_markdown(stale)}"
        )
    context.add_output_metadata(
        {
            "pairs": len(table),
            "set_aside": MetadataValue.md(set_aside_markdown(stale)),
            "disagreeing_items": int(disagree[["benchmark_name", "benchmark_id"]].drop_duplicates().shape[0]),
            "disagreements": MetadataValue.md(disagreements_markdown(disagree, viewer_url)),
            "comparisons": MetadataValue.md(
                table[shown].head(40).to_markdown(index=False) if len(table) else "none"
            ),
        }
    )
    return table
