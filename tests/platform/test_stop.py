"""`giant-experiments stop NAME` against a real `dagster-daemon`: a backfill of an experiment's row runs
GIANT against a slow loopback model; stop cancels the backfill and terminates its runs (queued ones
leave the queue, started ones end as canceled), and the model is asked nothing more; another
experiment's run is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.demo.scripted import serve_demo_model
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
ROW = "slow-row"
CELLS = ("tcga_slidebench", "tcga", "gtex")
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def wait_for(what: str, done, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_stop_cancels_the_backfill_and_terminates_the_rows_runs(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    daemon_home(home)
    server = serve_demo_model(latency_s=1.5)
    slow = {"agent": "giant", "model": "scripted-slow", "base_url": server.openai_base_url, "concurrency": 1,
            "runs_per_item": 3}  # fmt: skip
    declared = write_experiments(tmp_path / "experiments.yaml", {ROW: slow})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_WSI_ROOT": str(sample_wsi_root),
            "GIANT_EXPERIMENTS": str(declared)}  # fmt: skip
    try:
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, ROW)
            assert materialize(
                [multipathqa_csv, benchmark_items],
                resources=resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root)),
                instance=instance,
            ).success
        keys = [str(result_key(ROW, b)) for b in CELLS]
        with dagster_daemon(env, REPO):
            launched = subprocess.run(
                [BIN / "dagster", "job", "backfill", "-m", "giant_assets.platform.definitions",
                 "-j", "evaluate_cell", "--partitions", ",".join(keys), "--noprompt"],
                env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
            with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
                wait_for("a run of the row asking the model", lambda: len(server.requests) > 0)
                stopped_at = time.time()
                stop = subprocess.run(
                    [BIN / "giant-experiments", "stop", ROW], env=env, cwd=REPO, capture_output=True,
                    text=True, timeout=120,
                )  # fmt: skip
                assert stop.returncode == 0, stop.stdout + stop.stderr
                # the backfill has queued every run of its cells already (it is complete): they are stopped
                assert f"{len(CELLS)} run(s) canceled or terminating" in stop.stdout

                def ended() -> bool:
                    runs = [r for r in instance.get_runs() if r.job_name == "evaluate_cell"]
                    return bool(runs) and all(r.status in FINISHED for r in runs)

                wait_for("every run of the row to end", ended)
                asked = len(server.requests)
                runs = [r for r in instance.get_runs() if r.job_name == "evaluate_cell"]
                assert DagsterRunStatus.CANCELED in {r.status for r in runs}
                # none ran to its end after the stop (a cell with few calls may have finished before it)
                records = instance.get_run_records()
                finished = [r.end_time for r in records if r.dagster_run.status == DagsterRunStatus.SUCCESS]
                assert all(end is not None and end <= stopped_at for end in finished), (finished, stopped_at)
                time.sleep(5)  # the daemon is still up: the backfill launches nothing more, nothing asks
                assert len([r for r in instance.get_runs() if r.job_name == "evaluate_cell"]) == len(runs)
                assert len(server.requests) == asked
        # a cell needs 3 items x 3 runs x 2 calls: the row was cut short
        assert asked < len(CELLS) * 18
    finally:
        server.stop()
