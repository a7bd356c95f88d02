"""A failed run is never a green 0.0: a real materialization of one predictions partition whose model
refuses two of its three items (HTTP 503 until the retries run out) fails, counting the error kinds and
showing the first error, with every retry in the run's log at WARNING; nothing reaches downstream. The
journal keeps the answered run, so materializing again (model back) asks only for the two failed ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, AssetSelection, DagsterEventType, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.runs.journal import Journal
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

BENCHMARK = "tcga_slidebench"  # three items, every slide readable
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")


class FlakyModel:
    """Answers (the demo's policy) for the first item it is asked about; 503 for every other item."""

    def __init__(self) -> None:
        self.good: str | None = None
        self.down = True

    def __call__(self, request: RecordedRequest) -> Reply:
        question = request.question
        self.good = self.good or question
        if self.down and question != self.good:
            return Reply(status=503, headers={"Retry-After": "0.01"}, text="upstream overloaded")
        return demo_policy(request)


@pytest.fixture
def cell(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    declared = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, declared, sample_wsi_root)
    model = FlakyModel()
    with ScriptedModelServer(rule=model) as server:
        settings = {
            "agent": "giant", "model": "scripted-flaky", "base_url": server.openai_base_url,
            "max_steps": 3, "concurrency": 1,
        }  # fmt: skip
        write_experiments(declared, {"flaky": settings})
        add_experiments(instance, "flaky")

        def declare(**extra):
            write_experiments(declared, {"flaky": settings | extra})

        def run():
            return materialize(
                ALL_ASSETS, selection=CELL, partition_key=result_key("flaky", BENCHMARK),
                resources=resources, instance=instance, raise_on_error=False,
            )  # fmt: skip

        yield run, model, server, instance, ParquetStore(data), data, declare


def test_a_partition_with_too_many_failed_runs_fails_and_a_rerun_repeats_only_those(cell) -> None:
    run, model, server, instance, store, data, _ = cell
    failed = run()
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.user_failure_data.description
    assert "2 of 3 runs with a slide failed (67%; max_failed_share 0.2): agent_error 2" in message
    assert "upstream overloaded" in message and "failed after 3 attempts" in message  # request_attempts 3
    assert "only the failed runs are repeated" in message
    logs = instance.all_logs(failed.run_id)
    retries = [e for e in logs if e.level == 30 and "HTTP 503: upstream overloaded; retry" in e.user_message]
    assert len(retries) == 2 * 2  # two retries of each failed run's one call (3 attempts), in the run's log
    # nothing of the partition was stored or scored: no 0.0 goes downstream
    for asset in ("predictions", "benchmark_metrics"):
        assert instance.get_latest_materialization_event(AssetKey(asset)) is None
    journal = Journal(next((data / "journals").glob(f"*/{BENCHMARK}.jsonl")))
    kinds = sorted(str(r["error_kind"]) for r in journal.read().values())
    assert kinds == ["None", "agent_error", "agent_error"]

    model.down = False
    asked_before = len(server.requests)
    assert run().success
    again = {r.question for r in server.requests[asked_before:]}
    assert len(again) == 2 and model.good not in again  # the answered item was not asked again
    rows = store.read("predictions", [f"flaky/{BENCHMARK}"])
    assert len(rows) == 3 and rows["error_kind"].isna().all()


def test_failures_within_the_share_pass_with_the_count_in_the_metadata(cell) -> None:
    run, *_, declare = cell
    declare(max_failed_share=0.7)
    result = run()
    assert result.success
    meta = result.asset_materializations_for_node("predictions")[0].metadata
    assert meta["failed_runs"].value == 2 and meta["failed_share"].value == pytest.approx(0.6667)


def test_a_paid_experiment_without_a_budget_calls_nothing(cell) -> None:
    run, model, server, instance, store, data, declare = cell
    declare(base_url="https://api.openai.com/v1", model="gpt-5")
    result = run()
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.user_failure_data.description
    assert "experiment 'flaky': field 'budget_usd': required for a paid experiment" in message
    assert server.requests == [] and not (data / "journals").exists()
