"""Declarative automation, evaluated tick by tick with Dagster's own evaluator over real
materializations: the leaderboard, its long form and the comparisons follow the cells they read (with
most of the grid missing), nothing is asked twice, and a viewer re-renders when its cell is re-scored."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pandas as pd
from dagster import AssetKey, AssetSelection, DagsterInstance, Definitions, materialize
from dagster import evaluate_automation_conditions as tick
from PIL import Image

from giant_assets.platform.definitions import ALL_ASSETS, RESOURCES, defs
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
VIEWER = AssetSelection.assets("trajectory_pictures", "trajectory_viewer")
INGEST = AssetSelection.assets("multipathqa_csv", "benchmark_items")
SAMPLE_CSV = Path(__file__).resolve().parents[2] / "giant_assets" / "reference" / "multipathqa_sample.csv"
RESCORE = AssetSelection.assets("item_predictions", "benchmark_metrics")
TABLE_NAMES = ("leaderboard", "leaderboard_long", "leaderboard_stale", "experiment_comparisons")
TABLES = {AssetKey(name) for name in TABLE_NAMES}


def requested(result) -> dict[AssetKey, set]:
    keys = [AssetKey(k) for k in TABLE_NAMES]
    keys.append(AssetKey("trajectory_viewer"))
    return {k: set(result.get_requested_partitions(k)) for k in keys if result.get_num_requested(k)}


def assert_chart_inline(instance: DagsterInstance, png: Path) -> None:
    """The UI shows the leaderboard's chart in one click: the first metadata entry is the chart (the PNG
    inside the metadata, not a path) above the table."""
    event = instance.get_latest_materialization_event(AssetKey("leaderboard"))
    metadata = event.asset_materialization.metadata
    assert next(iter(metadata)) == "leaderboard"
    chart_md, table = metadata["leaderboard"].value.split("\n\n", 1)
    prefix = "![leaderboard chart](data:image/png;base64,"
    assert chart_md.startswith(prefix) and str(png) not in chart_md and table.startswith("|")
    with (
        Image.open(io.BytesIO(base64.b64decode(chart_md[len(prefix) : -1]))) as inline,
        Image.open(png) as drawn,
    ):
        assert inline.size == drawn.size and drawn.size[0] == 1200 and drawn.size[1] > 500  # + legend


def test_the_tables_follow_the_cells_they_read(tmp_path: Path, sample_wsi_root: Path) -> None:
    data = tmp_path / "data"
    declared = write_experiments(
        tmp_path / "experiments.yaml", {"a": {"agent": "random"}, "b": {"agent": "majority"}}
    )
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, "a", "b")
    graph = Definitions(assets=ALL_ASSETS, resources=RESOURCES)

    def run(selection: AssetSelection, key=None) -> None:
        result = materialize(
            ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
        )
        assert result.success

    run(AssetSelection.assets("multipathqa_csv", "benchmark_items"))
    first = tick(defs=graph, instance=instance)
    assert requested(first) == {}  # no cell yet: nothing to put on a leaderboard

    # one cell of one experiment, through the row's job as a backfill runs it; 9 of 10 cells missing
    run(CELL | VIEWER, result_key("a", "tcga"))
    second = tick(defs=graph, instance=instance, cursor=first.cursor)
    assert requested(second) == {key: {None} for key in TABLES}  # the viewer was built in the same run

    run(AssetSelection.assets(*TABLE_NAMES))
    assert_chart_inline(instance, data / "results" / "leaderboard.png")
    third = tick(defs=graph, instance=instance, cursor=second.cursor)
    assert requested(third) == {}  # handled: not asked again

    # re-scoring one cell alone: the tables and that cell's viewer (no other cell's) follow it
    run(RESCORE, result_key("a", "tcga"))
    fourth = tick(defs=graph, instance=instance, cursor=third.cursor)
    assert requested(fourth) == {key: {None} for key in TABLES} | {
        AssetKey("trajectory_viewer"): {result_key("a", "tcga")}
    }


def test_the_daemon_runs_the_automation_sensor_by_default() -> None:
    sensor = defs.get_repository_def().get_sensor_def("results_automation")
    assert sensor.default_status.value == "RUNNING"
    targeted = sensor.asset_selection.resolve(defs.get_repository_def().asset_graph)
    assert targeted == TABLES | {AssetKey("trajectory_viewer"), AssetKey("paper_figures")}


def test_a_new_csv_launches_no_viewer_for_cells_over_yesterdays_items(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    """Sample CSV, cells and their viewers; then another CSV in the same data dir (one gtex answer
    changed): the tables follow, but no viewer is launched (the gtex cell's runs answer other items, the
    tcga cell's items did not change); re-running the stale cell then re-renders its viewer alone."""
    data = tmp_path / "data"
    declared = write_experiments(tmp_path / "experiments.yaml", {"a": {"agent": "random"}})
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, "a")
    graph = Definitions(assets=ALL_ASSETS, resources=RESOURCES)
    csv = SAMPLE_CSV

    def run(selection: AssetSelection, key=None) -> None:
        resources = resources_for(
            data, declared, source="local", csv_path=str(csv), wsi_root=str(sample_wsi_root)
        )
        result = materialize(
            ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
        )
        assert result.success

    run(INGEST)
    for benchmark in ("gtex", "tcga"):
        run(CELL | VIEWER, result_key("a", benchmark))
    run(AssetSelection.assets(*TABLE_NAMES))
    settled = tick(defs=graph, instance=instance)
    assert requested(settled) == {}

    frame = pd.read_csv(SAMPLE_CSV, dtype=str, keep_default_na=False)
    frame.loc[frame["benchmark_id"] == "GTEX-OIZH-0626", "answer"] = "Heart"
    csv = tmp_path / "MultiPathQA.csv"
    frame.to_csv(csv, index=False)
    run(INGEST)
    switched = tick(defs=graph, instance=instance, cursor=settled.cursor)
    assert requested(switched) == {key: {None} for key in TABLES}  # and no trajectory_viewer

    run(CELL, result_key("a", "gtex"))  # what leaderboard_stale says to run
    rerun = tick(defs=graph, instance=instance, cursor=switched.cursor)
    assert requested(rerun)[AssetKey("trajectory_viewer")] == {result_key("a", "gtex")}
