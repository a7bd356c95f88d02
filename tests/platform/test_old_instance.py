"""An instance from before the benchmark dimension became dynamic: its results-grid materializations were
recorded under a static dimension of the five built-in names, and it holds no benchmark partitions. The
current ``giant-experiments sync`` adds them, and the old materializations still count: Dagster's status
(its cache written under the old definition) shows the cell materialized, the others missing, and the
downstream of the old cell materializes from its stored runs without running one again."""

from pathlib import Path

import pandas as pd
import pytest
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.partition_status_cache import AssetPartitionStatus

from giant_assets.agents.cell import run_cell
from giant_assets.benchmarks.registry import BUILT_IN_NAMES
from giant_assets.core.storage import ParquetStore
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.experiments_cli import main as experiments_cli
from giant_assets.platform.partitions import (
    BENCHMARK,
    EXPERIMENT,
    cell,
    experiment_partitions,
    result_key,
    results_partitions,
)
from giant_assets.platform.resources import ExperimentsResource, StorageResource
from tests.support.dagster_env import ingested_sample, write_experiments

# the grid as it was defined before declared benchmarks: a static benchmark dimension
OLD_GRID = MultiPartitionsDefinition(
    {BENCHMARK: StaticPartitionsDefinition(list(BUILT_IN_NAMES)), EXPERIMENT: experiment_partitions}
)
CELL = "tcga_slidebench|random"
RESCORE = AssetSelection.assets("item_predictions", "benchmark_metrics")


@asset(name="predictions", partitions_def=OLD_GRID)
def old_predictions(
    context: AssetExecutionContext,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """``predictions`` as an older version defined it: the same runs, under the static dimension."""
    name, benchmark = cell(context)
    return run_cell(experiments.get(name), benchmark_items, benchmark, storage.root,
                    experiments_file=experiments.file, log=context.log.info).rows  # fmt: skip


def test_an_instance_from_before_the_dynamic_benchmarks_keeps_its_results(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    data, home, declared = tmp_path / "data", tmp_path / "home", tmp_path / "experiments.yaml"
    home.mkdir()
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    write_experiments(declared, {"random": {"agent": "random", "seed": 3}})
    _, resources = ingested_sample(data, declared, sample_wsi_root)  # the stored items (another instance)
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.add_dynamic_partitions(EXPERIMENT, ["random"])  # what the old sync added
        old = materialize([multipathqa_csv, benchmark_items, old_predictions], selection=[old_predictions],
                          partition_key=CELL, resources=resources, instance=instance)  # fmt: skip
        assert old.success
        # the UI's status cache, written under the old definition
        before = instance.get_status_by_partition(AssetKey("predictions"), [CELL], OLD_GRID)
        assert before == {CELL: AssetPartitionStatus.MATERIALIZED}
        assert instance.get_dynamic_partitions(BENCHMARK) == []
    journal = next((data / "journals").glob("*/tcga_slidebench.jsonl"))
    runs_before = journal.read_text().count("\n")
    assert runs_before == 3

    assert experiments_cli(["sync", "--file", str(declared)]) == 0  # the current code's sync
    assert "added 5 benchmark partition(s)" in capsys.readouterr().out
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert sorted(instance.get_dynamic_partitions(BENCHMARK)) == sorted(BUILT_IN_NAMES)
        keys = [str(result_key("random", b)) for b in BUILT_IN_NAMES]
        status = instance.get_status_by_partition(AssetKey("predictions"), keys, results_partitions)
        assert status == {k: AssetPartitionStatus.MATERIALIZED if k == CELL else None for k in keys}
        # the old cell's downstream, with the current definitions: scored from its stored runs
        result = materialize(ALL_ASSETS, selection=RESCORE, partition_key=CELL, resources=resources,
                             instance=instance)  # fmt: skip
        assert result.success
    assert journal.read_text().count("\n") == runs_before  # nothing ran again
    metrics = ParquetStore(data).read("benchmark_metrics", ["random/tcga_slidebench"])
    assert metrics["n_items"].tolist() == [3]
