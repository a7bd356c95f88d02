"""A plug-in from a package outside ``giant_assets`` (tests/plugins/packages/lab_agent, on PYTHONPATH) runs
through real Dagster materializations of a ``predictions`` partition against the loopback scripted model:

- a run the plug-in raises in fails alone, recorded with its exception; the cell's ``max_failed_share``
  decides the materialization; a re-materialization pays nothing already answered;
- ``dagster asset materialize`` SIGKILLed mid-run, then run again: the killed run's answered model call is
  replayed from the reply store, every other call is asked exactly once (counted at the server); a third
  materialization (in-process) asks nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetSelection, DagsterEventType, DagsterInstance, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.runs.journal import Journal
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

REPO = Path(__file__).resolve().parents[2]
PACKAGES = Path(__file__).parent / "packages"
DAGSTER = str(Path(sys.executable).with_name("dagster"))
BENCHMARK = "tcga_slidebench"  # three items, every slide readable
LAB = "lab_agent:make_agent"
CALLS_PER_RUN = 2  # the lab agent: a proposal, then the answer


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))


def test_a_raising_plugin_fails_its_run_and_the_cells_failed_share_decides(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    declared = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, declared, sample_wsi_root)
    items = pd.read_parquet(data / "benchmark_items" / "_all.parquet")
    ids = sorted(items.loc[items["benchmark_name"] == BENCHMARK, "benchmark_id"].astype(str))
    assert len(ids) == 3
    cell = AssetSelection.assets("predictions")
    with ScriptedModelServer(rule=demo_policy) as server:
        settings = {
            "agent": LAB, "model": "scripted-lab", "base_url": server.openai_base_url, "concurrency": 1,
            "agent_options": {"raise_on": [ids[1]]},
        }  # fmt: skip
        write_experiments(declared, {"lab": settings})
        add_experiments(instance, "lab")

        def run():
            return materialize(
                ALL_ASSETS, selection=cell, partition_key=result_key("lab", BENCHMARK), resources=resources,
                instance=instance, raise_on_error=False,
            )  # fmt: skip

        failed = run()  # 1 of 3 runs failed: above the default max_failed_share 0.2
        asked_first = len(server.requests)
        write_experiments(declared, {"lab": settings | {"max_failed_share": 0.5}})
        passed = run()
        asked_again = len(server.requests) - asked_first
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.user_failure_data.description
    assert "1 of 3 runs with a slide failed (33%; max_failed_share 0.2): agent_error 1" in message
    assert f"plug-in {LAB}: raised RuntimeError: lab agent refuses item {ids[1]}" in message
    assert asked_first == 2 * CALLS_PER_RUN  # the two other items were answered, the failed one asked nothing
    assert passed.success and asked_again == 0  # answered runs reused; the failed one raised again
    rows = pd.read_parquet(data / "predictions" / "lab" / f"{BENCHMARK}.parquet")
    by_id = dict(zip(rows["benchmark_id"].astype(str), rows.to_dict("records"), strict=True))
    assert by_id[ids[1]]["error_kind"] == "agent_error"
    assert "lab agent refuses item" in by_id[ids[1]]["error"]
    for bid in (ids[0], ids[2]):
        assert pd.isna(by_id[bid]["error_kind"]) and pd.notna(by_id[bid]["predicted_label"])
        assert [s["action"] for s in json.loads(by_id[bid]["trajectory_json"])] == [
            "thumbnail",
            "crop",
            "answer",
        ]


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(
                f"dagster exited ({proc.returncode}) while waiting for {what}:\n{log.read_text()[-4000:]}"
            )
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout}s waiting for {what}:\n{log.read_text()[-4000:]}")


def test_a_killed_plugin_run_replays_its_paid_calls_and_asks_the_rest_once(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    declared = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, declared, sample_wsi_root)  # benchmark_items under data
    runs = 3 * 2  # three items, two runs each
    path = os.pathsep.join([str(PACKAGES), str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_EXPERIMENTS": str(declared)}
    env["PYTHONPATH"] = path
    args = [
        DAGSTER, "asset", "materialize", "-m", "giant_assets.platform.definitions", "--select", "predictions",
        "--partition", result_key("lab-kill", BENCHMARK),
    ]  # fmt: skip
    server = ScriptedModelServer(rule=demo_policy, latency_s=0.4).start()
    try:
        settings = {
            "agent": LAB, "model": "scripted-lab", "base_url": server.openai_base_url, "concurrency": 1,
            "runs_per_item": 2,
        }  # fmt: skip
        write_experiments(declared, {"lab-kill": settings})
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as persistent:
            add_experiments(persistent, "lab-kill")
        logs = [tmp_path / "run0.log", tmp_path / "run1.log"]
        with open(logs[0], "wb") as out:
            proc = subprocess.Popen(
                args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            found = wait_for(
                lambda: next(iter((data / "journals").glob(f"*/{BENCHMARK}.jsonl")), None),
                120, "the journal", proc, logs[0],
            )  # fmt: skip
            journal = Journal(found)

            def second_call_in_flight() -> bool:  # a run's proposal answered, its answer call at the server
                done = len(journal.read())
                return 1 <= done <= runs - 2 and len(server.requests) == CALLS_PER_RUN * done + 2

            wait_for(second_call_in_flight, 120, "a run's second call in flight", proc, logs[0])
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        killed_at = len(journal.read())
        before = len(server.requests)
        assert 1 <= killed_at <= runs - 2 and before == CALLS_PER_RUN * killed_at + 2
        with open(logs[1], "wb") as out:
            rerun = subprocess.run(args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        assert rerun.returncode == 0, logs[1].read_text()[-4000:]
        after = list(server.requests)
        # a third materialization, in-process (the process boundary is not what it proves): everything
        # is journalled, so it pays nothing
        add_experiments(instance, "lab-kill")
        again = materialize(
            ALL_ASSETS, selection=AssetSelection.assets("predictions"), resources=resources,
            partition_key=result_key("lab-kill", BENCHMARK), instance=instance,
        )  # fmt: skip
        assert again.success
        final_count = len(server.requests)
    finally:
        server.stop()
    final = journal.read()
    assert len(final) == runs and all(r["error_kind"] is None for r in final.values())
    # the re-run began with the killed run's answer call: its proposal was replayed, not asked again
    resumed = after[before:]
    assert resumed[0].assistant_turns == 1
    # every model call of every run asked exactly once, but the one in flight at the kill (asked twice)
    assert len(after) == CALLS_PER_RUN * runs + 1
    assert final_count == len(after)  # the third materialization paid nothing
    rows = pd.read_parquet(data / "predictions" / "lab-kill" / f"{BENCHMARK}.parquet")
    assert len(rows) == runs and rows["predicted_label"].notna().all()
