"""Resume: a real `dagster asset materialize` of one predictions partition (GIANT agent against the
loopback scripted model) is SIGKILLed mid-partition and re-run. No (item, run) is duplicated in the
journal or in the predictions table, runs finished before the kill never reach the model again, and
the API key reaches the server but no byte of the data dir or DAGSTER_HOME.
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import AssetKey, DagsterInstance, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.agents.scripted_model import RecordedRequest, serve_demo_model
from giant_assets.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.batch.journal import Journal
from tests.support.dagster_env import resources_for

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
PARTITION = "tcga_slidebench"  # three items, every slide readable
RUNS_PER_ITEM = 3
KEY_ENV = "GIANT_TEST_KEY"


def wait_for(
    condition, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None
):
    """Poll ``condition`` until it returns something truthy; fail (with the run's log) on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-4000:] if log else ""
            pytest.fail(f"dagster exited ({proc.returncode}) while waiting for {what}:\n{tail}")
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def group_alive(pgid: int) -> list[int]:
    """Non-zombie processes of a process group (Linux /proc)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def item_of(request: RecordedRequest, prompts: dict[str, str]) -> str:
    """The benchmark_id whose question opens the request's first user turn."""
    first_user = next(t for t in request.turns if t.role == "user")
    found = [bid for bid, prompt in prompts.items() if first_user.texts[0].startswith(prompt + "\n")]
    assert len(found) == 1, first_user.texts[0][:200]
    return found[0]


def conversations(requests: list[RecordedRequest], prompts: dict[str, str]) -> dict[str, list[int]]:
    """Per item, the number of requests of each conversation, in order (concurrency 1: one at a time).

    A conversation (one run of the agent) starts with a request holding no assistant turn yet.
    """
    out: dict[str, list[int]] = {bid: [] for bid in prompts}
    current = None
    for request in requests:
        bid = item_of(request, prompts)
        if request.assistant_turns == 0:
            out[bid].append(0)
            current = bid
        assert bid == current, "a conversation continued on another item: runs overlapped"
        out[bid][-1] += 1
    return out


def model_calls(row: dict) -> int:
    """Model requests behind a journal row: its trajectory steps minus the thumbnail step."""
    steps = json.loads(row["trajectory_json"])
    assert steps[0]["action"] == "thumbnail"
    return len(steps) - 1


def test_sigkill_mid_partition_then_rerun_resumes_without_redoing_or_duplicating(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    key = f"sk-test-secret-{secrets.token_hex(16)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), KEY_ENV: key}

    # ingest in-process into the same data dir (the CLI run reads benchmark_items from its Parquet)
    ingest = materialize(
        [multipathqa_csv, benchmark_items],
        resources=resources_for(data, wsi_root=str(sample_wsi_root)),
        instance=DagsterInstance.ephemeral(),
    )
    assert ingest.success
    items = pd.read_parquet(data / "benchmark_items" / "_all.parquet")
    items = items[items["benchmark_name"] == PARTITION]
    prompts = dict(zip(items["benchmark_id"].astype(str), items["prompt"], strict=True))
    assert len(prompts) == 3 and (items["wsi_status"] == "ok").all()
    expected = {(bid, run) for bid in prompts for run in range(RUNS_PER_ITEM)}

    server = serve_demo_model(latency_s=0.3)
    config = {
        "agent": "giant",
        "provider": "openai",
        "model": "scripted-resume",
        "base_url": server.openai_base_url,
        "api_key_env": KEY_ENV,
        "runs_per_item": RUNS_PER_ITEM,
        "concurrency": 1,
    }
    run_config = {"ops": {"predictions": {"config": config}}}
    args = [
        DAGSTER, "asset", "materialize", "-m", "giant_assets.definitions", "--select", "predictions",
        "--partition", PARTITION, "--config-json",
    ]  # fmt: skip
    # the killed run uses the default multiprocess executor (its step runs in a child of the CLI
    # process, so the whole process group must die); the re-run executes in-process to save an import
    first_args = [*args, json.dumps(run_config)]
    rerun_args = [*args, json.dumps(run_config | {"execution": {"config": {"in_process": {}}}})]
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    try:
        # 1. the first run, SIGKILLed (its whole process group) once a run is journaled and another is asked
        with open(first_log, "wb") as out:
            proc = subprocess.Popen(
                first_args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            journal_path = wait_for(
                lambda: next(iter((data / "journals").glob(f"*/{PARTITION}.jsonl")), None),
                45, "the journal", proc, first_log,
            )  # fmt: skip
            journal = Journal(journal_path)

            def mid_run() -> bool:  # >= 1 run journaled, and the next one already talking to the model
                done = len(journal.read())
                started = sum(r.assistant_turns == 0 for r in list(server.requests))
                return 1 <= done < len(expected) and started > done

            wait_for(mid_run, 30, "a finished run and one in flight", proc, first_log)
        finally:
            with contextlib.suppress(ProcessLookupError):  # the group is gone if the run already ended
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        wait_for(lambda: not group_alive(proc.pid), 10, "every process of the killed run to die")
        time.sleep(0.3)  # requests already on the wire are recorded before the snapshot
        before = journal.read()
        asked_before = list(server.requests)
        assert 1 <= len(before) < len(expected), "the kill did not land mid-partition"
        assert not any((data / "predictions").glob("*.parquet")), "the killed run stored its output"

        # 2. re-run the same materialization to completion
        with open(second_log, "wb") as out:
            rerun = subprocess.run(
                rerun_args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=60
            )
        assert rerun.returncode == 0, second_log.read_text()[-4000:]
        requests = list(server.requests)
    finally:
        server.stop()
    asked_after = requests[len(asked_before) :]

    # journal: one row per (benchmark_id, run_index), finished rows untouched, nothing written twice
    lines = journal_path.read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:  # a line torn by the kill is ignored by readers
            continue
    assert len(parsed) >= len(lines) - 1
    raw_keys = [(r["benchmark_id"], r["run_index"]) for r in parsed]
    assert len(raw_keys) == len(set(raw_keys)) == len(expected)
    after = journal.read()
    assert {(k[2], k[3]) for k in after} == set(raw_keys) == expected
    assert all(after[k] == row for k, row in before.items())  # finished rows were reused as they were
    assert all(row["error_kind"] is None and row["predicted_label"] is not None for row in after.values())

    # predictions table, through the DuckDB view and the partition's Parquet file
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        view = con.sql("select benchmark_name, benchmark_id, run_index, finished_at from predictions").df()
    parquet = pd.read_parquet(data / "predictions" / f"{PARTITION}.parquet")
    for table in (view, parquet):
        keys = list(zip(table["benchmark_id"], table["run_index"], strict=True))
        assert len(keys) == len(set(keys)) == len(expected) and set(keys) == expected
        assert set(table["benchmark_name"]) == {PARTITION}
    assert sorted(view["finished_at"]) == sorted(r["finished_at"] for r in after.values())

    # model requests per (item, run), items recognised by the question each request carries
    before_keys = {(k[2], k[3]) for k in before}
    calls = {(r["benchmark_id"], r["run_index"]): model_calls(r) for r in after.values()}
    convs_before, convs_after = conversations(asked_before, prompts), conversations(asked_after, prompts)
    runs_after: Counter = Counter()  # (item, run) -> conversations after the kill
    for bid, sizes in convs_after.items():
        unfinished = sorted(run for b, run in expected - before_keys if b == bid)
        # each item's unfinished runs, and only those, were asked again: once each, in run order
        assert len(sizes) == len(unfinished), (bid, sizes, unfinished)
        for run, size in zip(unfinished, sizes, strict=True):
            runs_after[bid, run] += 1
            assert size == calls[bid, run]  # the whole conversation behind the journaled row
    assert all(runs_after[k] == 0 for k in before_keys)
    assert all(runs_after[k] == 1 for k in expected - before_keys)
    assert len(asked_after) == sum(calls[k] for k in expected - before_keys)
    # before the kill: the finished runs plus at most one unfinished conversation (the one in flight)
    started_before = sum(len(sizes) for sizes in convs_before.values())
    assert started_before - len(before) in (0, 1)
    assert len(asked_before) >= sum(calls[k] for k in before_keys)
    for bid, sizes in convs_before.items():
        assert sizes[: sum(b == bid for b, _ in before_keys)] == [
            calls[bid, run] for run in sorted(run for b, run in before_keys if b == bid)
        ]

    # Dagster's own record of the second run agrees
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        event = instance.get_latest_materialization_event(AssetKey("predictions"))
    assert event is not None and event.asset_materialization.partition == PARTITION
    meta = event.asset_materialization.metadata
    assert meta["reused_from_journal"].value == len(before)
    assert meta["executed_now"].value == len(expected) - len(before)
    assert meta["runs"].value == len(expected)

    # the key was sent on every request, and stored nowhere
    assert all(r.headers.get("Authorization") == f"Bearer {key}" for r in requests)
    files = [p for root in (data, home) for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 20 and journal_path in files
    for path in [*files, first_log, second_log]:  # the CLI's own output included
        leaked = key.encode() in path.read_bytes()
        assert not leaked, f"API key found in {path}"
