"""Scores that stay right, on real materializations against a loopback model that counts requests:
re-materializing predictions reuses the journal, a second experiment with the same answer settings
shares it, and re-scoring with another scoring setting changes labels with zero model requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    demo_policy,
)
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

KEY_ENV = "GIANT_TEST_RESCORE_KEY"
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
RESCORE = AssetSelection.assets("item_predictions", "benchmark_metrics")


def null_grade_for_panda(request: RecordedRequest) -> Reply:
    """PANDA: a null ISUP grade straight away (as models write for benign tissue); others: the demo."""
    if "ISUP" in request.text:
        return answer_reply({"isup_grade": None}, prose="No tumour seen.")
    return demo_policy(request)


@pytest.fixture
def grid(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv(KEY_ENV, "sk-rescore-test")
    instance = DagsterInstance.ephemeral()
    declared = tmp_path / "experiments.yaml"
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))

    def run(selection: AssetSelection, key=None) -> None:
        result = materialize(
            ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
        )
        assert result.success

    run(AssetSelection.assets("multipathqa_csv", "benchmark_items"))
    with ScriptedModelServer(rule=null_grade_for_panda) as server:
        settings = {
            "agent": "giant",
            "model": "scripted-rescore",
            "base_url": server.openai_base_url,
            "api_key_env": KEY_ENV,
            "max_steps": 3,
        }
        write_experiments(
            declared,
            {"benign": settings, "strict": settings | {"panda_null_grade": "no_answer"}},
        )
        add_experiments(instance, "benign", "strict")
        yield run, server, declared, settings, ParquetStore(data)


def test_rescoring_and_shared_journals_ask_the_model_nothing(grid) -> None:
    run, server, declared, settings, store = grid
    run(CELL, result_key("benign", "panda"))
    asked = len(server.requests)
    assert asked > 0
    first = store.read("benchmark_metrics", ["benign/panda"]).iloc[0]
    labels = store.read("item_predictions", ["benign/panda"])
    readable = labels[labels["slide_available"]]
    assert first["n_null_grades"] == len(readable) > 0 and (readable["predicted_label"] == 0).all()

    # the same answer settings under another name (only the scoring setting differs): same journal
    run(CELL, result_key("strict", "panda"))
    assert len(server.requests) == asked
    strict = store.read("item_predictions", ["strict/panda"])
    assert strict["predicted_label"].isna().all()  # null grade read as no answer
    meta = store.read("predictions", ["strict/panda"])
    assert set(meta["config_hash"]) == set(store.read("predictions", ["benign/panda"])["config_hash"])

    # re-scoring an experiment from what is stored after its scoring setting changed: no request
    write_experiments(declared, {"benign": settings | {"panda_null_grade": "no_answer"}, "strict": settings})
    run(RESCORE, result_key("benign", "panda"))
    run(RESCORE, result_key("strict", "panda"))
    run(CELL, result_key("benign", "panda"))  # predictions again too: every run comes from the journal
    assert len(server.requests) == asked
    assert store.read("item_predictions", ["benign/panda"])["predicted_label"].isna().all()
    assert (store.read("item_predictions", ["strict/panda"])["predicted_label"].dropna() == 0).all()
    rescored = store.read("benchmark_metrics", ["benign/panda"]).iloc[0]
    assert rescored["n_answered"] == 0 < first["n_answered"]
    assert rescored["value_pct"] <= first["value_pct"]
