"""Stop an experiment's row (or some of its cells): cancel its backfills, queued and running runs.

Killing the daemon alone stops nothing: the run processes it launched go on paying for model calls.
``stop_experiment`` asks Dagster to end them as the UI's *Terminate* does: a backfill of the row is
marked canceling (the daemon then launches nothing more of it), a queued run is taken off the queue, a
started run is sent a termination through the code server that launched it (the run then fails between
model calls; finished runs are in the journal and answered requests in the reply store, so nothing
paid is lost). A run started from a shell (``dagster asset materialize``) has no code server to ask: it
is named with the advice to interrupt its process (Ctrl-C).

A backfill is canceled whole (Dagster then cancels every run it launched), so with ``benchmarks`` one
that also holds other cells is left running: only its runs of the chosen cells are canceled, and the
chosen cells it has not launched yet are named (stop again once they are launched).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.storage.tags import PARTITION_NAME_TAG, get_multidimensional_partition_tag

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
    kept_backfills: list[str] = field(default_factory=list)  # also hold other cells: left running
    not_launched: list[str] = field(default_factory=list)  # chosen cells a kept backfill has yet to launch


def backfill_partitions(backfill: PartitionBackfill) -> list[str]:
    """The partition keys a backfill targets: a job backfill's (``dagster job backfill``, the job page)
    or, for an asset backfill (the asset pages' *Materialize*), those of any of its assets."""
    if backfill.partition_names is not None:
        return [str(p) for p in backfill.partition_names]
    data = backfill.asset_backfill_data  # None when stored only serialized (older Dagster): not read here
    if data is None:
        return []
    keys = {str(k) for subset in data.target_subset.partitions_subsets_by_asset_key.values()
            for k in subset.get_partition_keys()}  # fmt: skip
    return sorted(keys)


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
        partitions = backfill_partitions(backfill)
        chosen = [p for p in partitions if ours(p)]
        if not chosen:
            continue
        if len(chosen) == len(partitions):
            instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELING))
            out.backfills.append(backfill.backfill_id)
            continue
        out.kept_backfills.append(backfill.backfill_id)
        launched = RunsFilter(tags=DagsterRun.tags_for_backfill_id(backfill.backfill_id))
        seen = {r.tags.get(PARTITION_NAME_TAG) for r in instance.get_runs(filters=launched)}
        out.not_launched += [p for p in chosen if p not in seen]
    tags = {get_multidimensional_partition_tag(EXPERIMENT): name}
    for run in instance.get_runs(filters=RunsFilter(statuses=ACTIVE, tags=tags)):
        if wanted and run.tags.get(get_multidimensional_partition_tag(BENCHMARK)) not in wanted:
            continue
        if instance.run_coordinator.cancel_run(run.run_id):
            out.runs.append(run.run_id)
        else:
            out.not_stopped.append(run.run_id)
    return out
