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
from dagster import AssetSelection, DagsterEventType, DagsterInstance, DagsterRunStatus, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.agents.pricing import load_price_table
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import (
    add_experiments,
    daemon_home,
    dagster_daemon,
    resources_for,
    write_experiments,
)
from tests.support.warm_start.server import WARM_START_ENV

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


def _declare_and_ingest(instance: DagsterInstance, declared: Path, resources: dict, settings: dict) -> None:
    """Declare the experiment ``batched`` with ``settings``, add its partition, ingest the sample."""
    write_experiments(declared, {"batched": settings})
    add_experiments(instance, "batched")
    assert materialize(
        ALL_ASSETS, selection=AssetSelection.assets("multipathqa_csv", "benchmark_items"),
        resources=resources, instance=instance,
    ).success  # fmt: skip


AZURE_KEY = "azure-batch-key-SECRET-0123456789abcdef"


def _provider_settings(provider: str, api: BatchAPIServer) -> dict:
    """openai at its base URL; azure at the resource's endpoint, a Global Batch deployment, the key."""
    if provider == "openai":
        return _settings(api)
    api.azure_key, api.deployments = AZURE_KEY, {"gpt5-global-batch"}  # refused or failed otherwise
    azure = {"provider": "azure", "azure_endpoint": api.base_url, "deployment": "gpt5-global-batch"}
    return {k: v for k, v in _settings(api).items() if k != "base_url"} | azure


@pytest.mark.parametrize("provider", ["openai", "azure"])
def test_a_cell_waits_on_its_batches_then_completes_at_half_price(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = result_key("batched", "gtex")
    # each batch ends on its second look: a pass submits a round, looks once and stops
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        _declare_and_ingest(instance, declared, resources, _provider_settings(provider, api))
        passes, observations = 0, []
        gtex_ok = 2  # the sample's gtex items with a readable slide
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
            views = list(data.glob("journals/*/gtex.batches/views/*.view"))
            assert len(views) == gtex_ok * (passes - 1)  # each waiting run's crops so far, kept for replays
            assert passes < 10
        meta = result.asset_materializations_for_node("predictions")[0].metadata
        assert not list(data.glob("journals/*/gtex.batches/views"))  # the cell is complete: deleted
        assert passes == 3  # the scripted model crops once, then answers: 2 rounds, 3 passes
        # GIANT takes one round per step (the scripted model crops once, then answers: 2 calls per run)
        waits = [o.event_specific_data.asset_observation.metadata for o in observations]
        named = [m["batches"].value for m in waits if "batches" in m]  # which batches, beside the progress
        assert named and all(named) and {b for names in named for b in names} <= set(api.batches)
        assert set(api.answered.values()) == {1}, "a request was paid for twice"
        assert meta["batches_total"].value == len(api.batches) >= 2
        # the provider's own batch API: Azure's resource routes, every line to the deployment
        assert {b.kind for b in api.batches.values()} == {provider}
        if provider == "azure":
            assert set(api.azure_auth) == {"api-key"} and ("POST", "/openai/batches") in api.calls
            assert {body["model"] for b in api.batches.values() for _, body in b.lines} == {
                "gpt5-global-batch"
            }
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        rows = con.sql("select error_kind, input_tokens, cached_input_tokens, output_tokens, cost_usd "
                       "from predictions").fetchall()  # fmt: skip
    assert len([r for r in rows if r[0] is None]) == gtex_ok
    price = load_price_table().lookup("gpt-5")[1]
    for _, n_in, cached, n_out, cost in rows:
        if n_in:  # batch price: half of what the same tokens cost synchronously
            assert cost == pytest.approx(price.usd(n_in, n_out, cached) / 2, rel=1e-9)
    stored = [
        f.read_bytes() for f in data.rglob("*") if f.is_file()
    ]  # journals, batch store, Parquet, DuckDB
    assert stored and not any(AZURE_KEY.encode() in blob for blob in stored)
    assert meta["cost_usd_now_sync_equivalent"].value == pytest.approx(
        2 * meta["cost_usd_now"].value, abs=2.1e-6
    )  # both are rounded to 6 decimals: doubling the rounded value may differ by 1e-6


def test_only_the_daemon_stays_up_and_the_row_completes(tmp_path: Path, sample_wsi_root: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    daemon_home(home)
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
        # sensors tick every 2 s: the sensor also looks at the batch the launched run waits on (the loopback
        # provider answers a batch's lines once however many look as it ends)
        with dagster_daemon(env, REPO):
            deadline = time.monotonic() + 240
            while not (_metrics_landed(data) and _cell_runs_finished(home)):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"row not complete; batches {[(b.id, b.status) for b in api.batches.values()]}"
                    )
                time.sleep(1)
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


def test_open_batches_are_listed_and_cancelled_from_the_cli(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from giant_assets.platform import experiments_cli
    from giant_assets.platform.batch_sensor import open_batches

    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = str(result_key("batched", "tcga"))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1000) as api:
        write_experiments(declared, {"batched": _settings(api)})
        add_experiments(instance, "batched")
        ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
        assert materialize(ALL_ASSETS, selection=ingest, resources=resources, instance=instance).success
        cell = materialize(
            ALL_ASSETS, selection=CELL, partition_key=key, resources=resources, instance=instance
        )
        assert cell.success and not cell.asset_materializations_for_node("predictions")
        (first,) = api.batches
        assert experiments_cli.main(["batches"]) == 0
        listed = capsys.readouterr().out
        assert f"{key}\t{first}\t" in listed and "1 batch(es) open" in listed
        assert experiments_cli.main(["batches", "--cancel"]) == 2  # cancelling needs the experiment's name
        assert experiments_cli.main(["batches", "batched", "--cancel"]) == 0
        assert api.batches[first].cancelled and "1 batch(es) cancelled for batched" in capsys.readouterr().out
        assert [b["cancel_requested"] > 0 for b in open_batches(data)] == [True]  # the sensor skips it
        # the cell's next run by hand stores what the cancelled batch finished and re-sends the rest
        again = materialize(
            ALL_ASSETS, selection=CELL, partition_key=key, resources=resources, instance=instance
        )
        assert again.success and len(api.batches) == 2 and not api.answered
        second = next(b for b in api.batches if b != first)
        assert sorted(c for c, _ in api.batches[second].lines) == sorted(
            c for c, _ in api.batches[first].lines
        )


def test_the_estimate_is_logged_before_spending_and_checked_after(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = str(result_key("paid", "gtex"))
    with ScriptedModelServer(rule=demo_policy) as model:
        write_experiments(
            declared, {"paid": {"agent": "giant", "model": "gpt-5", "base_url": model.openai_base_url}}
        )
        add_experiments(instance, "paid")
        ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
        assert materialize(ALL_ASSETS, selection=ingest, resources=resources, instance=instance).success
        result = materialize(
            ALL_ASSETS, selection=CELL, partition_key=key, resources=resources, instance=instance
        )
    assert result.success
    logs = [
        e.message for e in instance.all_logs(result.run_id) if "estimate before spending" in (e.message or "")
    ]
    assert logs and "2 run(s) to do" in logs[0] and "$" in logs[0]
    meta = result.asset_materializations_for_node("predictions")[0].metadata
    assert 0 < meta["estimate_usd_low"].value < meta["estimate_usd_high"].value
    # progress in the UI as the runs go: observations of the partition, the last one when they end
    events = [e for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    last = events[-1].event_specific_data.asset_observation
    assert (
        last.partition == key and last.metadata["runs_done"].value == last.metadata["runs_to_do"].value == 2
    )
    assert last.metadata["cost_usd_so_far"].value == pytest.approx(meta["cost_usd_now"].value, abs=1e-6)
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        per_item, low, high, cost = con.sql(
            "select usd_per_item, est_usd_per_item_low, est_usd_per_item_high, cost_usd "
            "from benchmark_metrics"
        ).fetchone()
    assert per_item == pytest.approx(cost / 2) and 0 < low < high


def test_a_killed_process_loses_nothing_and_pays_nothing_twice(tmp_path: Path, sample_wsi_root: Path) -> None:
    """hold mode: SIGKILL the CLI while it polls its first round; the next run adopts that batch."""
    data, home, declared = tmp_path / "data", tmp_path / "dagster_home", tmp_path / "experiments.yaml"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_WSI_ROOT": str(sample_wsi_root),
            "GIANT_EXPERIMENTS": str(declared)}  # fmt: skip
    key = str(result_key("held", "gtex"))
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=10**6) as api:
        write_experiments(declared, {"held": _settings(api, batch_wait="hold", batch_poll_s=0.2)})
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, "held")
            ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
            assert materialize(ALL_ASSETS, selection=ingest, resources=resources, instance=instance).success
        cli = subprocess.Popen(
            [BIN / "dagster", "asset", "materialize", "-m", "giant_assets.platform.definitions",
             "--select", ",".join(CELL_NAMES), "--partition", key],
            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not any(b.polls >= 2 for b in api.batches.values()):  # submitted, and polled while held
                assert cli.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        finally:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
        (first,) = api.batches
        api.polls_to_finish = 1
        api.batches[first].polls_to_finish = api.batches[first].polls + 1
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            again = materialize(
                ALL_ASSETS, selection=CELL, partition_key=key, resources=resources, instance=instance
            )
        assert again.success and again.asset_materializations_for_node("predictions")
        assert set(api.answered.values()) == {1}, "a request was paid for twice"
        assert len(api.batches) == 2  # the killed run's round was adopted, not sent again


def test_a_cell_whose_estimate_is_above_the_budget_is_refused_before_anything_is_submitted(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = result_key("batched", "gtex")
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model) as api:
        _declare_and_ingest(instance, declared, resources, _settings(api, budget_usd=0.0001))
        result = materialize(ALL_ASSETS, selection=CELL, partition_key=str(key), resources=resources,
                             instance=instance, raise_on_error=False)  # fmt: skip
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.event_specific_data.error.message
        assert "nothing submitted" in message and "above budget_usd $0.0001 even at its low end" in message
        assert not api.batches and not model.requests  # nothing sent, nothing paid
    assert not any(f.read_text().strip() for f in data.glob("journals/*/gtex.jsonl"))  # no run journalled


def test_the_budget_check_of_batch_mode(tmp_path: Path) -> None:
    from giant_assets.agents.cell import batch_budget_check
    from giant_assets.agents.providers.batching import BatchStore
    from giant_assets.experiments.spec import Experiment

    exp = Experiment(name="b", agent="giant", model="gpt-5", batch=True, budget_usd=10.0)
    fresh = BatchStore(tmp_path / "fresh")
    estimate = {"estimate_usd_low": 4.0, "estimate_usd_high": 30.0}
    assert batch_budget_check(exp, fresh, estimate)[0] is None
    assert "may exceed budget_usd $10" in batch_budget_check(exp, fresh, estimate)[1]
    assert batch_budget_check(exp, fresh, {"estimate_usd_low": 4.0, "estimate_usd_high": 9.0}) == (None, None)
    low_above = {"estimate_usd_low": 12.0, "estimate_usd_high": 30.0}
    assert "nothing submitted" in batch_budget_check(exp, fresh, low_above)[0]
    # a cell already under way goes on (refusing would leave paid rounds unused); no budget: no check
    started = BatchStore(tmp_path / "started")
    started.record_intent("round-0", ["g1"])
    assert batch_budget_check(exp, BatchStore(tmp_path / "started"), low_above) == (None, None)
    assert batch_budget_check(exp.model_copy(update={"budget_usd": 0.0}), fresh, low_above) == (None, None)


def test_a_round_whose_process_stopped_while_submitting_is_named_by_the_sensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from dagster import build_sensor_context

    from giant_assets.agents.providers.batching import BatchStore
    from giant_assets.platform import batch_sensor
    from giant_assets.platform.definitions import ALL_SENSORS
    from giant_assets.platform.resources import ExperimentsResource, StorageResource

    data = tmp_path / "data"
    folder = data / "journals" / "h" / "gtex.batches"
    # what a process writes just before a batch create, and then nothing: it was killed in the window
    BatchStore(folder, {"experiment": "batched", "partition": "gtex|batched"}).record_intent("t-0", ["g1"])
    now = time.time()
    assert batch_sensor.orphaned_rounds(data, now=now) == []  # a create takes seconds: not yet
    (orphan,) = batch_sensor.orphaned_rounds(data, now=now + batch_sensor.ORPHAN_AFTER_S + 1)
    assert (orphan["partition"], orphan["round_tag"], orphan["custom_ids"]) == ("gtex|batched", "t-0", ["g1"])

    monkeypatch.setattr(batch_sensor, "ORPHAN_AFTER_S", 0.0)
    sensor = next(s for s in ALL_SENSORS if s.name == "batch_rounds_sensor")
    declared = write_experiments(tmp_path / "e.yaml", {"batched": {"agent": "random"}})
    resources = {
        "storage": StorageResource(data_dir=str(data)),
        "experiments": ExperimentsResource(path=str(declared)),
    }
    with DagsterInstance.ephemeral() as instance:
        result = sensor(build_sensor_context(instance=instance, resources=resources))
    reason = result.skip_reason.skip_message
    assert "gtex|batched: round t-0 of " in reason
    assert (
        "has no recorded batch (its process stopped while submitting): materialize the cell again" in reason
    )
    # and `giant-experiments batches` lists it beside the open batches
    from giant_assets.platform import experiments_cli

    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    assert experiments_cli.main(["batches"]) == 0
    listed = capsys.readouterr().out
    assert "0 batch(es) open" in listed and "gtex|batched: round t-0 of " in listed
    # the next run of the cell adopts the batch (its record names the round): nothing is named any more
    BatchStore(folder).record_batch({"batch_id": "b1", "custom_ids": ["g1"], "status": "submitted",
                                     "round_tag": "t-0"})  # fmt: skip
    assert batch_sensor.orphaned_rounds(data, now=now + 10**6) == []


def test_the_sensor_relaunches_a_cell_whose_launched_run_died_then_says_it_cannot_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """One run per cell for a split round's two ended batches; a failed launched run is launched again
    under a new run key; a run shown running whose process died (no lock held) too; after MAX_LAUNCHES
    the sensor says the cell cannot go on by itself."""
    import asyncio

    from dagster import build_sensor_context
    from dagster._core.test_utils import create_run_for_test

    from giant_assets.agents.providers import make_chat_model
    from giant_assets.agents.providers.batching import BatchStore, batch_client
    from giant_assets.platform import batch_sensor
    from giant_assets.platform.definitions import ALL_SENSORS
    from giant_assets.platform.resources import ExperimentsResource, StorageResource

    data, partition = tmp_path / "data", "gtex|batched"
    folder = data / "journals" / "h" / "gtex.batches"
    sensor = next(s for s in ALL_SENSORS if s.name == "batch_rounds_sensor")
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        declared = write_experiments(tmp_path / "e.yaml", {"batched": _settings(api)})
        resources = {"storage": StorageResource(data_dir=str(data)),
                     "experiments": ExperimentsResource(path=str(declared))}  # fmt: skip

        async def submit() -> list[str]:  # a round split in two batches, recorded as a cell records them
            from giant_assets.experiments.declared import load_experiments

            chat = make_chat_model(load_experiments(declared)["batched"], None)
            try:
                client = batch_client(chat)
                body = {"model": "gpt-5", "input": "x"}
                return [await client.submit([(f"g{n}", body)], f"t-{n}") for n in range(2)]
            finally:
                await chat.aclose()

        ids = asyncio.run(submit())
        store = BatchStore(folder, {"experiment": "batched", "partition": partition})
        for n, batch_id in enumerate(ids):
            store.record_batch({"batch_id": batch_id, "custom_ids": [f"g{n}"], "status": "submitted",
                                "submitted_at": time.time()})  # fmt: skip
        with DagsterInstance.ephemeral() as instance:
            cursor, keys, reasons = None, [], []

            def tick() -> None:
                nonlocal cursor
                result = sensor(build_sensor_context(instance=instance, resources=resources, cursor=cursor))
                cursor = result.cursor
                keys.extend(r.run_key for r in result.run_requests or [])
                if result.skip_reason:
                    reasons.append(result.skip_reason.skip_message)

            def last_run_is(status: DagsterRunStatus) -> None:
                tags = {"dagster/run_key": keys[-1], "dagster/partition": partition}
                create_run_for_test(instance, job_name="evaluate_cell", status=status, tags=tags)

            tick()
            assert keys == [f"batch-{ids[0]}-1"]  # both batches ended: one run of the cell
            tick()
            assert len(keys) == 1  # its run not created yet: nothing more
            last_run_is(DagsterRunStatus.FAILURE)  # a 500 on the download, say: the batch is still open
            tick()
            assert keys[-1] == f"batch-{ids[0]}-2"
            last_run_is(DagsterRunStatus.STARTED)  # shown running; its process killed: no lock held
            tick()
            assert len(keys) == 2  # not yet: it may be starting
            monkeypatch.setattr(batch_sensor, "STUCK_AFTER_S", 0.0)
            tick()
            assert keys[-1] == f"batch-{ids[0]}-3"
            last_run_is(DagsterRunStatus.FAILURE)
            tick()
            assert len(keys) == 3 and "gtex|batched: cannot go on by itself" in reasons[-1]
            assert "materialize the cell by hand" in reasons[-1]
        # `giant-experiments batches` says what an ended, unstored batch waits for
        from giant_assets.platform import experiments_cli

        monkeypatch.setenv("GIANT_DATA_DIR", str(data))
        monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
        assert experiments_cli.main(["batches"]) == 0
        listed = capsys.readouterr().out
        assert listed.count("ended at the provider, its answers not stored yet") == 2, listed


def test_runs_of_one_item_stay_separate_samples_in_batch_mode(tmp_path: Path, sample_wsi_root: Path) -> None:
    """runs_per_item: 3 with Claude (whose runs send byte-identical first requests): 3x the lines of one
    run each, every line paid once, as many lines as the synchronous run makes calls."""
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = str(result_key("batched", "gtex"))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        settings = _settings(api, provider="anthropic", model="claude-sonnet-4-5", base_url=api.base_url,
                             runs_per_item=3)  # fmt: skip
        _declare_and_ingest(instance, declared, resources, settings)
        for _ in range(6):
            result = materialize(ALL_ASSETS, selection=CELL, partition_key=key, resources=resources,
                                 instance=instance)  # fmt: skip
            if result.asset_materializations_for_node("predictions"):
                break
        assert result.asset_materializations_for_node("predictions")
        lines = [cid for b in api.batches.values() for cid, _ in b.lines]
        assert set(api.created_lines.values()) == {1} and set(api.answered.values()) == {1}
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        runs, calls = con.sql(
            "select count(*), sum(n_calls) from (select p.benchmark_id, p.run_index, count(*) as n_calls "
            "from trajectory_steps p where p.action != 'thumbnail' group by all)"
        ).fetchone()
    assert runs == 2 * 3 and len(lines) == calls == 2 * 3 * 2  # 2 readable items x 3 runs x 2 calls


def test_a_cell_whose_batches_all_expire_fails_naming_them_and_what_to_do(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    key = str(result_key("batched", "gtex"))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["expired"] * 10
        _declare_and_ingest(instance, declared, resources, _settings(api, batch_max_line_attempts=2))
        for _ in range(4):
            result = materialize(ALL_ASSETS, selection=CELL, partition_key=key, resources=resources,
                                 instance=instance, raise_on_error=False)  # fmt: skip
            if not result.success:
                break
        assert not result.success
        ids = list(api.batches)
        assert len(ids) == 2 and set(api.created_lines.values()) == {2} and not api.answered
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert all(i in message for i in ids), message
    assert "batch_max_line_attempts is 2" in message and "raise batch_max_line_attempts" in message


START_TIMEOUT_S = 10  # the test instance's run monitoring: a run not started after this is failed


@pytest.mark.timeout(400)
def test_a_daemon_killed_with_its_starting_run_gets_the_cell_relaunched_after_the_start_timeout(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    """kill -9 of the whole daemon process group (daemon, code server, the run process it was starting)
    while a sensor-launched run of the cell is STARTING: the run stays STARTING with nothing alive to
    end it. The next daemon's run monitoring fails it after ``start_timeout_seconds`` (the batch sensor's
    own stuck rule would wait 15 minutes), and the batch sensor launches the cell again (attempt 2) as
    after any failed run. (That relaunch is then stopped: a run process takes more than 10 s to start on
    a loaded machine, and a relaunched run completing the row is test_only_the_daemon_stays_up's.)
    Mutation: run monitoring off in dagster_home/dagster.yaml (nothing is relaunched: times out)."""
    data, home, declared = tmp_path / "data", tmp_path / "dagster_home", tmp_path / "experiments.yaml"
    daemon_home(home, start_timeout_seconds=START_TIMEOUT_S, poll_interval_seconds=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_WSI_ROOT": str(sample_wsi_root),
            "GIANT_EXPERIMENTS": str(declared)}  # fmt: skip
    # cold: a warm command is its own process group, killed by its waiter only after its starter died, so
    # the run could reach STARTED in between; this test needs the whole group gone at one instant
    env[WARM_START_ENV] = "0"
    key = str(result_key("batched", "panda"))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        write_experiments(declared, {"batched": _settings(api, batch_poll_s=1)})
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, "batched")
            resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
            assert materialize(
                ALL_ASSETS, selection=AssetSelection.assets("multipathqa_csv", "benchmark_items"),
                resources=resources, instance=instance,
            ).success  # fmt: skip
            assert materialize(
                ALL_ASSETS, selection=CELL, partition_key=key, resources=resources, instance=instance
            ).success  # the first round is submitted; the cell waits on it
        assert len(api.batches) == 1
        with dagster_daemon(env, REPO) as daemon:
            deadline = time.monotonic() + 120
            while not (starting := _sensor_runs(home, DagsterRunStatus.STARTING)):
                assert time.monotonic() < deadline, "the batch sensor launched no run"
                time.sleep(0.05)
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon, its code server and the run it starts
            daemon.wait()
        (killed,) = starting
        time.sleep(1)
        assert [r.status for r in _sensor_runs(home)] == [DagsterRunStatus.STARTING]  # nothing ends it
        with dagster_daemon(env, REPO):
            deadline = time.monotonic() + 150
            while len(runs := _sensor_runs(home)) < 2:
                assert time.monotonic() < deadline, f"not relaunched: {[(r.run_id, r.status) for r in runs]}"
                time.sleep(0.5)
    killed, again = runs
    assert killed.status == DagsterRunStatus.FAILURE
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        why = [e.message for e in instance.all_logs(killed.run_id, of_type=DagsterEventType.RUN_FAILURE)]
    assert why and f"taking longer than {START_TIMEOUT_S} seconds to start" in why[0]
    assert again.tags["dagster/partition"] == key
    assert again.tags["dagster/run_key"] == killed.tags["dagster/run_key"][:-1] + "2"  # attempt 2


def _sensor_runs(home: Path, status: DagsterRunStatus | None = None) -> list:
    """The runs the batch sensor launched, oldest first (only those in ``status`` if given)."""
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = [r for r in instance.get_runs() if r.tags.get("dagster/sensor_name") == "batch_rounds_sensor"]
    return [r for r in reversed(runs) if status is None or r.status == status]
