"""Sensors: keep the experiment partitions in step with the declared experiments.

Partitions are added, never removed, by the sensor: an experiment deleted from the file keeps its
partition (and its files) and is listed as removed by the leaderboard; ``giant-experiments prune``
deletes such partitions on request.
"""

from dagster import (
    DagsterInstance,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from giant_assets.core.settings import sensor_interval
from giant_assets.platform.partitions import EXPERIMENT, experiment_partitions
from giant_assets.platform.resources import ExperimentsResource


def new_experiments(instance: DagsterInstance, experiments: ExperimentsResource) -> list[str]:
    """Declared experiments that are not yet partitions (the file is validated on the way)."""
    declared = experiments.all()
    return sorted(set(declared) - set(instance.get_dynamic_partitions(EXPERIMENT)))


SYNC_ATTEMPTS = 5


def sync_experiments(instance: DagsterInstance, experiments: ExperimentsResource) -> list[str]:
    """Add every declared experiment as a partition; returns the names that were missing. Never removes
    one. Safe beside another sync (a second shell, the daemon's sensor): Dagster inserts the keys it did
    not find a moment before, so a key another process inserted meanwhile fails the insert; the keys
    still missing are then added again."""
    from sqlalchemy.exc import IntegrityError

    added = new_experiments(instance, experiments)
    for _ in range(SYNC_ATTEMPTS):
        missing = sorted(set(added) - set(instance.get_dynamic_partitions(EXPERIMENT)))
        if not missing:
            break
        try:
            instance.add_dynamic_partitions(EXPERIMENT, missing)
            break
        except IntegrityError:  # another process added some of them between Dagster's check and insert
            continue
    else:
        raise RuntimeError(f"could not add experiment partitions {missing} in {SYNC_ATTEMPTS} attempts")
    return added


def removed_experiments(instance: DagsterInstance, experiments: ExperimentsResource) -> list[str]:
    """Experiment partitions whose experiment is no longer declared."""
    return sorted(set(instance.get_dynamic_partitions(EXPERIMENT)) - set(experiments.all()))


def prune_experiments(instance: DagsterInstance, experiments: ExperimentsResource) -> list[str]:
    """Delete the partitions of experiments no longer declared; returns their names. Files stay."""
    removed = removed_experiments(instance, experiments)
    for name in removed:
        instance.delete_dynamic_partition(EXPERIMENT, name)
    return removed


@sensor(minimum_interval_seconds=sensor_interval(30), default_status=DefaultSensorStatus.RUNNING)
def experiments_sensor(context: SensorEvaluationContext, experiments: ExperimentsResource):
    """Adds a partition for every experiment declared in the experiments file (a bad file fails here,
    naming the file, experiment and field). It launches no run, so Dagster records every tick as
    skipped: the tick that adds partitions says so in its reason (the daemon's log line)."""
    added = new_experiments(context.instance, experiments)
    if not added:
        return SkipReason(f"every experiment of {experiments.file} is a partition already")
    return SensorResult(
        dynamic_partitions_requests=[experiment_partitions.build_add_request(added)],
        skip_reason=(
            f"added {len(added)} experiment partition(s) from {experiments.file}: {', '.join(added)} "
            "(this sensor launches no runs: backfill the new rows, docs/experiments.md)"
        ),
    )


SENSORS = [experiments_sensor]
