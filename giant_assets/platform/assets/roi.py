"""Asset: how well each trajectory looked at the reference regions of its item."""

import pandas as pd
from dagster import AssetExecutionContext, MetadataValue, asset

from giant_assets.eval.roi import ROI_COLUMNS, score_trajectories
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource


@asset(partitions_def=results_partitions, group_name="evaluate", kinds={"shapely"})
def roi_evaluation(
    context: AssetExecutionContext,
    trajectory_steps: pd.DataFrame,
    predictions: pd.DataFrame,
    dataset: MultiPathQAResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """Per run: best IoU of a viewed crop with a reference region, whether any hit, steps to first hit.

    Reference regions come from the dataset resource (``regions_path``), the same source the trajectory
    pictures use; a row may name a built-in or a declared benchmark.
    """
    name, benchmark = cell(context)
    path, regions = dataset.reference_regions(experiments.benchmark_names())
    if regions is None:
        context.log.info(
            "no reference regions configured (regions_path / GIANT_REGIONS_PATH): nothing to score"
        )
        context.add_output_metadata({"scored_runs": 0, "regions_path": "none"})
        return pd.DataFrame(columns=["experiment", *ROI_COLUMNS])
    regions = regions[regions["benchmark_name"] == benchmark]
    scores = score_trajectories(trajectory_steps, predictions, regions)
    scores.insert(0, "experiment", name)
    hits = scores["hit"].astype(bool)
    summary = {
        "regions_path": path,
        "scored_runs": len(scores),
        "hit_rate": float(hits.mean()) if len(scores) else 0.0,
        "mean_best_iou": float(scores["best_iou"].mean()) if len(scores) else 0.0,
        "median_steps_to_first_hit": float(scores["first_hit_step"].median()) if hits.any() else "n/a",
    }
    table = scores.drop(columns=["experiment", "config_hash"]).head(30)
    context.add_output_metadata(summary | {"runs": MetadataValue.md(table.to_markdown(index=False))})
    return scores
