"""The `dagster` CLI on the real definitions: partitions materializing concurrently, and resume after a
SIGKILL mid-partition (finished runs are never re-asked, no row is duplicated, the key is never stored).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.agents.scripted_model import serve_demo_model
from giant_assets.batch.journal import Journal

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
KEY_ENV = "GIANT_TEST_RESUME_KEY"
KEY = "sk-resume-test-5b1e0c9dSECRET000000000042"


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIANT_")}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(tmp_path / "data"), KEY_ENV: KEY}
    return env


def dagster(env: dict[str, str], *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [DAGSTER, "asset", "materialize", "-m", "giant_assets.definitions", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def run_ok(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    proc = dagster(env, *args)
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]
    return out


def ingest(env: dict[str, str]) -> None:
    run_ok(env, "--select", "multipathqa_csv,benchmark_items")


def test_two_partitions_materialize_concurrently(cli_env: dict[str, str]) -> None:
    ingest(cli_env)
    selection = "predictions,item_predictions,benchmark_metrics"
    procs = [dagster(cli_env, "--select", selection, "--partition", p) for p in ("gtex", "panda")]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-3000:]
    run_ok(cli_env, "--select", "metrics_summary")
    db = Path(cli_env["GIANT_DATA_DIR"]) / "giant.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        counts = dict(
            con.sql(
                "select benchmark_name, count(*) from predictions "
                "where error_kind is distinct from 'slide_unavailable' group by 1"
            ).fetchall()
        )
        metrics = dict(con.sql("select benchmark_name, value from benchmark_metrics").fetchall())
        voted = con.sql("select * from item_predictions where slide_available").df()
        summary = con.sql("select benchmark_name from metrics_summary").df()
    assert counts == {"gtex": 2, "panda": 2}  # each has one item whose slide is missing or corrupt
    assert sorted(summary["benchmark_name"]) == ["gtex", "panda"]
    for name, frame in voted.groupby("benchmark_name"):
        pred = frame["predicted_label"].fillna(-1).astype(int)
        expected = balanced_accuracy_score(frame["truth_label"], pred)  # both are balanced-accuracy tasks
        assert metrics[name] == pytest.approx(expected)
        assert accuracy_score(frame["truth_label"], pred) == pytest.approx(frame["correct"].mean())


def test_unknown_partition_and_bad_config_fail_clearly(cli_env: dict[str, str]) -> None:
    proc = dagster(cli_env, "--select", "predictions", "--partition", "nope")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "nope" in out
    bad = json.dumps({"ops": {"predictions": {"config": {"agent": "oracle"}}}})
    proc = dagster(cli_env, "--select", "predictions", "--partition", "gtex", "--config-json", bad)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "agent" in out and "oracle" in out


def first_turns(server) -> int:
    """Requests that start a run (the model has not replied yet in the conversation)."""
    return sum(1 for r in list(server.requests) if r.assistant_turns == 0)


def test_killed_partition_resumes_without_redoing_or_duplicating(cli_env: dict[str, str]) -> None:
    ingest(cli_env)
    server = serve_demo_model(latency_s=0.4)
    partition, runs_per_item, items = "tcga_slidebench", 3, 3
    config = {
        "agent": "giant",
        "model": "scripted-resume",
        "base_url": server.openai_base_url,
        "api_key_env": KEY_ENV,
        "runs_per_item": runs_per_item,
        "concurrency": 1,
    }
    args = ("--select", "predictions", "--partition", partition, "--config-json",
            json.dumps({"ops": {"predictions": {"config": config}}}))  # fmt: skip
    data = Path(cli_env["GIANT_DATA_DIR"])
    try:
        proc = dagster(cli_env, *args, start_new_session=True)
        deadline = time.monotonic() + 90
        journals: list[Path] = []
        while time.monotonic() < deadline:
            journals = list((data / "journals").glob(f"*/{partition}.jsonl"))
            if journals and len(Journal(journals[0]).read()) >= 2:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        finished_before = len(Journal(journals[0]).read())
        assert 2 <= finished_before < runs_per_item * items
        asked_before = first_turns(server)

        run_ok(cli_env, *args)
    finally:
        server.stop()

    rows = [json.loads(line) for line in journals[0].read_text().splitlines() if line.strip()]
    keys = [(r["benchmark_id"], r["run_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == runs_per_item * items  # nothing journaled twice
    # every run not finished before the kill (including the one in flight) was asked once more; none else
    assert first_turns(server) - asked_before == runs_per_item * items - finished_before
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        table = con.sql("select benchmark_id, run_index, error_kind from predictions").df()
    assert len(table) == runs_per_item * items
    assert not table.duplicated(["benchmark_id", "run_index"]).any()
    assert table["error_kind"].isna().all()
    # the API key reached the server but was never written anywhere
    assert all(KEY in " ".join(r.headers.values()) for r in server.requests)
    for root in (data, Path(cli_env["DAGSTER_HOME"])):
        for path in root.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
