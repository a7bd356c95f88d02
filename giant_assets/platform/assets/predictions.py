"""Assets: one experiment's runs over one benchmark, and their trajectory steps as a table."""

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pandas as pd
from dagster import AssetExecutionContext, AssetObservation, Config, Failure, MetadataValue, Output, asset
from pydantic import Field

from giant_assets.agents.registry import make_agent, save_settings
from giant_assets.batch.failures import failure_report
from giant_assets.batch.journal import Journal
from giant_assets.batch.ratelimit import make_rate_limiter
from giant_assets.batch.records import records_frame, steps_frame
from giant_assets.batch.runner import BatchSettings, run_batch
from giant_assets.experiments.binding import bind
from giant_assets.experiments.declared import unbudgeted
from giant_assets.experiments.itemsample import sample_items
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, StorageResource


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

    Every finished run is journalled as it finishes (``journals/<config_hash>/<benchmark>.jsonl``), so
    an interrupted run resumes without redoing or duplicating anything, and an experiment whose settings
    hash to an existing journal reuses it without a model call. A stored run is reused only for the same
    ``item_fingerprint`` (question and slide); see batch/plan.py for older rows and unreadable slides.

    Batch mode (``batch: true``, ``batch_wait: detach``): a run of this asset submits one round of
    provider batches and ends without a materialization while runs wait on them (an observation names
    the batches); ``batch_rounds_sensor`` launches the cell again when a batch ends.
    """
    name, benchmark = cell(context)
    experiment = config.apply(experiments.get(name))
    for problem in unbudgeted(experiments.file, {name: experiment}):  # before any paid call
        raise Failure(description=problem)
    bind(experiment, storage.root)
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    items = sample_items(items, experiment.item_sample)  # a path review's sample (item_sample), else all
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
        budget_usd=experiment.budget_usd or 0.0,
        item_timeout_s=experiment.item_timeout_s,
        retry_failed=experiment.retry_failed,
        on_progress=_progress_observer(context),
    )
    rounds = None
    if experiment.batch:
        from giant_assets.agents.providers.batching import attach

        folder = journal.path.with_suffix(".batches")
        rounds = attach(agent, folder, experiment, context.log.info)
        rounds.store.partition["partition"] = context.partition_key
        if experiment.batch_wait == "detach" and hasattr(agent, "shown_views"):
            from giant_assets.agents.shown_views import ShownViews

            agent.shown_views = ShownViews(folder / "views")  # replays read their crops back
        # every run waiting for the model goes into the round; a round may take hours
        batch = replace(batch, concurrency=max(1, len(items) * experiment.runs_per_item),
                        item_timeout_s=None, run_scope=rounds.run)  # fmt: skip

    spend_estimate = _estimate_before_spending(experiment, benchmark_items, benchmark, journal)
    if spend_estimate:
        context.log.info(spend_estimate["line"])
    if rounds is not None and spend_estimate:
        problem, caution = batch_budget_check(experiment, rounds.store, spend_estimate)
        if problem:
            raise Failure(description=problem)
        if caution:
            context.log.warning(caution)

    async def go():
        try:
            return await run_batch(
                agent,
                items.to_dict("records"),
                config_hash=config_hash,
                journal=journal,
                settings=batch,
                log=context.log.info,
                warn=context.log.warning,  # retries, with their reason
            )
        finally:
            await agent.aclose()

    outcome = asyncio.run(go())
    if rounds is not None and outcome.waiting:
        batches = sorted(rounds.pending_batches)
        open_since = min((b.get("submitted_at") or 0) for b in rounds.store.open_batches())
        context.log.info(
            f"{outcome.waiting} run(s) wait on {len(batches)} provider batch(es) {', '.join(batches)}: "
            "no materialization now; the batch sensor launches this cell again when a batch ends"
        )
        context.log_event(
            AssetObservation(
                asset_key=context.asset_key,
                partition=context.partition_key,
                metadata={
                    "waiting_runs": outcome.waiting,
                    "finished_runs": outcome.executed + outcome.reused,
                    "batches": MetadataValue.json(batches),
                    "waiting_since": MetadataValue.timestamp(open_since),
                    "rounds_submitted_now": rounds.rounds,
                },
            )
        )
        return
    if getattr(agent, "shown_views", None) is not None:
        agent.shown_views.clear()  # no run of the cell waits any more: nothing will be replayed
    rows = records_frame(outcome.rows)
    rows.insert(0, "experiment", name)
    errors = rows["error_kind"].value_counts().to_dict()
    failures = failure_report(outcome.rows, experiment.max_failed_share)
    metadata = {
        "experiment": name,
        "agent": experiment.agent,
        "model": experiment.model or "-",
        "config_hash": config_hash,
        "journal": str(journal.path),
        "runs": len(rows),
        "executed_now": outcome.executed,
        "reused_from_journal": outcome.reused,
        "legacy_rows_rewritten": outcome.adopted,
        "set_aside_from_journal": outcome.set_aside,
        "slide_unverified": outcome.kept_unverified,
        "errors_by_kind": MetadataValue.json({str(k): int(v) for k, v in errors.items()}),
        "cost_usd_now": round(outcome.cost_usd_new, 6),
        "cost_usd_total": round(float(rows["cost_usd"].sum()), 6),
        "budget_stopped": outcome.budget_stopped,
        "runs_not_started": outcome.not_started,
        "failed_runs": failures.failed,
        "failed_share": round(failures.share, 4),
        **(_batch_metadata(rounds, outcome.cost_usd_new) if rounds is not None else {}),
        **{k: v for k, v in spend_estimate.items() if k != "line"},
    }
    if failures.over:  # a failed run is never a green 0.0: nothing of this partition goes downstream
        again = "only the failed runs are repeated" if experiment.retry_failed else (
            "set retry_failed: true so that the failed runs are repeated"
        )  # fmt: skip
        raise Failure(
            description=(
                f"{name}|{benchmark}: {failures.summary()}; first errors: {failures.first}. "
                f"Finished runs are kept in {journal.path}: fix the cause and materialize again ({again})"
            ),
            metadata=metadata | {"first_errors": MetadataValue.json(failures.first)},
        )
    context.add_output_metadata(metadata)
    yield Output(rows)


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


def _estimate_before_spending(
    experiment: Experiment, items: pd.DataFrame, benchmark: str, journal: Journal
) -> dict[str, Any]:
    """The estimate of what this cell has left to run, logged before the first model call."""
    from giant_assets.agents.estimate import estimate_experiment
    from giant_assets.agents.pricing import load_price_table
    from giant_assets.core.settings import PRICES_ENV, env
    from giant_assets.experiments.spec import MODEL_MODES

    if experiment.agent not in MODEL_MODES:
        return {}
    estimates = estimate_experiment(
        experiment,
        items[items["benchmark_name"] == benchmark],
        journals_dir=journal.path.parent.parent,
        prices=load_price_table(env(PRICES_ENV) or None),
    )
    if not estimates:
        return {}
    est = estimates[0]
    usd = est.usd_batch if experiment.batch else est.usd
    line = (
        f"estimate before spending: {est.runs_pending} run(s) to do, {est.calls.fmt()} model calls, "
        f"{usd.fmt(2, '$')}{' at batch prices' if experiment.batch else ''}, {est.hours.fmt(1)} h"
        + (f" ({'; '.join(est.notes)})" if est.notes else "")
    )
    return {"line": line, "estimate_usd_low": round(usd.low, 4), "estimate_usd_high": round(usd.high, 4)}


def batch_budget_check(
    experiment: Experiment, store: Any, spend_estimate: dict[str, Any]
) -> tuple[str | None, str | None]:
    """(refusal, caution) for a cell about to start in batch mode with a budget.

    Rounds once submitted are paid whatever ``budget_usd`` says (all of a cell's runs start together and
    a round's cost is known only when it ends), so a fresh cell (nothing submitted yet) whose estimate at
    batch prices is above the budget even at its low end is refused before anything is sent; one that
    may exceed it (the high end above) goes on with a warning. A cell with batches already submitted
    (or an intent to submit: a batch a killed process may have sent) goes on: refusing then would leave
    paid rounds unused.
    """
    budget = experiment.budget_usd or 0.0
    if budget <= 0 or store.batches or store.answers or store.intents:
        return None, None
    low, high = spend_estimate["estimate_usd_low"], spend_estimate["estimate_usd_high"]
    if low > budget:
        return (
            f"{experiment.name}: nothing submitted. Batch mode cannot stop rounds once they are submitted, "
            f"and this cell's estimate at batch prices is ${low:.2f}-${high:.2f}, above budget_usd "
            f"${budget:.2f} even at its low end. Raise budget_usd, or run the cell without batch: true "
            "(there the budget stops new runs as it is reached)."
        ), None
    if high > budget:
        return None, (
            f"{experiment.name}: the estimate at batch prices (${low:.2f}-${high:.2f}) may exceed budget_usd "
            f"${budget:.2f}, and batch mode cannot stop rounds once submitted"
        )
    return None, None


def _batch_metadata(rounds: Any, cost_now: float) -> dict[str, Any]:
    """What batch mode did: batches, rounds, and what this run's tokens would have cost synchronously."""
    from giant_assets.agents.providers.batching import BATCH_DISCOUNT

    return {
        "batch_rounds_now": rounds.rounds,
        "batches_total": len(rounds.store.batches),
        "cost_usd_now_sync_equivalent": round(cost_now / BATCH_DISCOUNT, 6),
    }


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
