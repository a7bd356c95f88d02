"""Stop an experiment's row (or some of its cells): cancel its backfills, queued and running runs.

Killing the daemon alone stops nothing: the run processes it launched go on paying for model calls.
``stop_experiment`` asks Dagster to end them as the UI's *Terminate* does: a backfill of the row is
marked canceling (the daemon then launches nothing more of it), a queued run is taken off the queue, a
started run is sent a termination through the code server that launched it (the run then fails between
model calls; finished runs are in the journal and answered requests in the reply store, so nothing
paid is lost). A run started from a shell (``dagster asset materialize``) has no code server to ask: it
is named with the advice to interrupt its process (Ctrl-C).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import get_multidimensional_partition_tag

from giant_assets.platform.partitions import BENCHMARK, EXPERIMENT, split_key

ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


@dataclass
class Stopped:
    backfills: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    not_stopped: list[str] = field(default_factory=list)  # runs no code server could terminate


def stop_experiment(instance: DagsterInstance, name: str, benchmarks: list[str] | None = None) -> Stopped:
    """Cancel the backfills, queued and in-progress runs of experiment ``name`` (only ``benchmarks``)."""
    out = Stopped()
    wanted = set(benchmarks or [])

    def ours(partition: str) -> bool:
        try:
            experiment, benchmark = split_key(partition)
        except ValueError:
            return False
        return experiment == name and (not wanted or benchmark in wanted)

    for backfill in instance.get_backfills(status=BulkActionStatus.REQUESTED):
        if any(ours(str(p)) for p in backfill.partition_names or []):
            instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELING))
            out.backfills.append(backfill.backfill_id)
    tags = {get_multidimensional_partition_tag(EXPERIMENT): name}
    for run in instance.get_runs(filters=RunsFilter(statuses=ACTIVE, tags=tags)):
        if wanted and run.tags.get(get_multidimensional_partition_tag(BENCHMARK)) not in wanted:
            continue
        if instance.run_coordinator.cancel_run(run.run_id):
            out.runs.append(run.run_id)
        else:
            out.not_stopped.append(run.run_id)
    return out
