"""One cell (experiment x benchmark) run to its end: agent, estimate, budget, batch mode, runs, result.

``run_cell`` is what the ``predictions`` asset does, in plain Python: bind the experiment's name, make
its agent, estimate what is left before the first model call and refuse a cell that cannot fit its
budget, set up batch mode, run the items (``runs/runner.py``: journal, reply store, budget ledger),
and return the rows with their metadata, or the runs waiting on provider batches. Refusals and
failures raise ``CellFailed`` with a message for the user (the asset turns it into a Dagster Failure).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from giant_assets.agents.pricing import experiment_prices, price_record, unpriced_refusal
from giant_assets.agents.registry import make_agent, save_settings
from giant_assets.core.interrupts import run_interruptible
from giant_assets.eval.scoring import billed_columns
from giant_assets.experiments.binding import bind
from giant_assets.experiments.declared import unbudgeted
from giant_assets.experiments.itemsample import sample_items
from giant_assets.experiments.plugins import PluginError
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.failures import failure_report
from giant_assets.runs.journal import Journal
from giant_assets.runs.ledger import ExperimentLedger, PartitionLedger
from giant_assets.runs.ratelimit import make_rate_limiter
from giant_assets.runs.records import records_frame
from giant_assets.runs.replies import StoreWriteFailed
from giant_assets.runs.runner import BatchOutcome, BatchSettings, run_batch, usd_as_set


class CellFailed(RuntimeError):
    """The cell was refused before any model call, or failed; ``metadata`` says what it did."""

    def __init__(self, message: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.metadata = metadata or {}


@dataclass
class CellResult:
    """Rows and metadata of a finished cell, or (``waiting``) what its runs wait on."""

    rows: pd.DataFrame | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    waiting: dict[str, Any] | None = None  # runs wait on provider batches: no rows now


def run_cell(
    experiment: Experiment,
    benchmark_items: pd.DataFrame,
    benchmark: str,
    data_root: Path,
    *,
    experiments_file: Any = None,
    partition_key: str = "",
    log: Callable[[str], None] = print,
    warn: Callable[[str], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> CellResult:
    """Run every (item, run) of ``benchmark`` not yet journalled; see the module docstring."""
    name = experiment.name
    for problem in unbudgeted(experiments_file, {name: experiment}):  # before any paid call
        raise CellFailed(problem)
    prices = experiment_prices(experiment)
    if problem := unpriced_refusal(experiment, prices):
        raise CellFailed(f"{experiments_file}: {problem}")
    bind(experiment, data_root)
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    items = sample_items(items, experiment.item_sample)  # a path review's sample (item_sample), else all
    config_hash = experiment.config_hash()
    limiter = make_rate_limiter(  # shared through Redis when GIANT_RATE_LIMIT_REDIS_URL is set
        experiment.provider, experiment.model, experiment.api_key_env or f"{experiment.provider}-default",
        experiment.requests_per_minute, experiment.tokens_per_minute,
    )  # fmt: skip
    try:
        agent = make_agent(experiment, benchmark_items[["benchmark_name", "truth_label"]], limiter)
    except PluginError as exc:  # not importable, its factory raised, or it returned no agent
        raise CellFailed(f"{experiments_file}: experiment {name!r}: {exc}") from None
    journal = Journal(data_root / "journals" / config_hash / f"{benchmark}.jsonl")
    save_settings(experiment, journal.path.parent / "settings.json")
    spend_estimate = _estimate_before_spending(experiment, benchmark_items, benchmark, journal, prices)
    if spend_estimate:
        log(spend_estimate["line"])
    settings = BatchSettings(
        runs_per_item=experiment.runs_per_item,
        concurrency=experiment.concurrency,
        budget_usd=experiment.budget_usd or 0.0,
        experiment_budget_usd=experiment.experiment_budget_usd or 0.0,
        reserve_usd=spend_estimate.get("estimate_usd_per_run", 0.0),
        item_timeout_s=experiment.item_timeout_s,
        retry_failed=experiment.retry_failed,
        on_progress=on_progress,
    )
    rounds = None
    if experiment.batch:
        from giant_assets.agents.providers.batching import attach

        folder = journal.path.with_suffix(".batches")
        rounds = attach(agent, folder, experiment, log)
        rounds.store.partition["partition"] = partition_key
        if experiment.batch_wait == "detach" and hasattr(agent, "shown_views"):
            from giant_assets.agents.shown_views import ShownViews

            agent.shown_views = ShownViews(folder / "views")  # replays read their crops back
        # every run waiting for the model goes into the round; a round may take hours. No ledger check
        # as runs start: a round once submitted is paid, and a run re-started to collect its answer from
        # an ended batch must start (the budget is checked before the first round, below)
        settings = replace(settings, concurrency=max(1, len(items) * experiment.runs_per_item),
                           item_timeout_s=None, run_scope=rounds.run, budget_usd=0.0,
                           experiment_budget_usd=0.0, reserve_usd=0.0)  # fmt: skip
        if spend_estimate:
            problem, caution = batch_budget_check(experiment, rounds.store, spend_estimate)
            if problem:
                raise CellFailed(problem)
            if caution and warn is not None:
                warn(caution)
    elif spend_estimate:
        problem = budget_refusal(experiment, journal, spend_estimate)
        if problem:
            raise CellFailed(problem)

    async def go() -> BatchOutcome:
        try:
            return await run_batch(
                agent, items.to_dict("records"), config_hash=config_hash, journal=journal, settings=settings,
                log=log, warn=warn,  # retries, with their reason
            )  # fmt: skip
        finally:
            await agent.aclose()

    try:
        outcome = run_interruptible(go())  # Ctrl-C never taken for a failed write (core/interrupts.py)
    except StoreWriteFailed as exc:
        raise CellFailed(f"{name}|{benchmark}: {exc}") from None
    if rounds is not None and outcome.waiting:
        batches = sorted(rounds.pending_batches)
        log(
            f"{outcome.waiting} run(s) wait on {len(batches)} provider batch(es) {', '.join(batches)}: "
            "no materialization now; the batch sensor launches this cell again when a batch ends"
        )
        return CellResult(
            waiting={
                "waiting_runs": outcome.waiting,
                "finished_runs": outcome.executed + outcome.reused,
                "batches": batches,
                "waiting_since": min((b.get("submitted_at") or 0) for b in rounds.store.open_batches()),
                "rounds_submitted_now": rounds.rounds,
            }
        )
    if getattr(agent, "shown_views", None) is not None:
        agent.shown_views.clear()  # no run of the cell waits any more: nothing will be replayed
    rows = records_frame(outcome.rows)
    rows.insert(0, "experiment", name)
    errors = rows["error_kind"].value_counts().to_dict()
    failures = failure_report(outcome.rows, experiment.max_failed_share)
    # a run of a model without a price has cost NaN: totals over it are unknown (NaN), never $0
    counted = float(rows.loc[rows["error_kind"].isna(), "cost_usd"].sum(skipna=False))
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
        "errors_by_kind": {str(k): int(v) for k, v in errors.items()},
        "cost_usd_now": round(outcome.cost_usd_new, 6),
        "cost_usd_total": round(float(rows["cost_usd"].sum(skipna=False)), 6),
        # what the provider billed for this cell, every process and run (failed, killed, retried too)
        **billed_columns(outcome.billed_usd, counted),
        "price": price_record(experiment, prices),
        "model_calls_replayed": outcome.replayed_calls,
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
        raise CellFailed(
            f"{name}|{benchmark}: {failures.summary()}; first errors: {failures.first}. "
            f"Finished runs are kept in {journal.path}: fix the cause and materialize again ({again})",
            metadata | {"first_errors": failures.first},
        )
    return CellResult(rows=rows, metadata=metadata)


def _estimate_before_spending(
    experiment: Experiment, items: pd.DataFrame, benchmark: str, journal: Journal, prices: Any
) -> dict[str, Any]:
    """The estimate of what this cell has left to run, logged before the first model call."""
    from giant_assets.agents.estimate import estimate_experiment

    if not experiment.calls_model:
        return {}
    estimates = estimate_experiment(
        experiment,
        items[items["benchmark_name"] == benchmark],
        journals_dir=journal.path.parent.parent,
        prices=prices,
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
    per_run = (usd.low + usd.high) / 2 / est.runs_pending if est.runs_pending and est.priced else 0.0
    return {
        "line": line,
        "estimate_usd_low": round(usd.low, 4),
        "estimate_usd_high": round(usd.high, 4),
        "estimate_usd_per_run": round(per_run, 6),
    }


def budget_refusal(experiment: Experiment, journal: Journal, spend_estimate: dict[str, Any]) -> str | None:
    """Why a cell may not start (synchronous mode): what is left of a budget, after what the partition
    (or the experiment) has paid so far, is below the estimate's low end; None when it may."""
    low, high = spend_estimate["estimate_usd_low"], spend_estimate["estimate_usd_high"]
    for what, budget, paid in (
        ("budget_usd", experiment.budget_usd or 0.0, lambda: PartitionLedger(journal.path).spent()),
        ("experiment_budget_usd", experiment.experiment_budget_usd or 0.0,
         lambda: ExperimentLedger(journal.path.parent).spent()),
    ):  # fmt: skip
        if budget <= 0 or low <= 0:
            continue
        spent = paid()
        if low > budget - spent:
            return (
                f"{experiment.name}: nothing sent. The estimate of what is left is ${low:.2f}-${high:.2f}, "
                f"above what is left of {what} {usd_as_set(budget)} (${spent:.4f} paid so far) even at its "
                f"low end. Raise {what} to run it."
            )
    return None


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
            f"{usd_as_set(budget)} even at its low end. Raise budget_usd, or run the cell without batch: "
            "true (there the budget stops new runs as it is reached)."
        ), None
    if high > budget:
        return None, (
            f"{experiment.name}: the estimate at batch prices (${low:.2f}-${high:.2f}) may exceed budget_usd "
            f"{usd_as_set(budget)}, and batch mode cannot stop rounds once submitted"
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
