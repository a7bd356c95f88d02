"""A backfill of one experiment row of the results grid, as a user launches it: `dagster job backfill`
of the `evaluate_cell` job over the row's five partitions, its runs queued on the instance and
launched by a real `dagster-daemon`; every benchmark of that experiment lands, no other cell does, and
the daemon's automation then puts the row on the leaderboard and in the comparisons with no further
step."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import (
    add_experiments,
    daemon_home,
    dagster_daemon,
    resources_for,
    write_experiments,
)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROW = "random-row"
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
TABLES = ("leaderboard", "leaderboard_long", "experiment_comparisons")


def wait_for(what: str, done, seconds: float = 120) -> None:
    """Poll ``done()`` each second until true; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(1)


def automation_ticks(instance: DagsterInstance) -> int:
    """How many ticks the daemon has evaluated of the automation sensor (it is on by default)."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == "results_automation"]
    return sum(len(instance.get_ticks(s.instigator_origin_id, s.selector_id)) for s in states)


def test_backfill_of_one_experiment_row_through_the_cli_and_daemon(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    daemon_home(home)
    declared = write_experiments(
        tmp_path / "experiments.yaml", {ROW: {"agent": "random", "seed": 3}, "other": {"agent": "majority"}}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "GIANT_DATA_DIR": str(data),
        "GIANT_WSI_ROOT": str(sample_wsi_root),
        "GIANT_EXPERIMENTS": str(declared),
    }
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        add_experiments(instance, ROW, "other")
        ingest = materialize(
            [multipathqa_csv, benchmark_items],
            resources=resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root)),
            instance=instance,
        )
        assert ingest.success
    keys = [str(result_key(ROW, b)) for b in BENCHMARK_NAMES]
    with dagster_daemon(env, REPO):
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            # the first tick only records where things stand; updates count from then on
            wait_for("the automation sensor's first tick", lambda: automation_ticks(instance) > 0)
        launched = subprocess.run(
            [BIN / "dagster", "job", "backfill", "-m", "giant_assets.platform.definitions",
             "-j", "evaluate_cell", "--partitions", ",".join(keys), "--noprompt"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
        deadline = time.monotonic() + 300
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            while True:
                runs = [r for r in instance.get_runs() if r.job_name == "evaluate_cell"]
                if len(runs) == len(keys) and all(r.status in FINISHED for r in runs):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"backfill runs not finished: {[(r.tags, r.status) for r in runs]}")
                time.sleep(1)
            assert sorted(r.tags.get("dagster/partition") for r in runs) == sorted(keys)
            assert {r.status for r in runs} == {DagsterRunStatus.SUCCESS}
            assert len({r.tags.get("dagster/backfill") for r in runs}) == 1  # one backfill, five runs
            assert {r.tags.get("giant/provider") for r in runs} == {"offline"}  # the queue's provider tag

            # no further step: the daemon materializes the tables across experiments after the row
            def tables_after_row() -> bool:
                last_cell = max(instance.get_run_record_by_id(r.run_id).end_time or 0 for r in runs)
                events = [instance.get_latest_materialization_event(AssetKey(t)) for t in TABLES]
                return all(e is not None and e.timestamp > last_cell for e in events)

            wait_for("the leaderboard after the backfill", tables_after_row)
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        cells = con.sql("select distinct experiment, benchmark_name from benchmark_metrics").fetchall()
        steps = con.sql("select count(*) from trajectory_steps").fetchone()[0]
        board = con.sql("select distinct experiment from leaderboard_long where source = 'ours'").fetchall()
    assert sorted(cells) == sorted((ROW, b) for b in BENCHMARK_NAMES)  # the row, and nothing else
    assert steps > 0 and (data / "viewer" / ROW / "index.html").is_file()
    assert board == [(ROW,)]
