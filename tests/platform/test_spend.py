"""Every dollar accounted for, through real materializations of one predictions partition (GIANT against
the loopback scripted model, priced through GIANT_PRICES): the budget is a ledger over every
materialization, a cell whose estimate cannot fit its budget sends nothing, a failed run's paid replies
are billed (and shown apart, in the predictions' metadata, benchmark_metrics and the leaderboard) and
replayed for free when it runs again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import AssetKey, AssetSelection, DagsterEventType, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.runs.journal import Journal
from giant_assets.runs.replies import replies_path
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

BENCHMARK = "tcga_slidebench"  # three items, every slide readable
MODEL = "scripted-spend"


class Refusing:
    """The demo's policy, except that the answer call (the second) about one question fails (503)."""

    def __init__(self) -> None:
        self.bad: str | None = None
        self.down = True

    def __call__(self, request: RecordedRequest) -> Reply:
        self.bad = self.bad or request.question
        if self.down and request.question == self.bad and request.assistant_turns >= 1:
            return Reply(status=503, headers={"Retry-After": "0.01"}, text="upstream overloaded")
        return demo_policy(request)


@pytest.fixture
def cell(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input_per_mtok": 100.0, "output_per_mtok": 400.0}}))
    monkeypatch.setenv("GIANT_PRICES", str(prices))
    declared = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, declared, sample_wsi_root)
    model = Refusing()
    with ScriptedModelServer(rule=model) as server:
        base = {"agent": "giant", "model": MODEL, "base_url": server.openai_base_url, "max_steps": 3,
                "runs_per_item": 2, "concurrency": 1}  # fmt: skip

        def run(name: str = "spend", assets: tuple[str, ...] = ("predictions",), **extra):
            write_experiments(declared, {name: base | extra})
            add_experiments(instance, name)
            return materialize(
                ALL_ASSETS, selection=AssetSelection.assets(*assets),
                partition_key=None if "leaderboard" in assets else result_key(name, BENCHMARK),
                resources=resources, instance=instance, raise_on_error=False,
            )  # fmt: skip

        yield run, model, server, data


def _meta(result) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node("predictions")[0].metadata.items()}


def _failure(result) -> str:
    event = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    return event.step_failure_data.user_failure_data.description


def test_failed_runs_are_billed_apart_and_replayed_not_repaid(cell) -> None:
    run, model, server, data = cell
    first = run(max_failed_share=1.0)
    assert first.success
    meta = _meta(first)
    journal = Journal(next((data / "journals").glob(f"*/{BENCHMARK}.jsonl")))
    failed = {(r["benchmark_id"], r["run_index"]) for r in journal.read().values() if r["error_kind"]}
    assert len(failed) == 2  # both runs of the refused question: each paid its crop reply, then failed
    entries = [json.loads(line) for line in replies_path(journal.path).read_text().splitlines()]
    billed = sum(e["cost_usd"] for e in entries)
    lost = sum(e["cost_usd"] for e in entries if (e["benchmark_id"], e["run_index"]) in failed)
    assert lost > 0 and len(entries) == 4 * 2 + 2  # 4 answered runs x 2 calls, 2 paid crops of failed runs
    assert meta["cost_usd_billed"] == pytest.approx(billed, abs=1e-6)
    assert meta["cost_usd_not_counted"] == pytest.approx(lost, abs=1e-6)  # today: not recorded at all
    assert meta["cost_usd_total"] == pytest.approx(billed, abs=1e-6)  # the failed rows keep their cost

    model.down = False
    asked = len(server.requests)
    again = run(max_failed_share=1.0)
    assert again.success and _meta(again)["model_calls_replayed"] == 2
    assert len(server.requests) - asked == 2  # only each failed run's answer call; its crop is replayed
    assert _meta(again)["cost_usd_not_counted"] == pytest.approx(0.0, abs=1e-9)


def test_metrics_and_leaderboard_show_what_was_billed_and_what_did_not_count(cell) -> None:
    run, model, server, data = cell
    scored = run(max_failed_share=1.0, assets=("predictions", "item_predictions", "benchmark_metrics"))
    assert scored.success
    board = run(max_failed_share=1.0, assets=("leaderboard", "leaderboard_long", "leaderboard_stale"))
    assert board.success
    journal = next((data / "journals").glob(f"*/{BENCHMARK}.jsonl"))
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    failed = {(r["benchmark_id"], r["run_index"]) for r in rows if r["error_kind"]}
    entries = [json.loads(line) for line in replies_path(journal).read_text().splitlines()]
    billed = sum(e["cost_usd"] for e in entries)  # the oracle: the reply store, read here
    lost = sum(e["cost_usd"] for e in entries if (e["benchmark_id"], e["run_index"]) in failed)
    assert len(failed) == 2 and 0 < lost < billed
    metrics = ParquetStore(data).read("benchmark_metrics")
    assert metrics["cost_usd_billed"].tolist() == [pytest.approx(billed, abs=1e-6)]
    assert metrics["cost_usd_not_counted"].tolist() == [pytest.approx(lost, abs=1e-6)]
    shown = scored.asset_materializations_for_node("benchmark_metrics")[0].metadata  # the UI's numbers
    assert shown["cost_usd_billed"].value == pytest.approx(billed, abs=1e-6)
    assert shown["cost_usd_not_counted"].value == pytest.approx(lost, abs=1e-6)
    table = board.asset_value(AssetKey("leaderboard")).set_index("experiment")
    assert table.loc["spend", "cost_usd_billed"] == pytest.approx(billed, abs=1e-6)
    assert table.loc["spend", "cost_usd_not_counted"] == pytest.approx(lost, abs=1e-6)
    markdown = board.asset_materializations_for_node("leaderboard")[0].metadata["leaderboard"].value
    assert f"${billed:,.2f} (${lost:,.2f} not counted)" in markdown
    doc = json.loads((data / "results" / "spend" / "results.json").read_text())
    assert doc["metrics"][0]["cost_usd_billed"] == pytest.approx(billed, abs=1e-6)
    assert doc["metrics"][0]["cost_usd_not_counted"] == pytest.approx(lost, abs=1e-6)


def test_the_budget_is_a_ledger_across_materializations_and_a_hopeless_cell_sends_nothing(cell) -> None:
    run, model, server, data = cell
    paid = _meta(run(max_failed_share=1.0))["cost_usd_billed"]  # two runs failed after paying a reply
    model.down = False
    asked = len(server.requests)
    # the budget is what was paid already: the failed runs are not run again (today: $0 spent so far)
    again = run(max_failed_share=1.0, budget_usd=paid)
    assert not again.success and len(server.requests) == asked
    message = _failure(again)
    assert "nothing sent" in message and f"budget_usd ${paid} (${paid:.4f} paid so far)" in message
    # a fresh cell whose estimate is above its budget even at the low end sends nothing either
    hopeless = run("hopeless", max_steps=4, budget_usd=0.015)
    assert not hopeless.success and len(server.requests) == asked
    assert "above what is left of budget_usd $0.015 ($0.0000 paid so far)" in _failure(hopeless)


def test_an_experiment_budget_leaves_the_config_hash_alone() -> None:
    base = Experiment(name="x", agent="giant", model="gpt-5", budget_usd=5.0)
    capped = base.model_copy(update={"experiment_budget_usd": 300.0})
    assert capped.config_hash() == base.config_hash()
    assert (
        Experiment.model_validate(base.model_dump() | {"experiment_budget_usd": 300}).experiment_budget_usd
        == 300
    )
