"""Where each cell of the results grid stands: ``giant-experiments status`` and the failed cells that
``leaderboard_stale`` lists beside the set-aside ones.

A cell's state comes from its journal (eval/progress.py), its stored ``benchmark_metrics`` (over which
item set) and the Dagster instance (its runs, the latest materializations and the progress observations
the predictions asset logs as it goes):

- ``running``: a run of the cell is in progress: done, failed, in flight, spent and ETA from its latest
  progress observation (the journal's counts until the first one);
- ``waiting``: the cell's latest run ended with runs waiting on provider batches (batch mode, detach):
  the batch sensor launches it again when a batch ends;
- ``failed``: the cell's latest run failed (the reason from its failure event), or its journal holds more
  failed runs than ``max_failed_share``: with the command that retries it;
- ``stale``: scored over another item set than today's (eval/itemsets.py);
- ``complete``: scored over today's items;
- ``reviewed``: a path review (agent ``path_review``) whose runs are journalled: reviews are not scored,
  so it never turns ``complete``; the ``path_review`` asset parses the regions;
- ``to do``: nothing scored yet (not started, stopped by the budget, or killed): how far its journal got;
- ``unusable``: a plug-in agent whose module cannot be found (``plug-in cannot be imported: module X``):
  no config hash, so no journal to read; ``giant-experiments check`` says why.

Only a failed cell carries the command that retries it (a stale one the command that re-runs it): a cell
never started needs no retry. ``experiment_lines`` folds the cells into one line per experiment.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance, RunsFilter
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES, DagsterRunStatus

from giant_assets.core.money import usd_text
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.itemsets import (
    CURRENT,
    SET_ASIDE_COLUMNS,
    cell_status,
    current_item_sets,
    rerun_command,
)
from giant_assets.eval.progress import JournalProgress, journal_progress, todays_items
from giant_assets.experiments.plugins import unimportable
from giant_assets.experiments.spec import Experiment

RUNNING, WAITING, FAILED, STALE, COMPLETE, REVIEWED, TO_DO, UNUSABLE = (
    "running",
    "waiting",
    "failed",
    "stale",
    "complete",
    "reviewed",
    "to do",
    "unusable",
)
STATES = (COMPLETE, REVIEWED, RUNNING, WAITING, FAILED, STALE, TO_DO, UNUSABLE)
PARTITION_TAG = "dagster/partition"
WAITING_STATUSES = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, *IN_PROGRESS_RUN_STATUSES)
REASON_CHARS = 600


@dataclass
class CellState:
    """One cell: its state, what it has done, and what to do about it."""

    experiment: str
    benchmark: str
    state: str
    detail: str
    retry: str = ""
    spent_usd: float = 0.0  # of the cell's journalled runs of today's items

    @property
    def partition(self) -> str:
        return f"{self.benchmark}|{self.experiment}"

    def line(self) -> str:
        text = f"{self.experiment:<24} {self.benchmark:<18} {self.state:<9} {self.detail}"
        label = "re-run" if self.state == STALE else "retry"
        return text + (f"\n{'':<53} {label}: {self.retry}" if self.retry else "")


def experiment_lines(states: list[CellState]) -> list[str]:
    """One line per experiment: how many of its cells are in each state, and what it has spent."""
    lines = []
    for name in dict.fromkeys(s.experiment for s in states):
        mine = [s for s in states if s.experiment == name]
        counts = ", ".join(f"{n} {state}" for state in STATES if (n := sum(s.state == state for s in mine)))
        spent = usd_text(sum(s.spent_usd for s in mine))
        why = next((s.detail for s in mine if s.state == UNUSABLE), "")
        lines.append(f"{name:<24} {len(mine)} cell(s): {counts}; {spent} spent" + (f"; {why}" if why else ""))
    return lines


def grid_states(
    instance: DagsterInstance | None,
    data_dir: Path,
    declared: dict[str, Experiment],
    items: pd.DataFrame,
    names: list[str] | None = None,
) -> list[CellState]:
    """The state of every cell of ``names`` (default every declared experiment) x today's benchmarks."""
    metrics = _stored_metrics(data_dir)
    scored = _scored_cells(metrics, items, set(declared))
    benchmarks = sorted(items["benchmark_name"].astype(str).unique())
    chosen = names or sorted(declared)
    records = CellRecords.of(instance, [f"{b}|{name}" for name in chosen for b in benchmarks])
    todays = todays_items(items)
    out = []
    for name in chosen:
        why = unimportable(declared[name].agent)
        for benchmark in benchmarks:
            if why:
                out.append(CellState(name, benchmark, UNUSABLE, why))
                continue
            progress = journal_progress(
                declared[name], benchmark, todays.get(benchmark, {}), data_dir / "journals"
            )
            state = _state(records, declared[name], benchmark, progress, scored.get((name, benchmark)))
            state.spent_usd = progress.cost_usd
            folder = data_dir / "journals" / declared[name].config_hash() / f"{benchmark}.batches"
            out.append(_with_contradictions(state, folder))
    return out


@dataclass
class CellRecords:
    """What the instance holds of a set of cells, asked in three queries for all of them: each cell's
    latest run, and which cells have a ``predictions`` observation or a ``benchmark_metrics``
    materialization at all (most cells of a grid have neither, and are then never asked about one by
    one: ``giant-experiments status`` and the leaderboard's failed cells asked 3 queries per cell)."""

    instance: DagsterInstance | None
    latest_runs: dict[str, Any]
    observed: Collection[str]
    scored: Collection[str]

    @classmethod
    def of(cls, instance: DagsterInstance | None, keys: list[str]) -> CellRecords:
        if instance is None or not keys:
            return cls(instance, {}, (), ())
        latest: dict[str, Any] = {}
        for run in instance.get_runs(RunsFilter(tags={PARTITION_TAG: keys})):  # newest first
            latest.setdefault(run.tags.get(PARTITION_TAG), run)
        wanted = set(keys)
        observed = instance.get_latest_storage_id_by_partition(
            AssetKey("predictions"), DagsterEventType.ASSET_OBSERVATION, wanted
        )
        scored = instance.get_latest_storage_id_by_partition(
            AssetKey("benchmark_metrics"), DagsterEventType.ASSET_MATERIALIZATION, wanted
        )
        return cls(instance, latest, set(observed), set(scored))

    def observation(self, key: str) -> dict[str, Any]:
        """The cell's latest ``predictions`` observation (see ``_latest_observation``)."""
        return _latest_observation(self.instance, key) if key in self.observed else {}

    def scored_at(self, key: str) -> float | None:
        """When the cell's ``benchmark_metrics`` were last materialized."""
        if key not in self.scored:
            return None
        return _latest_materialization_time(self.instance, "benchmark_metrics", key)


def _with_contradictions(state: CellState, folder: Path) -> CellState:
    """``state`` naming each open batch of the cell's store that contradicts itself (a look showed it
    ended, a later one running again)."""
    if not folder.is_dir():
        return state
    from giant_assets.agents.providers.batching import BatchStore
    from giant_assets.platform.batch_sensor import contradiction

    lines = [
        contradiction(b, b["contradicted"].get("status", "running"))
        for b in BatchStore(folder).open_batches()
        if isinstance(b.get("contradicted"), dict)
    ]
    return replace(state, detail="; ".join([state.detail, *lines])) if lines else state


def failed_cells(
    instance: DagsterInstance | None,
    data_dir: Path,
    declared: dict[str, Experiment],
    items: pd.DataFrame,
    set_aside: Collection[str] = (),
) -> pd.DataFrame:
    """The failed cells with no result over today's items, as set-aside rows (status ``failed``); cells
    whose partition is in ``set_aside`` (already listed as stale or removed, with what re-runs them) are
    left out."""
    rows = []
    for s in grid_states(instance, data_dir, declared, items):
        if s.state != FAILED or s.partition in set(set_aside):
            continue
        n_now = int((items["benchmark_name"].astype(str) == s.benchmark).sum())
        rows.append(
            {"experiment": s.experiment, "benchmark_name": s.benchmark, "status": FAILED,
             "item_set_fingerprint": None, "current_item_set_fingerprint": None, "n_items": 0,
             "n_items_now": n_now, "partition": s.partition, "reason": s.detail, "rerun": s.retry}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(SET_ASIDE_COLUMNS))


def _stored_metrics(data_dir: Path) -> pd.DataFrame:
    store = ParquetStore(data_dir)
    return store.read("benchmark_metrics") if store.partitions("benchmark_metrics") else pd.DataFrame()


def _scored_cells(metrics: pd.DataFrame, items: pd.DataFrame, declared: set[str]) -> dict[tuple, dict]:
    """(experiment, benchmark) -> its stored metrics row and whether it is current."""
    if metrics.empty:
        return {}
    status = cell_status(metrics, current_item_sets(items), declared)
    return {
        (str(r["experiment"]), str(r["benchmark_name"])): dict(r) | {"_current": s == CURRENT}
        for (_, r), s in zip(metrics.iterrows(), status, strict=True)
    }


def _state(
    records: CellRecords,
    exp: Experiment,
    benchmark: str,
    progress: JournalProgress,
    scored: dict[str, Any] | None,
) -> CellState:
    name, key = exp.name, f"{benchmark}|{exp.name}"
    instance, latest = records.instance, records.latest_runs.get(key)
    observed = records.observation(key)
    scored_at = records.scored_at(key)
    retry = rerun_command(name, benchmark)
    if latest is not None and latest.status in WAITING_STATUSES:
        numbers = observed if observed.get("run_id") == latest.run_id else {}
        return CellState(name, benchmark, RUNNING, _running(numbers, progress, latest.status.value))
    if (
        latest is not None
        and latest.status == DagsterRunStatus.FAILURE
        and _after(latest, instance, scored_at)
    ):
        reason = _failure_reason(instance, latest.run_id)
        return CellState(name, benchmark, FAILED, f"run {latest.run_id[:8]} failed: {reason}",
                         _retry(exp, progress, retry))  # fmt: skip
    if observed.get("waiting_runs") and observed.get("timestamp", 0) > (scored_at or 0):
        since = observed.get("waiting_since")
        batches = ", ".join(observed.get("batches") or []) or "?"
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(since)) if since else "?"
        detail = (
            f"{observed['waiting_runs']} run(s) wait on provider batch(es) {batches} since {when}; "
            f"{progress.answered}/{progress.runs_needed} runs answered (the batch sensor launches the cell "
            "when a batch ends; `giant-experiments batches` lists them)"
        )
        return CellState(name, benchmark, WAITING, detail)
    if progress.failures.over and not (scored and scored["_current"]):
        detail = f"{progress.failures.summary()}; first errors: {'; '.join(progress.failures.first)}"
        return CellState(name, benchmark, FAILED, detail[:REASON_CHARS], _retry(exp, progress, retry))
    if scored is not None:
        paper = scored.get("paper_format")
        score = f"{scored.get('metric_type', 'score')} {paper}, " if isinstance(paper, str) else ""
        done = (
            f"{score}{progress.answered}/{progress.runs_needed} runs answered, {usd_text(progress.cost_usd)}"
        )
        if scored["_current"]:
            return CellState(name, benchmark, COMPLETE, done)
        return CellState(name, benchmark, STALE, f"scored over another item set than today's ({done})", retry)
    if exp.agent == "path_review" and progress.journalled:
        detail = (
            f"{progress.answered}/{progress.runs_needed} review runs answered, {progress.failures.failed} "
            f"failed, {usd_text(progress.cost_usd)} spent (path reviews are not scored; the path_review "
            "asset parses their regions)"
        )
        return CellState(name, benchmark, REVIEWED, detail)
    if progress.journalled:
        detail = (
            f"{progress.answered}/{progress.runs_needed} runs answered, {progress.failures.failed} failed, "
            f"{usd_text(progress.cost_usd)} spent; not scored yet (stopped by the budget, killed, or in a "
            "run this instance does not know)"
        )
        return CellState(name, benchmark, TO_DO, detail)
    return CellState(name, benchmark, TO_DO, f"not started ({progress.runs_needed} runs)")


def _running(numbers: dict[str, Any], progress: JournalProgress, status: str) -> str:
    if not numbers:
        return (
            f"{status.lower()}: {progress.answered}/{progress.runs_needed} runs answered, "
            f"{progress.failures.failed} failed, {usd_text(progress.cost_usd)} spent "
            "(no progress reported yet)"
        )
    n, eta = numbers.get, numbers.get("eta_s")
    return (
        f"{n('runs_done', 0)}/{n('runs_to_do', '?')} runs done, {n('failed', 0)} failed, {n('in_flight', 0)} "
        f"in flight, {usd_text(n('cost_usd_so_far', 0.0))} spent this run, ETA "
        f"{_duration(eta) if eta else 'unknown'} (reported {_ago(n('timestamp'))})"
    )


def _retry(exp: Experiment, progress: JournalProgress, command: str) -> str:
    hint = ""
    if progress.failures.failed and not exp.retry_failed:
        hint = " (set retry_failed: true on the experiment so that its failed runs are repeated)"
    return f"fix the cause, then {command}{hint}"


def _latest_observation(instance: DagsterInstance | None, key: str) -> dict[str, Any]:
    """The metadata values of the cell's latest ``predictions`` observation, with its run and time."""
    if instance is None:
        return {}
    found = instance.fetch_observations(
        AssetRecordsFilter(asset_key=AssetKey("predictions"), asset_partitions=[key]), limit=1
    ).records
    if not found:
        return {}
    record = found[0]
    observation = record.asset_observation
    values = {k: v.value for k, v in (observation.metadata if observation else {}).items()}
    return values | {"run_id": record.run_id, "timestamp": record.timestamp}


def _latest_materialization_time(instance: DagsterInstance | None, asset: str, key: str) -> float | None:
    if instance is None:
        return None
    found = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    return found[0].timestamp if found else None


def _after(run: Any, instance: DagsterInstance | None, scored_at: float | None) -> bool:
    """The failed run is newer than the cell's latest score (else the score stands)."""
    if scored_at is None or instance is None:
        return True
    record = instance.get_run_record_by_id(run.run_id)
    started = (record.start_time or record.create_timestamp.timestamp()) if record else 0.0
    return started > scored_at


def _failure_reason(instance: DagsterInstance | None, run_id: str) -> str:
    """The description of the run's first step failure (a ``Failure`` raised by the asset), else its
    error message, else the run failure's message."""
    if instance is None:
        return "?"
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        data = entry.dagster_event.step_failure_data if entry.dagster_event else None
        if data is not None:
            text = data.user_failure_data.description if data.user_failure_data else None
            text = text or (data.error.message if data.error else "")
            return " ".join(str(text).split())[:REASON_CHARS]
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE):
        return " ".join(str(entry.dagster_event.message or entry.user_message).split())[:REASON_CHARS]
    return "no failure event recorded"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )


def _ago(timestamp: float | None) -> str:
    return f"{_duration(max(0.0, time.time() - timestamp))} ago" if timestamp else "?"
