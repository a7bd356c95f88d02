"""Sensors: keep the experiment and benchmark partitions in step with the experiments file.

Partitions are added, never removed, by the sensor: an experiment (or a declared benchmark) deleted from
the file keeps its partition (and its files) and an experiment is listed as removed by the leaderboard;
``giant-experiments prune`` deletes such experiment partitions on request.
"""

from dagster import (
    DagsterInstance,
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from giant_assets.core.settings import sensor_interval
from giant_assets.experiments.declared import DeclaredExperiments
from giant_assets.platform.partitions import (
    BENCHMARK,
    EXPERIMENT,
    benchmark_partitions,
    experiment_partitions,
)
from giant_assets.platform.resources import ExperimentsResource


def new_experiments(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Declared experiments that are not yet partitions (the file is validated on the way)."""
    declared = experiments.all()
    return sorted(set(declared) - set(instance.get_dynamic_partitions(EXPERIMENT)))


SYNC_ATTEMPTS = 5


def add_partitions(instance: DagsterInstance, dimension: str, names: list[str]) -> list[str]:
    """Add ``names`` to the dynamic ``dimension``; returns those that were missing. Never removes one.
    Safe beside another sync (a second shell, the daemon's sensor): Dagster inserts the keys it did not
    find a moment before, so a key another process inserted meanwhile fails the insert; the keys still
    missing are then added again."""
    from sqlalchemy.exc import IntegrityError

    added = sorted(set(names) - set(instance.get_dynamic_partitions(dimension)))
    for _ in range(SYNC_ATTEMPTS):
        missing = sorted(set(added) - set(instance.get_dynamic_partitions(dimension)))
        if not missing:
            break
        try:
            instance.add_dynamic_partitions(dimension, missing)
            break
        except IntegrityError:  # another process added some of them between Dagster's check and insert
            continue
    else:
        raise RuntimeError(f"could not add {dimension} partitions {missing} in {SYNC_ATTEMPTS} attempts")
    return added


def sync_experiments(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Add every declared experiment as a partition; returns the names that were missing."""
    return add_partitions(instance, EXPERIMENT, list(experiments.all()))


def new_benchmarks(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Benchmarks (built-in or declared) that are not yet partitions."""
    return sorted(set(experiments.benchmark_names()) - set(instance.get_dynamic_partitions(BENCHMARK)))


def sync_benchmarks(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Add the five built-in and every declared benchmark as partitions; returns those that were missing."""
    return add_partitions(instance, BENCHMARK, list(experiments.benchmark_names()))


def removed_experiments(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Experiment partitions whose experiment is no longer declared."""
    return sorted(set(instance.get_dynamic_partitions(EXPERIMENT)) - set(experiments.all()))


def removed_benchmarks(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Benchmark partitions whose benchmark is no longer declared (never a built-in: always declared)."""
    return sorted(set(instance.get_dynamic_partitions(BENCHMARK)) - set(experiments.benchmark_names()))


def _prune(instance: DagsterInstance, dimension: str, removed: list[str]) -> list[str]:
    """Delete the partitions ``removed`` of ``dimension``; returns them. Files stay."""
    for name in removed:
        instance.delete_dynamic_partition(dimension, name)
    return removed


def prune_experiments(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Delete the partitions of experiments no longer declared; returns their names. Files stay."""
    return _prune(instance, EXPERIMENT, removed_experiments(instance, experiments))


def prune_benchmarks(instance: DagsterInstance, experiments: DeclaredExperiments) -> list[str]:
    """Delete the partitions of benchmarks no longer declared; returns their names. Files stay."""
    return _prune(instance, BENCHMARK, removed_benchmarks(instance, experiments))


def experiments_tick(context: SensorEvaluationContext, experiments: ExperimentsResource):
    """One tick of ``experiments_sensor``: adds a partition for every experiment and every benchmark
    (built-in or declared) of the experiments file (a bad file fails here, naming the file, experiment or
    benchmark and field). It launches no run, so Dagster records every tick as skipped: the tick that
    adds partitions says so in its reason (the daemon's log line)."""
    added = new_experiments(context.instance, experiments)
    benchmarks = new_benchmarks(context.instance, experiments)
    if not added and not benchmarks:
        return SkipReason(f"every experiment and benchmark of {experiments.file} is a partition already")
    requests, said = [], []
    if added:
        requests.append(experiment_partitions.build_add_request(added))
        said.append(f"{len(added)} experiment partition(s) from {experiments.file}: {', '.join(added)}")
    if benchmarks:
        requests.append(benchmark_partitions.build_add_request(benchmarks))
        said.append(f"{len(benchmarks)} benchmark partition(s): {', '.join(benchmarks)}")
    return SensorResult(
        dynamic_partitions_requests=requests,
        skip_reason=(
            f"added {'; '.join(said)} "
            "(this sensor launches no runs: backfill the new rows, docs/experiments.md)"
        ),
    )


def make_experiments_sensor() -> SensorDefinition:
    """``experiments_sensor``, every 30 s (``GIANT_SENSOR_INTERVAL_S``, read now)."""
    return sensor(
        name="experiments_sensor",
        minimum_interval_seconds=sensor_interval(30),
        default_status=DefaultSensorStatus.RUNNING,
    )(experiments_tick)
