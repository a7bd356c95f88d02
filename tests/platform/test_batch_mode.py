"""Batch mode as a user runs it: one field in experiments.yaml, real materializations against a loopback
server speaking the providers' batch APIs; a cell waits without a materialization while its batches
run, the batch sensor (run by a real dagster-daemon) launches each next round, and the row completes
with every request paid for once, at batch prices."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from dagster import AssetSelection, DagsterInstance, DagsterRunStatus, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.agents.pricing import load_price_table
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted_model import ScriptedModelServer, demo_policy
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CELL_NAMES = ("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
CELL = AssetSelection.assets(*CELL_NAMES)
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def _settings(api: BatchAPIServer, **kw) -> dict:
    return {
        "agent": "giant",
        "model": "gpt-5",
        "base_url": api.openai_base_url,
        "max_steps": 3,
        "batch": True,
    } | kw


def test_a_cell_waits_on_its_batches_then_completes_at_half_price(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = result_key("batched", "gtex")
    # each batch ends on its second look: a pass submits a round, looks once and stops
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        write_experiments(declared, {"batched": _settings(api)})
        add_experiments(instance, "batched")
        assert materialize(
            ALL_ASSETS, selection=AssetSelection.assets("multipathqa_csv", "benchmark_items"),
            resources=resources, instance=instance,
        ).success  # fmt: skip
        passes, observations = 0, []
        while True:
            passes += 1
            result = materialize(ALL_ASSETS, selection=CELL, partition_key=str(key), resources=resources,
                                 instance=instance)  # fmt: skip
            assert result.success
            if result.asset_materializations_for_node("predictions"):
                break
            # waiting: no materialization of predictions or anything downstream, an observation instead
            assert not result.asset_materializations_for_node("benchmark_metrics")
            observations += [e for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"]
            assert passes < 10
        meta = result.asset_materializations_for_node("predictions")[0].metadata
        assert passes == 3  # the scripted model crops once, then answers: 2 rounds, 3 passes
        # GIANT takes one round per step (the scripted model crops once, then answers: 2 calls per run)
        assert observations and observations[0].event_specific_data.asset_observation.metadata["batches"]
        assert set(api.answered.values()) == {1}, "a request was paid for twice"
        assert meta["batches_total"].value == len(api.batches) >= 2
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        rows = con.sql("select error_kind, input_tokens, cached_input_tokens, output_tokens, cost_usd "
                       "from predictions").fetchall()  # fmt: skip
    gtex_ok = 2  # the sample's gtex items with a readable slide
    assert len([r for r in rows if r[0] is None]) == gtex_ok
    price = load_price_table().lookup("gpt-5")[1]
    for _, n_in, cached, n_out, cost in rows:
        if n_in:  # batch price: half of what the same tokens cost synchronously
            assert cost == pytest.approx(price.usd(n_in, n_out, cached) / 2, rel=1e-9)
    assert meta["cost_usd_now_sync_equivalent"].value == pytest.approx(
        2 * meta["cost_usd_now"].value, abs=2.1e-6
    )  # both are rounded to 6 decimals: doubling the rounded value may differ by 1e-6


def test_only_the_daemon_stays_up_and_the_row_completes(tmp_path: Path, sample_wsi_root: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    declared = tmp_path / "experiments.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_WSI_ROOT": str(sample_wsi_root),
            "GIANT_EXPERIMENTS": str(declared)}  # fmt: skip
    key = str(result_key("batched", "panda"))
    # round 1 ends on its second look (the sensor's), round 2 on its first (inside the launched run)
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=[2, 1]) as api:
        write_experiments(declared, {"batched": _settings(api, batch_poll_s=1)})
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, "batched")
            resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
            assert materialize(
                ALL_ASSETS, selection=AssetSelection.assets("multipathqa_csv", "benchmark_items"),
                resources=resources, instance=instance,
            ).success  # fmt: skip
        # the user's one command: it submits the first round and ends
        first = subprocess.run(
            [BIN / "dagster", "asset", "materialize", "-m", "giant_assets.platform.definitions",
             "--select", ",".join(CELL_NAMES), "--partition", key],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        assert len(api.batches) == 1 and not api.answered
        daemon = subprocess.Popen(
            [BIN / "dagster-daemon", "run", "-m", "giant_assets.platform.definitions"],
            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while not (_metrics_landed(data) and _cell_runs_finished(home)):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"row not complete; batches {[(b.id, b.status) for b in api.batches.values()]}"
                    )
                time.sleep(1)
        finally:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        assert set(api.answered.values()) == {1} and len(api.batches) == 2  # one round per step
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = [r for r in instance.get_runs() if r.job_name == "evaluate_cell"]
        assert {r.tags.get("dagster/partition") for r in runs} == {key}
        launched = [r for r in runs if r.tags.get("dagster/sensor_name") == "batch_rounds_sensor"]
        assert len(launched) == 1 and launched[0].status == DagsterRunStatus.SUCCESS


def _cell_runs_finished(home: Path) -> bool:
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = [r for r in instance.get_runs() if r.job_name == "evaluate_cell"]
    return bool(runs) and all(r.status in FINISHED for r in runs)


def _metrics_landed(data: Path) -> bool:
    """The cell's metrics file exists (read from Parquet: the DuckDB view may wait on another writer)."""
    return any((data / "benchmark_metrics").glob("batched/*.parquet"))
