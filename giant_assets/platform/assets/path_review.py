"""Assets: the path review's reported regions and structured answers (eval/path_review.py)."""

import json

import pandas as pd
from dagster import AssetExecutionContext, AssetOut, MetadataValue, Output, multi_asset

from giant_assets.eval.path_review import ANSWER_COLUMNS, MIN_IOU, REGION_COLUMNS, REGION_TEXTS, review_frames
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource

SHOWN_PROBLEMS = 30  # listed in the metadata and the log; all of them are in path_review_answers


@multi_asset(
    outs={
        "path_review_regions": AssetOut(
            description="per reported region of a path-review run: level-0 box, the model's texts, "
            "valid/problem, best IoU with a crop it viewed and that crop's step"
        ),
        "path_review_answers": AssetOut(
            description="per path-review run: organ, diagnosis, confidence, key findings, how many of "
            "its regions it viewed, every problem of its reply"
        ),
    },
    partitions_def=results_partitions,
    group_name="evaluate",
    compute_kind="pandas",
)
def path_review(
    context: AssetExecutionContext,
    trajectory_steps: pd.DataFrame,
    predictions: pd.DataFrame,
    experiments: ExperimentsResource,
):
    """The review JSON of each run parsed strictly (a malformed region is kept and named, with its item
    and field) and each region set against the crops viewed; empty for an experiment of another agent."""
    name, benchmark = cell(context)
    if experiments.get(name).agent != "path_review":
        empty = {"note": f"{name} is not a path-review experiment (agent: path_review)"}
        yield Output(
            pd.DataFrame(columns=["experiment", *REGION_COLUMNS]), "path_review_regions", metadata=empty
        )
        yield Output(
            pd.DataFrame(columns=["experiment", *ANSWER_COLUMNS]), "path_review_answers", metadata=empty
        )
        return
    regions, answers = review_frames(trajectory_steps, predictions)
    regions.insert(0, "experiment", name)
    answers.insert(0, "experiment", name)
    problems = [
        f"{benchmark} item {row.benchmark_id} run {row.run_index}: {problem}"
        for row in answers.itertuples(index=False)
        for problem in json.loads(row.problems or "[]")
    ]
    for line in problems[:SHOWN_PROBLEMS]:
        context.log.warning(f"path review reply: {line}")
    valid = regions[regions["valid"].fillna(False).astype(bool)]
    viewed = valid["viewed"].fillna(False).astype(bool)
    summary = {
        "runs": len(answers),
        "runs_parsed": int(answers["parsed"].sum()),
        "regions": len(regions),
        "regions_valid": len(valid),
        "regions_viewed": int(viewed.sum()),
        "share_regions_viewed": float(viewed.mean()) if len(valid) else "n/a",
        "min_iou_viewed": MIN_IOU,
        "problems": len(problems),
        "problems_first": MetadataValue.md("\n".join(f"- {p}" for p in problems[:SHOWN_PROBLEMS]) or "none"),
    }
    table = regions.drop(columns=["experiment", "config_hash", *REGION_TEXTS]).head(30)
    yield Output(
        regions, "path_review_regions", metadata=summary | {"preview": MetadataValue.md(table.to_markdown())}
    )
    yield Output(answers, "path_review_answers", metadata=summary)
