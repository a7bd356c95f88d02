"""experiments_sensor keeps the experiment partitions in step with the declared experiments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance, SensorResult, SkipReason, build_sensor_context

from giant_assets.experiments.declared import ExperimentsFileError
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.platform.partitions import BENCHMARK, EXPERIMENT
from giant_assets.platform.resources import ExperimentsResource
from giant_assets.platform.sensors import make_experiments_sensor, sync_experiments
from tests.support.dagster_env import write_experiments
from tests.support.warm_start.server import warm_code


def evaluate(instance: DagsterInstance, path: Path):
    context = build_sensor_context(
        instance=instance, resources={"experiments": ExperimentsResource(path=str(path))}
    )
    return make_experiments_sensor()(context)


def test_new_experiments_become_partitions_and_none_is_removed(tmp_path: Path) -> None:
    path = write_experiments(
        tmp_path / "experiments.yaml", {"a": {"agent": "random"}, "b": {"agent": "majority"}}
    )
    with DagsterInstance.ephemeral() as instance:
        result = evaluate(instance, path)
        assert isinstance(result, SensorResult)
        request, benchmarks = result.dynamic_partitions_requests
        assert request.partitions_def_name == EXPERIMENT and sorted(request.partition_keys) == ["a", "b"]
        assert benchmarks.partitions_def_name == BENCHMARK and sorted(benchmarks.partition_keys) == sorted(
            BENCHMARK_NAMES
        )  # the five built-ins: the file declares no benchmark
        # what the daemon logs for the tick ("Sensor experiments_sensor skipped: <reason>"): what it did
        reason = result.skip_reason.skip_message
        assert reason.startswith(f"added 2 experiment partition(s) from {path}: a, b")
        instance.add_dynamic_partitions(EXPERIMENT, list(request.partition_keys))
        instance.add_dynamic_partitions(BENCHMARK, list(benchmarks.partition_keys))
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


def test_the_sensors_tick_at_their_own_pace_unless_the_environment_shortens_it(monkeypatch) -> None:
    """Unset, each sensor keeps its interval (automation 15 s, the others 30 s); GIANT_SENSOR_INTERVAL_S
    (what the daemon tests set) replaces them all, rounded, never below a second."""
    from giant_assets.core.settings import SENSOR_INTERVAL_ENV, sensor_interval
    from giant_assets.platform.definitions import defs

    sensors = {s.name: s.minimum_interval_seconds for s in defs.get_repository_def().sensor_defs}
    assert sensors == {
        "results_automation": 15,
        "experiments_sensor": 30,
        "batch_rounds_sensor": 30,
        "submissions_sensor": 30,
    }
    loaded = subprocess.run(  # a code location loaded with it set, as the daemon tests' daemons are
        [sys.executable, "-c", "from giant_assets.platform.definitions import defs; "
         "print(sorted({s.minimum_interval_seconds for s in defs.get_repository_def().sensor_defs}))"],
        env=warm_code(os.environ | {SENSOR_INTERVAL_ENV: "2"}), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert loaded.stdout.strip() == "[2]", loaded.stderr[-2000:]
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "2.4")
    assert sensor_interval(30) == 2
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "0.2")
    assert sensor_interval(15) == 1
    monkeypatch.delenv(SENSOR_INTERVAL_ENV)
    assert sensor_interval(15) == 15
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match="GIANT_SENSOR_INTERVAL_S='soon'"):
        sensor_interval(30)
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "86400")
    assert sensor_interval(30) == 86400
    for hostile in ("inf", "1e308", "1e5000", "86401"):  # a clear error naming it, not an OverflowError
        monkeypatch.setenv(SENSOR_INTERVAL_ENV, hostile)
        with pytest.raises(ValueError, match=f"GIANT_SENSOR_INTERVAL_S='{hostile}': expected at most 86400"):
            sensor_interval(30)
