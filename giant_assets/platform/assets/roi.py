"""Asset: how well each trajectory looked at the reference regions of its item."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, asset
from pydantic import Field

from giant_assets.eval.roi import ROI_COLUMNS, reference_regions_path, score_trajectories
from giant_assets.eval.scoring import trajectory_steps
from giant_assets.geometry.roi import load_reference_regions
from giant_assets.platform.partitions import benchmark_partitions
from giant_assets.platform.resources import MultiPathQAResource, StorageResource


class RoiConfig(Config):
    regions_path: str = Field(
        default="",
        description="CSV/JSON of reference regions (level-0 px); empty = GIANT_REGIONS_PATH, else the "
        "bundled sample's regions when the dataset is the sample",
    )


@asset(partitions_def=benchmark_partitions, group_name="evaluate", compute_kind="shapely")
def roi_evaluation(
    context: AssetExecutionContext,
    config: RoiConfig,
    predictions: pd.DataFrame,
    dataset: MultiPathQAResource,
    storage: StorageResource,
) -> pd.DataFrame:
    """Per run: best IoU of a viewed crop with a reference region, whether any hit, steps to first hit."""
    path = reference_regions_path(config.regions_path, dataset.source)
    if not path:
        context.log.info(
            "no reference regions configured (regions_path / GIANT_REGIONS_PATH): nothing to score"
        )
        context.add_output_metadata({"scored_runs": 0, "regions_path": "none"})
        return pd.DataFrame(columns=ROI_COLUMNS)
    regions = load_reference_regions(path)
    regions = regions[regions["benchmark_name"] == context.partition_key]
    scores = score_trajectories(trajectory_steps(predictions), predictions, regions)
    summary = {
        "regions_path": path,
        "scored_runs": len(scores),
        "hit_rate": float(scores["hit"].mean()) if len(scores) else 0.0,
        "mean_best_iou": float(scores["best_iou"].mean()) if len(scores) else 0.0,
        "median_steps_to_first_hit": float(scores["first_hit_step"].median())
        if scores["hit"].any()
        else "n/a",
    }
    table = scores.drop(columns=["config_hash"]).head(30)
    context.add_output_metadata(summary | {"runs": MetadataValue.md(table.to_markdown(index=False))})
    return scores
