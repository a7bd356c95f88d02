"""Asset: the paper's figures (accuracy vs iterations, vs thumbnail resolution, GIANT vs the random
ablation, x1 vs x5) drawn from the stored metrics, with the paper's numbers beside ours."""

import pandas as pd
from dagster import AssetExecutionContext, MetadataValue, asset

from giant_assets.eval.figures import FIGURES, figure_points
from giant_assets.eval.itemsets import split_current
from giant_assets.platform.automation import FOLLOWS_RESULTS
from giant_assets.platform.resources import ExperimentsResource, StorageResource


@asset(group_name="compare", kinds={"pandas", "matplotlib"}, automation_condition=FOLLOWS_RESULTS)
def paper_figures(
    context: AssetExecutionContext,
    benchmark_metrics: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """The numbers behind the paper's figures, one row per point (figure, series, x, benchmark, bootstrap
    mean and std, experiment, source ``ours`` or the paper's), and the figures as PNGs in
    ``results/figures/`` (with ``paper_figures.csv``), shown in this asset's metadata.

    Only cells over today's items of declared experiments are drawn (as the leaderboard): an experiment
    not run yet on a benchmark has no point there. x comes from each experiment's settings (max_steps,
    thumbnail_size, runs_per_item), never from its name (eval/figures.py)."""
    from giant_assets.report.charts import png_markdown  # matplotlib: when drawing
    from giant_assets.report.paper_figures import write_figures

    declared = experiments.all()
    shown, _ = split_current(
        benchmark_metrics,
        benchmark_items,
        set(declared),
        str(experiments.file),
        experiments.benchmark_names(),
    )

    points = figure_points(shown, declared)
    paths = write_figures(points, storage.root / "results" / "figures")
    ours = points[points["source"] == "ours"]
    metadata = {
        "points_ours": len(ours),
        "points_paper": len(points) - len(ours),
        "folder": MetadataValue.path(str(paths["iterations"].parent)),
    }
    for figure, path in paths.items():
        title = FIGURES[figure][0]
        numbers = points[points["figure"] == figure].drop(columns="figure")
        table = numbers.to_markdown(index=False, floatfmt=".1f") if len(numbers) else "no points"
        metadata[figure] = MetadataValue.md(f"**{title}**\n\n{png_markdown(path, figure)}\n\n{table}")
        metadata[f"{figure}_png"] = MetadataValue.path(str(path))
    context.add_output_metadata(metadata)
    return points
