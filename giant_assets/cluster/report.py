"""What a cluster run did, read back from the shared instance: which worker ran which step, run status."""

from __future__ import annotations

import time
from collections.abc import Sequence

from dagster import DagsterEventType, DagsterInstance, DagsterRun, RunsFilter

FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
WORKER_KEY = "Celery worker"  # metadata of dagster-celery's "Executing steps ... in celery worker" event


def step_workers(instance: DagsterInstance, run_id: str) -> dict[str, str]:
    """step key -> the Celery worker (``name@host``) that executed it, from the run's event log."""
    workers = {}
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        metadata = event.engine_event_data.metadata if event and event.engine_event_data else {}
        if WORKER_KEY in metadata and event.step_key:
            workers[event.step_key] = str(metadata[WORKER_KEY].value)
    return workers


def job_runs(instance: DagsterInstance, job: str, tags: dict[str, str] | None = None) -> list[DagsterRun]:
    return list(instance.get_runs(RunsFilter(job_name=job, tags=tags or {})))


def wait_for_runs(
    instance: DagsterInstance, job: str, count: int, timeout_s: float, tags: dict[str, str] | None = None
) -> list[DagsterRun]:
    """Wait until ``count`` runs of ``job`` exist and all have finished; TimeoutError naming the laggards."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = job_runs(instance, job, tags)
        if len(runs) >= count and all(r.status.value in FINISHED for r in runs):
            return runs
        if time.monotonic() > deadline:
            pending = [f"{r.tags.get('dagster/partition')}: {r.status.value}" for r in runs]
            raise TimeoutError(
                f"{job}: {len(runs)}/{count} runs after {timeout_s:.0f}s, not all done: {pending}"
            )
        time.sleep(1.0)


def peak_in_window(times: Sequence[float], window_s: float) -> int:
    """Most events within any half-open interval ``window_s`` long."""
    ordered = sorted(times)
    start, peak = 0, 0
    for end, t in enumerate(ordered):
        while t - ordered[start] >= window_s:
            start += 1
        peak = max(peak, end - start + 1)
    return peak


def max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """Most intervals (start, end) open at one moment."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak
