"""A plug-in agent with ``batch: true``: its ``kit.model`` calls go through the provider's batch API (the
loopback emulator, ``demo/batch_api.py``), one round per call of a run; the answers are scored, each
request paid once at half the synchronous price. (Waiting between rounds without a materialization is
batch mode's own, ``tests/platform/test_batch_mode.py``; a second model is refused in batch mode,
``test_plugin_failures.py`` and ``test_plugin_estimate.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetSelection, materialize

from giant_assets.agents.pricing import load_price_table
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

PACKAGES = Path(__file__).parent / "packages"
BENCHMARK = "tcga_slidebench"  # three items, every slide readable
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")


def test_a_plugins_calls_go_through_the_batch_api_and_are_scored(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    instance, resources = ingested_sample(data, declared, sample_wsi_root)
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        settings = {"agent": "lab_agent:make_agent", "model": "gpt-5", "base_url": api.openai_base_url,
                    "batch": True, "batch_poll_s": 1}  # fmt: skip
        write_experiments(declared, {"lab-batched": settings})
        add_experiments(instance, "lab-batched")
        passes = 0
        while True:
            passes += 1
            result = materialize(
                ALL_ASSETS, selection=CELL, partition_key=result_key("lab-batched", BENCHMARK),
                resources=resources, instance=instance,
            )  # fmt: skip
            assert result.success
            if result.asset_materializations_for_node("predictions"):
                break
            assert not result.asset_materializations_for_node("benchmark_metrics")  # waiting
            assert passes < 6
        routes = {path for _, path in api.calls}
        batches = len(api.batches)
        answered = dict(api.answered)
        direct = len(model.requests)
    # the lab agent asks twice a run (a proposal, then the answer): two rounds of three requests
    assert passes == 1 and batches == 2  # each batch ends on its first look: one pass, two rounds
    assert len(answered) == 3 * 2 and set(answered.values()) == {1}  # every request paid once
    assert not any("chat/completions" in r for r in routes)  # nothing sent outside the batches
    assert direct == len(answered)  # the emulator answers each batch line once through the model
    store = ParquetStore(data)
    runs = store.read("predictions", [f"lab-batched/{BENCHMARK}"])
    assert len(runs) == 3 and runs["error_kind"].isna().all()
    price = load_price_table().lookup("gpt-5")[1]
    for row in runs.to_dict("records"):
        assert [s["action"] for s in json.loads(row["trajectory_json"])] == ["thumbnail", "crop", "answer"]
        sync = price.usd(int(row["input_tokens"]), int(row["output_tokens"]), int(row["cached_input_tokens"]))
        assert row["cost_usd"] == pytest.approx(sync / 2, rel=1e-9)  # batch price: half
    voted = store.read("item_predictions", [f"lab-batched/{BENCHMARK}"])
    metrics = store.read("benchmark_metrics")
    row = metrics[metrics["experiment"] == "lab-batched"].iloc[0]
    truth = voted["truth_label"].astype(int)
    correct = (voted["predicted_label"].astype("Int64") == truth).fillna(False)
    assert row["benchmark_name"] == BENCHMARK and row["n_items"] == 3
    assert row["value_pct"] == pytest.approx(100 * correct.mean())
    assert pd.notna(voted["predicted_label"]).all()
