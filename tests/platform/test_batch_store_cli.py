"""`giant-experiments batches` and the batch sensor over batch stores as they are found on disk: a store
edited by hand or damaged is read record by record, each bad line named by file and line, the good
batches still listed and asked about at the (loopback) provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, build_sensor_context

from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform import experiments_cli
from giant_assets.platform.definitions import ALL_SENSORS
from giant_assets.platform.resources import ExperimentsResource, StorageResource
from tests.support.dagster_env import write_experiments

BODY = {"model": "gpt-5", "input": [{"role": "user", "content": [{"type": "input_text", "text": "q"}]}]}


def _settings(api: BatchAPIServer) -> dict:
    return {
        "agent": "giant",
        "model": "gpt-5",
        "base_url": api.openai_base_url,
        "max_steps": 3,
        "batch": True,
    }


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
