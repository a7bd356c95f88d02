"""Assets: one experiment's runs over one benchmark, and their trajectory steps as a table."""

import asyncio

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, asset
from pydantic import Field

from giant_assets.agents.registry import make_agent, save_settings
from giant_assets.batch.journal import Journal
from giant_assets.batch.ratelimit import make_rate_limiter
from giant_assets.batch.records import records_frame, steps_frame
from giant_assets.batch.runner import BatchSettings, run_batch
from giant_assets.experiments.binding import bind
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, StorageResource


class PredictionsConfig(Config):
    """Speed settings for this run only; unset fields keep the experiment's own."""

    concurrency: int | None = Field(default=None, ge=1, description="items in flight at once")
    requests_per_minute: float | None = Field(default=None, gt=0, description="model requests per minute")
    tokens_per_minute: float | None = Field(default=None, gt=0, description="model tokens per minute")
    budget_usd: float | None = Field(
        default=None, ge=0, description="stop starting runs past this; 0 = no cap"
    )
    item_timeout_s: float | None = Field(default=None, gt=0)
    retry_failed: bool | None = Field(default=None, description="re-run runs that ended in an error/timeout")

    def apply(self, experiment: Experiment) -> Experiment:
        overrides = {k: v for k, v in self.model_dump().items() if v is not None}
        return experiment.model_copy(update=overrides)


@asset(partitions_def=results_partitions, group_name="evaluate", kinds={"python"})
def predictions(
    context: AssetExecutionContext,
    config: PredictionsConfig,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """One row per (item, run) of the experiment: answer text, label, error, tokens, cost, trajectory.

    Every finished run is journalled as it finishes (``journals/<config_hash>/<benchmark>.jsonl``), so
    an interrupted run resumes without redoing or duplicating anything, and an experiment whose settings
    hash to an existing journal reuses it without a model call.
    """
    name, benchmark = cell(context)
    experiment = config.apply(experiments.get(name))
    bind(experiment, storage.root)
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    config_hash = experiment.config_hash()
    limiter = make_rate_limiter(  # shared through Redis when GIANT_RATE_LIMIT_REDIS_URL is set
        experiment.provider, experiment.model, experiment.api_key_env or f"{experiment.provider}-default",
        experiment.requests_per_minute, experiment.tokens_per_minute,
    )  # fmt: skip
    agent = make_agent(experiment, benchmark_items[["benchmark_name", "truth_label"]], limiter)
    journal = Journal(storage.root / "journals" / config_hash / f"{benchmark}.jsonl")
    save_settings(experiment, journal.path.parent / "settings.json")
    batch = BatchSettings(
        runs_per_item=experiment.runs_per_item,
        concurrency=experiment.concurrency,
        budget_usd=experiment.budget_usd,
        item_timeout_s=experiment.item_timeout_s,
        retry_failed=experiment.retry_failed,
    )

    async def go():
        try:
            return await run_batch(
                agent,
                items.to_dict("records"),
                config_hash=config_hash,
                journal=journal,
                settings=batch,
                log=context.log.info,
            )
        finally:
            await agent.aclose()

    outcome = asyncio.run(go())
    rows = records_frame(outcome.rows)
    rows.insert(0, "experiment", name)
    errors = rows["error_kind"].value_counts().to_dict()
    context.add_output_metadata(
        {
            "experiment": name,
            "agent": experiment.agent,
            "model": experiment.model or "-",
            "config_hash": config_hash,
            "journal": str(journal.path),
            "runs": len(rows),
            "executed_now": outcome.executed,
            "reused_from_journal": outcome.reused,
            "errors_by_kind": MetadataValue.json({str(k): int(v) for k, v in errors.items()}),
            "cost_usd_now": round(outcome.cost_usd_new, 6),
            "cost_usd_total": round(float(rows["cost_usd"].sum()), 6),
            "budget_stopped": outcome.budget_stopped,
            "runs_not_started": outcome.not_started,
        }
    )
    return rows


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
