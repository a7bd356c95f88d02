"""Resume: a real `dagster asset materialize` of one predictions partition (GIANT agent against the
loopback scripted model) is SIGKILLed mid-partition, re-run and interrupted with Ctrl-C (SIGINT to
its process group), then re-run to completion. No (item, run) is duplicated in the journal or in the
predictions table, runs finished before an interruption never reach the model again, the interrupted
run journals nothing for the run it abandoned, and the API key reaches the server but no byte of the
data dir, DAGSTER_HOME or the CLI's output.

Each of the three CLI runs gets its own value of the key (the env var's value is not part of the
config hash), so every recorded request is attributed to the run that sent it by its Authorization
header, however late the server reads it.
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
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.demo.scripted import RecordedRequest, serve_demo_model
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.runs.journal import Journal
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
PARTITION = "tcga_slidebench"  # three items, every slide readable
EXPERIMENT = "resume-giant"
CELL = f"{PARTITION}|{EXPERIMENT}"  # the Dagster key of the (benchmark, experiment) partition
RUNS_PER_ITEM = 3
KEY_ENV = "GIANT_TEST_KEY"
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}


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
    text = first_user.texts[0]
    found = [bid for bid, prompt in prompts.items() if text == prompt or text.startswith(prompt + "\n")]
    assert len(found) == 1, first_user.texts[0][:200]
    return found[0]


def conversations(requests: list[RecordedRequest], prompts: dict[str, str]) -> list[tuple[str, int]]:
    """(item, number of requests) of each conversation, in order (concurrency 1: one at a time).

    A conversation (one run of the agent) starts with a request holding no assistant turn yet.
    """
    out: list[tuple[str, int]] = []
    for request in requests:
        bid = item_of(request, prompts)
        if request.assistant_turns == 0:
            out.append((bid, 0))
        assert out and out[-1][0] == bid, "a conversation continued on another item: runs overlapped"
        out[-1] = (bid, out[-1][1] + 1)
    return out


def model_calls(row: dict) -> int:
    """Model requests behind a journal row: its trajectory steps minus the thumbnail step."""
    steps = json.loads(row["trajectory_json"])
    assert steps[0]["action"] == "thumbnail"
    return len(steps) - 1


def test_kill_then_ctrl_c_mid_partition_then_rerun_resumes_without_redoing_or_duplicating(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    keys = [f"sk-test-secret-{secrets.token_hex(16)}" for _ in range(3)]  # one per CLI run
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    base_env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data)}

    # ingest in-process into the same data dir (the CLI runs read benchmark_items from its Parquet)
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
    order = [(bid, run) for bid in prompts for run in range(RUNS_PER_ITEM)]  # the runner's order
    expected = set(order)
    first_item = order[0][0]

    server = serve_demo_model(latency_s=0.3)
    settings = {
        "agent": "giant",
        "provider": "openai",
        "model": "scripted-resume",
        "base_url": server.openai_base_url,
        "api_key_env": KEY_ENV,
        "runs_per_item": RUNS_PER_ITEM,
        "concurrency": 1,
    }
    base_env["GIANT_EXPERIMENTS"] = str(
        write_experiments(tmp_path / "experiments.yaml", {EXPERIMENT: settings})
    )
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        add_experiments(instance, EXPERIMENT)
    args = [
        DAGSTER, "asset", "materialize", "-m", "giant_assets.platform.definitions", "--select", "predictions",
        "--partition", CELL,
    ]  # fmt: skip
    # the killed run uses the default multiprocess executor (its step runs in a child of the CLI
    # process, so the whole process group must die); the later runs execute in-process (one import)
    commands = [
        args,
        [*args, "--config-json", json.dumps(IN_PROCESS)],
        [*args, "--config-json", json.dumps(IN_PROCESS)],
    ]
    logs = [tmp_path / f"run{i}.log" for i in range(3)]
    journal = Journal(data / "journals" / "unknown")

    def asked(phase: int) -> list[RecordedRequest]:
        return [r for r in list(server.requests) if r.headers.get("Authorization") == f"Bearer {keys[phase]}"]

    def interrupt(phase: int, sig: signal.Signals, finished_before: int, at_least: int, at_most: int) -> int:
        """Run ``commands[phase]``; send ``sig`` to its process group once ``at_least`` (and at most
        ``at_most``) runs are journaled and the next one is talking to the model; return the exit code.
        ``at_most`` leaves runs after the one in flight, so the signal cannot land as the last run ends
        (the materialization would then succeed: seen under load)."""
        nonlocal journal
        with open(logs[phase], "wb") as out:
            proc = subprocess.Popen(
                commands[phase],
                env=base_env | {KEY_ENV: keys[phase]},
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            path = wait_for(
                lambda: next(iter((data / "journals").glob(f"*/{PARTITION}.jsonl")), None),
                45, "the journal", proc, logs[phase],
            )  # fmt: skip
            journal = Journal(path)

            def mid_run() -> bool:
                done = len(journal.read())
                started = finished_before + sum(r.assistant_turns == 0 for r in asked(phase))
                return at_least <= done <= at_most and started > done

            wait_for(mid_run, 30, f"{at_least} journaled runs and one in flight", proc, logs[phase])
        finally:
            with contextlib.suppress(ProcessLookupError):  # the group is gone if the run already ended
                os.killpg(proc.pid, sig)
            code = proc.wait(timeout=20)
        wait_for(lambda: not group_alive(proc.pid), 10, f"every process of run {phase} to die")
        return code

    try:
        # 1. SIGKILL the whole group once the first item's runs are all journaled and the next is asked
        code = interrupt(0, signal.SIGKILL, 0, RUNS_PER_ITEM, len(expected) - 3)
        assert code == -signal.SIGKILL
        snapshots = [{}, journal.read()]
        assert RUNS_PER_ITEM <= len(snapshots[1]) < len(expected), "the kill did not land mid-partition"
        assert not any((data / "predictions").rglob("*.parquet")), "the killed run stored its output"

        # 2. re-run, and Ctrl-C it (SIGINT to the group, as a terminal does) after one more run
        code = interrupt(1, signal.SIGINT, len(snapshots[1]), len(snapshots[1]) + 1, len(expected) - 2)
        assert code != 0
        assert "Execution was interrupted" in logs[1].read_text()
        snapshots.append(journal.read())
        assert len(snapshots[1]) < len(snapshots[2]) < len(expected), "Ctrl-C did not land mid-partition"
        assert not any((data / "predictions").rglob("*.parquet")), "the interrupted run stored its output"

        # 3. re-run the same materialization to completion
        with open(logs[2], "wb") as out:
            rerun = subprocess.run(
                commands[2],
                env=base_env | {KEY_ENV: keys[2]},
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
            )
        assert rerun.returncode == 0, logs[2].read_text()[-4000:]
        snapshots.append(journal.read())
        requests = list(server.requests)
    finally:
        server.stop()
    phases = [asked(i) for i in range(3)]
    assert sum(len(p) for p in phases) == len(requests), "a request without one of the runs' keys"

    # journal: one row per (benchmark_id, run_index), finished rows untouched, nothing written twice
    lines = journal.path.read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:  # a line torn by the kill is ignored by readers
            continue
    assert len(parsed) >= len(lines) - 1
    raw_keys = [(r["benchmark_id"], r["run_index"]) for r in parsed]
    assert len(raw_keys) == len(set(raw_keys)) == len(expected)
    final = snapshots[3]
    assert {(k[2], k[3]) for k in final} == set(raw_keys) == expected
    for earlier in snapshots[1:3]:
        assert all(final[k] == row for k, row in earlier.items())  # reused exactly as they were
    assert all(row["error_kind"] is None and row["predicted_label"] is not None for row in final.values())

    # predictions table, through the DuckDB view and the partition's Parquet file
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        view = con.sql("select benchmark_name, benchmark_id, run_index, finished_at from predictions").df()
    parquet = pd.read_parquet(data / "predictions" / EXPERIMENT / f"{PARTITION}.parquet")
    for table in (view, parquet):
        keys_ = list(zip(table["benchmark_id"], table["run_index"], strict=True))
        assert len(keys_) == len(set(keys_)) == len(expected) and set(keys_) == expected
        assert set(table["benchmark_name"]) == {PARTITION}
    assert sorted(view["finished_at"]) == sorted(r["finished_at"] for r in final.values())

    # model requests: each CLI run asked exactly the runs not yet journaled, in the runner's order,
    # one whole conversation per run it journaled, plus at most the one conversation it was cut off in
    calls = {(r["benchmark_id"], r["run_index"]): model_calls(r) for r in final.values()}
    for phase, requests_ in enumerate(phases):
        done_before = {(k[2], k[3]) for k in snapshots[phase]}
        done_now = {(k[2], k[3]) for k in snapshots[phase + 1]} - done_before
        pending = [k for k in order if k not in done_before]
        assert done_now == set(pending[: len(done_now)]), phase
        convs = conversations(requests_, prompts)
        assert convs[: len(done_now)] == [(bid, calls[bid, run]) for bid, run in pending[: len(done_now)]]
        extra = convs[len(done_now) :]
        if phase == 2:
            assert extra == [] and done_now == expected - done_before
        else:  # the conversation in flight when the signal landed (if it was not journaled in time)
            assert len(extra) <= 1, (phase, extra)
            next_bid, next_run = pending[len(done_now)]
            assert all(bid == next_bid and n <= calls[next_bid, next_run] for bid, n in extra)
        assert not {bid for bid, _ in convs} & {bid for bid in prompts if all(
            (bid, run) in done_before for run in range(RUNS_PER_ITEM)
        )}, "an item finished before this run was asked again"  # fmt: skip
    # the first item was finished before the kill and never asked again afterwards
    assert all((first_item, run) in {(k[2], k[3]) for k in snapshots[1]} for run in range(RUNS_PER_ITEM))
    assert not any(item_of(r, prompts) == first_item for r in phases[1] + phases[2])
    assert len(phases[2]) == sum(calls[k] for k in expected - {(k[2], k[3]) for k in snapshots[2]})

    # Dagster's own record: the killed run never finished, the interrupted one failed, the last succeeded
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = instance.get_runs()[::-1]  # oldest first
        event = instance.get_latest_materialization_event(AssetKey("predictions"))
    assert [r.status for r in runs][1:] == [DagsterRunStatus.FAILURE, DagsterRunStatus.SUCCESS]
    assert runs[0].status not in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE)  # left as it was
    assert event is not None and event.asset_materialization.partition == CELL
    assert event.run_id == runs[2].run_id
    meta = event.asset_materialization.metadata
    assert meta["reused_from_journal"].value == len(snapshots[2])
    assert meta["executed_now"].value == len(expected) - len(snapshots[2])
    assert meta["runs"].value == len(expected)

    # each run sent its own key on every request, and no key was stored anywhere
    files = [p for root in (data, home) for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 20 and journal.path in files
    for path in [*files, *logs]:  # the CLI's own output included
        body = path.read_bytes()
        leaked = [i for i, key in enumerate(keys) if key.encode() in body]
        assert not leaked, f"API key of run {leaked} found in {path}"
