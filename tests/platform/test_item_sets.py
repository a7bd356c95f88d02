"""Results of different item sets never stand side by side, on real materializations of the offline
`random` and `majority` agents over the generated sample slides:

- after a switch of CSV (one gtex answer changed), the leaderboard and the comparisons keep only results
  over today's items; the stale cell is listed in `leaderboard_stale` with the command that re-runs it,
  and running that command brings it back;
- a failed rebuild of the leaderboard or the comparisons retires their tables: the DuckDB views refuse
  queries naming the failure instead of serving the previous build, and the next success restores them;
- an experiment removed from experiments.yaml leaves the leaderboard and the comparisons (listed as
  removed), re-scoring it fails saying what to do, and `giant-experiments prune` drops its partitions.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import AssetSelection, DagsterEventType, DagsterInstance, materialize

from giant_assets.core.settings import SUPERSEDED_WARNING_FILTER
from giant_assets.core.storage import ParquetStore
from giant_assets.multipathqa.fingerprint import item_set_fingerprint
from giant_assets.platform.definitions import ALL_ASSETS, ALL_CHECKS
from giant_assets.platform.experiments_cli import main as experiments_cli
from giant_assets.platform.partitions import EXPERIMENT, result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

SAMPLE_CSV = Path(__file__).resolve().parents[2] / "giant_assets" / "reference" / "multipathqa_sample.csv"
INGEST = AssetSelection.assets("multipathqa_csv", "benchmark_items")
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
RESCORE = AssetSelection.assets("item_predictions", "benchmark_metrics")
ACROSS = AssetSelection.assets(
    "leaderboard", "leaderboard_long", "leaderboard_stale", "experiment_comparisons"
)
CHANGED_ITEM = "GTEX-OIZH-0626"
DECLARED = {"random": {"agent": "random", "seed": 7}, "majority": {"agent": "majority"}}


class Grid:
    """One data dir and Dagster instance; the CSV in use can be switched between materializations."""

    def __init__(self, tmp_path: Path, wsi_root: Path, instance: DagsterInstance) -> None:
        self.data = tmp_path / "data"
        self.declared = write_experiments(tmp_path / "experiments.yaml", DECLARED)
        self.wsi_root = wsi_root
        self.instance = instance
        self.store = ParquetStore(self.data)
        self.csv = SAMPLE_CSV
        add_experiments(instance, *DECLARED)

    def materialize(self, selection: AssetSelection, key=None, ok: bool = True):
        resources = resources_for(
            self.data, self.declared, source="local", csv_path=str(self.csv), wsi_root=str(self.wsi_root)
        )
        result = materialize(
            [*ALL_ASSETS, *ALL_CHECKS],
            selection=selection,
            partition_key=key,
            resources=resources,
            instance=self.instance,
            raise_on_error=False,
        )
        assert result.success is ok, failure_messages(result)  # with the causes of each step failure
        return result

    def cells(self, *cells: tuple[str, str]) -> None:
        for experiment, benchmark in cells:
            self.materialize(CELL, result_key(experiment, benchmark))

    def item_set(self, benchmark: str) -> str:
        items = self.store.read("benchmark_items")
        return item_set_fingerprint(items[items["benchmark_name"] == benchmark])

    def sql(self, query: str) -> pd.DataFrame:
        with duckdb.connect(str(self.store.duckdb_path), read_only=True) as con:
            return con.execute(query).df()


@pytest.fixture
def grid(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch) -> Grid:
    monkeypatch.setenv("GIANT_DATA_DIR", str(tmp_path / "data"))
    with DagsterInstance.ephemeral() as instance:
        yield Grid(tmp_path, sample_wsi_root, instance)


def switched_csv(path: Path) -> Path:
    """The sample CSV with one gtex item's answer changed (another question set, same ids)."""
    frame = pd.read_csv(SAMPLE_CSV, dtype=str, keep_default_na=False)
    row = frame.index[frame["benchmark_id"] == CHANGED_ITEM][0]
    assert frame.loc[row, "answer"] != "Heart"
    frame.loc[row, "answer"] = "Heart"
    frame.to_csv(path, index=False)
    return path


def failure_messages(result) -> str:
    """Every step failure's message with the messages of its causes."""
    lines = []
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = event.event_specific_data.error
            while error is not None:
                lines.append(error.message)
                error = error.cause
    return "\n".join(lines)


def test_after_a_csv_switch_only_todays_item_set_is_ranked_and_the_stale_cell_says_what_to_rerun(
    grid: Grid, tmp_path: Path
) -> None:
    grid.materialize(INGEST)
    old_gtex, old_tcga = grid.item_set("gtex"), grid.item_set("tcga")
    grid.cells(("random", "gtex"), ("majority", "gtex"), ("random", "tcga"), ("majority", "tcga"))

    grid.csv = switched_csv(tmp_path / "MultiPathQA.csv")
    grid.materialize(INGEST)
    new_gtex = grid.item_set("gtex")
    assert new_gtex != old_gtex and grid.item_set("tcga") == old_tcga
    # re-scoring stored answers against today's items is refused: they answer other questions
    refused = failure_messages(grid.materialize(RESCORE, result_key("majority", "gtex"), ok=False))
    assert "predictions of majority/gtex: 1 of 3 stored runs answer items that are not today's" in refused
    assert f"item '{CHANGED_ITEM}': truth label" in refused and '--partition "gtex|majority"' in refused
    viewer = AssetSelection.assets(
        "trajectory_pictures", "trajectory_viewer"
    )  # nor shown under new questions
    shown = failure_messages(grid.materialize(viewer, result_key("majority", "gtex"), ok=False))
    assert "predictions of majority/gtex: 1 of 3 stored runs answer items that are not today's" in shown
    grid.cells(("random", "gtex"))  # only random re-runs gtex over today's items
    across = grid.materialize(ACROSS)  # the old code failed here: "experiments disagree on the truth label"
    (check,) = [
        c for c in across.get_asset_check_evaluations() if c.check_name == "results_over_todays_items"
    ]
    assert not check.passed and check.metadata["stale"].value == 1
    assert '--partition "gtex|majority"' in check.metadata["what_to_rerun"].value

    stale = grid.sql("select * from leaderboard_stale")
    assert len(stale) == 1
    row = stale.iloc[0]
    assert (row["experiment"], row["benchmark_name"], row["status"]) == ("majority", "gtex", "stale")
    assert row["item_set_fingerprint"] == old_gtex and row["current_item_set_fingerprint"] == new_gtex
    assert (row["n_items"], row["n_items_now"], row["partition"]) == (3, 3, "gtex|majority")
    assert shlex.split(row["rerun"])[-2:] == ["--partition", "gtex|majority"]
    assert "predictions" in row["rerun"] and "benchmark_metrics" in row["rerun"]

    long = grid.sql(
        "select * from leaderboard_long where source = 'ours' order by experiment, benchmark_name"
    )
    assert long[["experiment", "benchmark_name"]].values.tolist() == [
        ["majority", "tcga"],
        ["random", "gtex"],
        ["random", "tcga"],
    ]
    expected = {"gtex": new_gtex, "tcga": old_tcga}
    assert long["item_set_fingerprint"].tolist() == [expected[b] for b in long["benchmark_name"]]
    board = grid.sql("select * from leaderboard where source = 'ours'").set_index("experiment")
    assert board.loc["majority", "gtex"] == "" and board.loc["majority", "tcga"] != ""
    assert board.loc["random", "gtex"] != ""
    assert board.loc["majority", "n_items"] == 3  # the stale gtex items are not counted either

    pairs = grid.sql("select * from experiment_comparisons")
    assert pairs[["benchmark_name", "experiment_a", "experiment_b"]].values.tolist() == [
        ["tcga", "majority", "random"]
    ]
    assert pairs["item_set_fingerprint"].tolist() == [old_tcga]
    metrics = json.loads((grid.data / "results" / "majority" / "results.json").read_text())["metrics"]
    by_benchmark = {m["benchmark_name"]: m for m in metrics}
    assert by_benchmark["gtex"]["leaderboard_status"] == "stale"
    assert by_benchmark["gtex"]["item_set_fingerprint"] == old_gtex
    assert by_benchmark["tcga"]["leaderboard_status"] == "current"

    # running what leaderboard_stale says (its --select and --partition) brings the cell back
    args = shlex.split(row["rerun"])
    assert args[0] == f"PYTHONWARNINGS={SUPERSEDED_WARNING_FILTER}"
    start = args.index("asset")  # the venv's dagster by absolute path, or `python -m dagster`
    assert Path(args[1]).name == "dagster" or args[start - 2 : start] == ["-m", "dagster"]
    assert Path(args[1]).is_absolute()
    assert args[start : start + 3] == ["asset", "materialize", "-m"]
    selected = args[args.index("--select") + 1].split(",")
    assert set(selected) == {"predictions", "trajectory_steps", "item_predictions", "benchmark_metrics"}
    benchmark, experiment = args[args.index("--partition") + 1].split("|")
    grid.materialize(AssetSelection.assets(*selected), result_key(experiment, benchmark))
    checks = grid.materialize(ACROSS).get_asset_check_evaluations()
    assert [c.passed for c in checks if c.check_name == "results_over_todays_items"] == [True]
    assert grid.sql("select count(*) as n from leaderboard_stale")["n"].item() == 0
    cells = grid.sql(
        "select benchmark_name, item_set_fingerprint from leaderboard_long where experiment = 'majority'"
    )
    assert dict(cells.values.tolist()) == expected
    pairs = grid.sql("select benchmark_name, item_set_fingerprint from experiment_comparisons")
    assert sorted(pairs.values.tolist()) == [["gtex", new_gtex], ["tcga", old_tcga]]


def test_a_failed_rebuild_retires_the_views_instead_of_serving_the_previous_build(grid: Grid) -> None:
    grid.materialize(INGEST)
    grid.cells(("random", "tcga"), ("majority", "tcga"))
    grid.materialize(ACROSS)
    before = grid.sql("select * from experiment_comparisons")
    assert len(before) == 1 and len(grid.sql("select * from leaderboard")) > 0

    for table in ("item_predictions", "benchmark_metrics"):  # a cell's files cut short (disk full)
        path = grid.store.partition_path(table, "majority/tcga")
        path.write_bytes(path.read_bytes()[:100])
    failed = grid.materialize(ACROSS, ok=False)
    assert "majority/tcga.parquet" in failure_messages(failed)
    for table in ("experiment_comparisons", "leaderboard", "leaderboard_long", "leaderboard_stale"):
        with pytest.raises(duckdb.Error, match=f"{table} is not current: its rebuild failed: .*tcga.parquet"):
            grid.sql(f"select * from {table}")
        assert not grid.store.exists(table)
    kept = pd.read_parquet(grid.data / ".retired" / "experiment_comparisons" / "_all.parquet")
    pd.testing.assert_frame_equal(kept, before)  # the previous build is kept, out of service

    grid.cells(("majority", "tcga"))  # the cell again, then the tables across experiments
    grid.materialize(ACROSS)
    pd.testing.assert_frame_equal(grid.sql("select * from experiment_comparisons"), before)
    assert len(grid.sql("select * from leaderboard where source = 'ours'")) == 2


def test_a_removed_experiment_leaves_the_leaderboard_and_prune_drops_its_partitions(
    grid: Grid, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    grid.materialize(INGEST)
    grid.cells(("random", "tcga"), ("majority", "tcga"))
    write_experiments(grid.declared, {"random": DECLARED["random"]})  # majority deleted from the file
    grid.materialize(ACROSS)

    board = grid.sql("select experiment from leaderboard where source = 'ours'")
    assert board["experiment"].tolist() == ["random"]
    stale = grid.sql("select * from leaderboard_stale")
    assert stale[["experiment", "benchmark_name", "status"]].values.tolist() == [
        ["majority", "tcga", "removed"]
    ]
    assert (
        "no longer declared" in stale["reason"].item() and "giant-experiments prune" in stale["rerun"].item()
    )
    assert len(grid.sql("select * from experiment_comparisons")) == 0

    failed = grid.materialize(RESCORE, result_key("majority", "tcga"), ok=False)
    message = failure_messages(failed)
    assert "experiment 'majority' is not declared (removed?)" in message
    assert "giant-experiments prune" in message and "declare it again" in message

    # the CLI's sync names it, its prune deletes its partition (from the $DAGSTER_HOME instance); files stay
    monkeypatch.setattr(DagsterInstance, "get", staticmethod(lambda: grid.instance))
    assert experiments_cli(["sync", "--file", str(grid.declared)]) == 0
    synced = capsys.readouterr().out
    assert "no longer declared (kept; `giant-experiments prune` deletes them): majority" in synced
    assert experiments_cli(["prune", "--file", str(grid.declared)]) == 0
    assert "deleted 1 partition(s) of removed experiments: majority" in capsys.readouterr().out
    assert grid.instance.get_dynamic_partitions(EXPERIMENT) == ["random"]
    assert grid.store.exists("benchmark_metrics", "majority/tcga")
    grid.materialize(ACROSS)
    assert grid.sql("select count(*) as n from leaderboard_stale")["n"].item() == 0
    assert grid.sql("select experiment from leaderboard where source = 'ours'")["experiment"].tolist() == [
        "random"
    ]
