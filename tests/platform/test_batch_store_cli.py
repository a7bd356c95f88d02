"""`giant-experiments batches`, `status` and the batch sensor over batch stores as they are found on disk:
a store edited by hand or damaged is read record by record, each bad line named by file and line, the
good batches still listed and asked about at the (loopback) provider; a batch the provider showed ended
stays ended however a later look shows it, and one whose looks contradict each other is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import AssetSelection, DagsterInstance, build_sensor_context, materialize

from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform import experiments_cli
from giant_assets.platform.definitions import ALL_ASSETS, ALL_SENSORS
from giant_assets.platform.partitions import result_key
from giant_assets.platform.resources import ExperimentsResource, StorageResource
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

BODY = {"model": "gpt-5", "input": [{"role": "user", "content": [{"type": "input_text", "text": "q"}]}]}


def _settings(api: BatchAPIServer, **kw) -> dict:
    return {"agent": "giant", "model": "gpt-5", "base_url": api.openai_base_url, "max_steps": 3,
            "batch": True} | kw  # fmt: skip


def test_a_corrupt_store_is_named_by_file_and_line_and_its_good_batches_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    folder = data / "journals" / "h" / "gtex.batches"
    folder.mkdir(parents=True)
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1000) as api:
        write_experiments(declared, {"batched": _settings(api)})
        batch = api._create("openai", "/v1/responses", [("g1", BODY)])
        record = {"experiment": "batched", "partition": "gtex|batched", "batch_id": batch.id, "requests": 1,
                  "custom_ids": ["g1"], "status": "submitted", "submitted_at": 1000.0}  # fmt: skip
        (folder / "batches.jsonl").write_text(
            '{"batch_id": "b0", "submitted_at": 1e308}\n' + json.dumps(record) + "\n" + "[" * 100_000 + "\n"
        )
        # an intent without its round tag (once: KeyError: 'round_tag'), then a good, old, orphaned one
        orphan = {"experiment": "batched", "partition": "gtex|batched", "round_tag": "t-0",
                  "custom_ids": ["g2"], "at": 1000.0}  # fmt: skip
        (folder / "intents.jsonl").write_text(
            json.dumps({"custom_ids": ["g9"], "at": 5.0}) + "\n" + json.dumps(orphan) + "\n"
        )
        assert experiments_cli.main(["batches"]) == 0
        out, err = capsys.readouterr()
        sensor = next(s for s in ALL_SENSORS if s.name == "batch_rounds_sensor")
        resources = {"storage": StorageResource(data_dir=str(data)),
                     "experiments": ExperimentsResource(path=str(declared))}  # fmt: skip
        with DagsterInstance.ephemeral() as instance:
            context = build_sensor_context(instance=instance, resources=resources)
            result = sensor(context)
    assert f"gtex|batched\t{batch.id}\t1 requests\tsince 1970-01-01 00:16 UTC\tvalidating" in out
    assert "1 batch(es) open" in out and "gtex|batched: round t-0 of 1970-01-01 00:16 UTC" in out
    assert "Traceback" not in out + err and "KeyError" not in out + err
    warned = err.splitlines()
    assert warned == [
        f"warning: batch store {folder / 'batches.jsonl'} line 1: submitted_at 1e+308 is not a unix time "
        "(left out)",
        f"warning: batch store {folder / 'batches.jsonl'} line 3: not JSON (left out)",
        f"warning: batch store {folder / 'intents.jsonl'} line 1: no round_tag (left out)",
    ], err
    # the sensor ticks over the same store: it waits on the good batch and says nothing is wrong but that
    assert "1 batch(es) running: gtex|batched: " + batch.id in result.skip_reason.skip_message


CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")


def test_a_batch_ended_then_shown_running_on_every_other_look_completes_and_is_named(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The held-out case: once ended, every other look at a batch shows it in_progress without files.
    The sensor's look that sees it ended is kept in the store; a later look showing it running is named
    (sensor, `batches`, `status`) and changes nothing; the launched run reads the files the ended look
    named, and the row completes, each line paid once. Before: the sensor saw it ended, the launched run
    saw it running and stopped, and so on, five materializations and more, no row, no word.
    Mutations: the sensor not keeping the ended look; the contradiction not named (sensor, CLI,
    status)."""
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    key = str(result_key("batched", "gtex"))
    sensor = next(s for s in ALL_SENSORS if s.name == "batch_rounds_sensor")
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        api.flip_every_other = 100  # every batch
        write_experiments(declared, {"batched": _settings(api, batch_poll_s=0.001)})
        instance, resources = ingested_sample(data, declared, sample_wsi_root)
        add_experiments(instance, "batched")
        sensor_resources = {"storage": resources["storage"], "experiments": resources["experiments"]}

        def cell() -> bool:
            """A run of the cell; True when predictions were materialized (the row is complete)."""
            result = materialize(ALL_ASSETS, selection=CELL, partition_key=key, resources=resources,
                                 instance=instance)  # fmt: skip
            assert result.success
            return bool(result.asset_materializations_for_node("predictions"))

        def tick(cursor: str | None) -> tuple:
            context = build_sensor_context(instance=instance, resources=sensor_resources, cursor=cursor)
            result = sensor(context)
            return result, json.loads(result.cursor or "{}")

        assert not cell()  # round 1 submitted; its first look: running
        (first,) = api.batches
        ended, cursor = tick(None)  # its second look: ended, kept in the store
        assert [r.partition_key for r in ended.run_requests] == [key]
        # the next look: in_progress, no files (its launched run not started: no second launch)
        shown_running, cursor = tick(json.dumps(cursor))
        reason = shown_running.skip_reason.skip_message
        assert f"batch {first} contradicts itself: shown ended (completed) at " in reason, reason
        assert "now in_progress; held as ended" in reason
        assert experiments_cli.main(["status", "batched"]) == 0
        assert f"batch {first} contradicts itself: shown ended (completed)" in capsys.readouterr().out
        assert experiments_cli.main(["batches"]) == 0  # its look: ended
        listed = capsys.readouterr().out
        assert "\tcompleted\t" in listed and "ended at the provider, its answers not stored yet" in listed
        assert experiments_cli.main(["batches"]) == 0  # its look: in_progress again
        listed = capsys.readouterr().out
        assert "\tin_progress\t" in listed and f"batch {first} contradicts itself" in listed
        assert "ended at the provider, its answers not stored yet" in listed  # held as ended
        runs = 0
        while not cell():  # as the sensor launches it: each run reads what the ended look named
            runs += 1
            assert runs < 5, f"waited on forever: {[(b.id, b.status) for b in api.batches.values()]}"
            requested, cursor = tick(json.dumps(cursor | {"launched": {}}))  # the launched run is ours
            assert [r.partition_key for r in requested.run_requests] == [key]
        assert runs == 1 and len(api.batches) == 2  # the crop step's round, then the answer's
        assert set(api.answered.values()) == {1}, "a request was paid for twice"
