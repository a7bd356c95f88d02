"""Score each trajectory's viewed regions against reference regions (plain pandas over geometry.roi)."""

from __future__ import annotations

import pandas as pd

from giant_assets.core.settings import REGIONS_ENV, env
from giant_assets.geometry.roi import evaluate_viewed_regions, regions_from_frame
from giant_assets.multipathqa.sample import sample_regions_path
from giant_assets.runs.records import RUN_KEY
from giant_assets.runs.viewed import viewed_rows

ROI_COLUMNS = [
    *RUN_KEY,
    "n_viewed",
    "n_references",
    "best_iou",
    "hit",
    "first_hit_step",
    "n_references_hit",
    "coverage_fraction",
]


def reference_regions_path(configured: str, dataset_source: str) -> str:
    """The regions file to use: the configured one, else ``GIANT_REGIONS_PATH``, else the bundled
    sample's regions when the dataset is the sample; "" when there are none."""
    if configured or env(REGIONS_ENV):
        return configured or env(REGIONS_ENV)
    return str(sample_regions_path()) if dataset_source == "sample" else ""


def score_trajectories(steps: pd.DataFrame, runs: pd.DataFrame, regions: pd.DataFrame) -> pd.DataFrame:
    """One row per run of an item that has reference regions: best IoU, hit, steps until first hit.

    ``steps`` is the ``trajectory_steps`` table; its viewed regions (``runs.viewed``: crops, a patch
    baseline's patches) are scored; ``runs`` lists every run (so a run that viewed nothing still gets a
    row, scored as a miss).
    """
    by_item = {key: frame for key, frame in regions.groupby(["benchmark_name", "benchmark_id"])}
    crops = viewed_rows(steps)
    viewed_by_run = (
        {key: frame.sort_values("step") for key, frame in crops.groupby(RUN_KEY)} if len(crops) else {}
    )
    rows = []
    for run in runs[RUN_KEY].drop_duplicates().itertuples(index=False):
        refs = by_item.get((run.benchmark_name, str(run.benchmark_id)))
        if refs is None:
            continue
        viewed = viewed_by_run.get(tuple(run))
        boxes = (
            viewed[["box_x", "box_y", "box_w", "box_h"]].to_numpy(dtype=float) if viewed is not None else []
        )
        regions_list = regions_from_frame(refs)
        if len(boxes) == 0:
            rows.append(
                {
                    **run._asdict(),
                    "n_viewed": 0,
                    "n_references": len(regions_list),
                    "best_iou": 0.0,
                    "hit": False,
                    "first_hit_step": None,
                    "n_references_hit": 0,
                    "coverage_fraction": 0.0,
                }
            )
            continue
        score = evaluate_viewed_regions(boxes, regions_list)
        rows.append(
            {
                **run._asdict(),
                "n_viewed": len(boxes),
                "n_references": score.n_references,
                "best_iou": score.best_iou,
                "hit": score.hit,
                "first_hit_step": score.first_hit_step,
                "n_references_hit": score.n_references_hit,
                "coverage_fraction": score.coverage_fraction,
            }
        )
    out = pd.DataFrame.from_records(rows, columns=ROI_COLUMNS)
    out["first_hit_step"] = out["first_hit_step"].astype("Int64")
    return out
