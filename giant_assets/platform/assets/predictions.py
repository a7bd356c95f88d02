"""Assets: one experiment's runs over one benchmark, and their trajectory steps as a table."""

import time
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
from dagster import AssetExecutionContext, AssetObservation, Config, Failure, MetadataValue, Output, asset
from pydantic import Field

from giant_assets.agents.cell import CellFailed, run_cell
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, StorageResource
from giant_assets.runs.records import steps_frame


class PredictionsConfig(Config):
    """Speed settings for this run only; unset fields keep the experiment's own."""

    concurrency: int | None = Field(default=None, ge=1, description="items in flight at once")
    requests_per_minute: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="model requests per minute (0.5: one per 2 min)"
    )
    tokens_per_minute: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="model tokens per minute"
    )
    budget_usd: float | None = Field(
        default=None, ge=0, description="stop starting runs past this; 0 = no cap"
    )
    experiment_budget_usd: float | None = Field(
        default=None, ge=0, description="the same over all the experiment's benchmarks; 0 = no cap"
    )
    attempt_timeout_s: float | None = Field(default=None, gt=0, description="GIANT: seconds per attempt")
    item_timeout_s: float | None = Field(default=None, gt=0, description="seconds per run, all attempts")
    retry_failed: bool | None = Field(default=None, description="re-run runs that ended in an error/timeout")
    max_failed_share: float | None = Field(
        default=None, ge=0, le=1, description="fail the partition when more of its runs failed"
    )

    def apply(self, experiment: Experiment) -> Experiment:
        overrides = {k: v for k, v in self.model_dump().items() if v is not None}
        return experiment.model_copy(update=overrides)


@asset(partitions_def=results_partitions, group_name="evaluate", kinds={"python"}, output_required=False)
def predictions(
    context: AssetExecutionContext,
    config: PredictionsConfig,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> Iterator[Output[pd.DataFrame]]:
    """One row per (item, run) of the experiment: answer text, label, error, tokens, cost, trajectory.

    Every finished run is journalled as it finishes (``journals/<config_hash>/<benchmark>.jsonl``) and
    every model reply is kept before it is used (``<benchmark>.replies.jsonl``), so an interrupted run
    resumes without redoing, duplicating or paying again anything answered, and an experiment whose
    settings hash to an existing journal reuses it without a model call. ``budget_usd`` (and
    ``experiment_budget_usd``) cap what the partition (the experiment) has paid in every run so far.
    See agents/cell.py.

    Batch mode (``batch: true``, ``batch_wait: detach``): a run of this asset submits one round of
    provider batches and ends without a materialization while runs wait on them (an observation names
    the batches); ``batch_rounds_sensor`` launches the cell again when a batch ends.
    """
    name, benchmark = cell(context)
    try:
        result = run_cell(
            config.apply(experiments.get(name)), benchmark_items, benchmark, storage.root,
            experiments_file=experiments.file, partition_key=context.partition_key, log=context.log.info,
            warn=context.log.warning, on_progress=_progress_observer(context),
        )  # fmt: skip
    except CellFailed as failed:
        raise Failure(description=str(failed), metadata=_metadata(failed.metadata)) from None
    if result.waiting is not None:
        waiting = _metadata(result.waiting)
        context.log_event(
            AssetObservation(asset_key=context.asset_key, partition=context.partition_key, metadata=waiting)
        )
        return
    context.add_output_metadata(_metadata(result.metadata))
    yield Output(result.rows)


def _metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values as Dagster metadata: lists and dicts as JSON, ``*_since`` as timestamps."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict | list):
            value = MetadataValue.json(value)
        elif key.endswith("_since"):
            value = MetadataValue.timestamp(value)
        out[key] = value
    return out


PROGRESS_EVERY_S = 60.0  # at most one progress observation a minute in the asset's event history


def _progress_observer(context: AssetExecutionContext) -> Callable[[dict[str, Any]], None]:
    """Progress in the UI as the run goes: an observation of the partition (done / to do, failed, cost so
    far, ETA) at most every PROGRESS_EVERY_S, and a last one when the runs end."""
    last = [float("-inf")]

    def observe(numbers: dict[str, Any]) -> None:
        now = time.monotonic()
        if not numbers["final"] and now - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = now
        metadata = {k: v for k, v in numbers.items() if k != "final" and v is not None}
        context.log_event(
            AssetObservation(asset_key=context.asset_key, partition=context.partition_key, metadata=metadata)
        )

    return observe


@asset(partitions_def=results_partitions, group_name="evaluate", kinds={"pandas"})
def trajectory_steps(context: AssetExecutionContext, predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per agent step (requested level-0 box, level read, tokens, cost, text, error)."""
    steps = steps_frame(predictions)
    context.add_output_metadata(
        {
            "steps": len(steps),
            "crops": int(steps["action"].eq("crop").sum()),
            "runs": int(predictions.shape[0]),
        }
    )
    return steps
