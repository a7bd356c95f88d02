"""experiments_sensor keeps the experiment partitions in step with the declared experiments."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import DagsterInstance, SensorResult, SkipReason, build_sensor_context

from giant_assets.experiments.declared import ExperimentsFileError
from giant_assets.platform.partitions import EXPERIMENT
from giant_assets.platform.resources import ExperimentsResource
from giant_assets.platform.sensors import experiments_sensor, sync_experiments
from tests.support.dagster_env import write_experiments


def evaluate(instance: DagsterInstance, path: Path):
    context = build_sensor_context(
        instance=instance, resources={"experiments": ExperimentsResource(path=str(path))}
    )
    return experiments_sensor(context)


def test_new_experiments_become_partitions_and_none_is_removed(tmp_path: Path) -> None:
    path = write_experiments(
        tmp_path / "experiments.yaml", {"a": {"agent": "random"}, "b": {"agent": "majority"}}
    )
    with DagsterInstance.ephemeral() as instance:
        result = evaluate(instance, path)
        assert isinstance(result, SensorResult)
        (request,) = result.dynamic_partitions_requests
        assert request.partitions_def_name == EXPERIMENT and sorted(request.partition_keys) == ["a", "b"]
        # what the daemon logs for the tick ("Sensor experiments_sensor skipped: <reason>"): what it did
        reason = result.skip_reason.skip_message
        assert reason.startswith(f"added 2 experiment partition(s) from {path}: a, b")
        instance.add_dynamic_partitions(EXPERIMENT, list(request.partition_keys))
        assert isinstance(evaluate(instance, path), SkipReason)  # nothing new
        write_experiments(path, {"a": {"agent": "random"}, "c": {"agent": "random", "seed": 1}})
        assert sync_experiments(instance, ExperimentsResource(path=str(path))) == ["c"]
        assert sorted(instance.get_dynamic_partitions(EXPERIMENT)) == [
            "a",
            "b",
            "c",
        ]  # b stays: its results do


def test_a_bad_file_fails_the_sensor_naming_file_experiment_and_field(tmp_path: Path) -> None:
    path = write_experiments(tmp_path / "experiments.yaml", {"a": {"agent": "random", "max_steps": 0}})
    with DagsterInstance.ephemeral() as instance, pytest.raises(ExperimentsFileError) as err:
        evaluate(instance, path)
    assert str(path) in str(err.value) and "experiment 'a': field 'max_steps'" in str(err.value)
