"""The `dagster` CLI on the real definitions: two benchmark partitions materialized by concurrent
processes into one data dir, the summary over both, metrics re-derived with scikit-learn from DuckDB,
and clear nonzero-exit errors for a wrong partition, bad config, missing upstream or a partition range.

Runs use the in-process executor (``execution: in_process``) so each CLI call pays Dagster's import
once instead of once per step; the storage path (Parquet per partition + DuckDB views) is the same.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from sklearn.metrics import accuracy_score, balanced_accuracy_score

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
SKLEARN = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}
PARTITIONS = ("gtex", "tcga_slidebench")  # one balanced-accuracy and one accuracy benchmark


@pytest.fixture
def cli_env(tmp_path: Path, sample_wsi_root: Path) -> dict[str, str]:
    """A private DAGSTER_HOME and data dir; the sample's slides come from the session fixture.

    The home's SQLite storages are created here, once: CLI processes started at the same moment on a
    fresh DAGSTER_HOME race to create the schema (UNIQUE constraint failed: alembic_version).
    """
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.get_runs(limit=1)  # history/runs.db
        instance.event_log_storage.get_asset_records()  # history/runs/index.db
        instance.all_instigator_state()  # schedules/schedules.db
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "GIANT_DATA_DIR": str(tmp_path / "data"),
        "GIANT_WSI_ROOT": str(sample_wsi_root),
    }
    return env


def materialize(env: dict[str, str], *args: str, config: dict | None = None) -> subprocess.Popen:
    """Start ``dagster asset materialize`` on the real definitions; output is merged into stdout."""
    run_config = json.dumps(IN_PROCESS | (config or {}))
    return subprocess.Popen(
        [
            DAGSTER,
            "asset",
            "materialize",
            "-m",
            "giant_assets.platform.definitions",
            *args,
            "--config-json",
            run_config,
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"dagster did not finish within {timeout}s:\n{out[-3000:]}")
    return proc.returncode, out


def succeed(proc: subprocess.Popen) -> str:
    code, out = finish(proc)
    assert code == 0, out[-4000:]
    assert "RUN_SUCCESS" in out, out[-4000:]
    return out


def sql(env: dict[str, str], query: str) -> pd.DataFrame:
    with duckdb.connect(str(Path(env["GIANT_DATA_DIR"]) / "giant.duckdb"), read_only=True) as con:
        return con.sql(query).df()


def sklearn_score(metric: str, truth: pd.Series, predicted: pd.Series) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "y_pred contains classes not in y_true"
        return float(SKLEARN[metric](truth.astype(int), predicted.fillna(-1).astype(int)))


def test_two_partitions_from_concurrent_cli_runs_then_summary(cli_env: dict[str, str]) -> None:
    succeed(materialize(cli_env, "--select", "multipathqa_csv,benchmark_items"))
    selection = "predictions,item_predictions,benchmark_metrics"
    procs = [materialize(cli_env, "--select", selection, "--partition", p) for p in PARTITIONS]
    for proc in procs:  # both were started before either is waited on
        succeed(proc)
    succeed(materialize(cli_env, "--select", "metrics_summary"))

    data = Path(cli_env["GIANT_DATA_DIR"])
    for table in ("predictions", "item_predictions", "benchmark_metrics"):
        assert sorted(p.stem for p in (data / table).glob("*.parquet")) == sorted(PARTITIONS), table
    counts = sql(cli_env, "select benchmark_name, count(*) n from predictions group by 1")
    assert dict(zip(counts["benchmark_name"], counts["n"], strict=True)) == {"gtex": 3, "tcga_slidebench": 3}
    assert set(sql(cli_env, "select agent from predictions")["agent"]) == {"random"}
    assert not sql(cli_env, "select * from predictions").duplicated(["benchmark_name", "benchmark_id"]).any()

    metrics = sql(cli_env, "select benchmark_name, value from benchmark_metrics")
    value = dict(zip(metrics["benchmark_name"], metrics["value"], strict=True))
    extra = sql(
        cli_env, "select benchmark_name, metric_type, n_scored, value_all_items_pct from benchmark_metrics"
    )
    voted = sql(cli_env, "select * from item_predictions")
    assert set(value) == set(PARTITIONS) == set(voted["benchmark_name"])
    for name, frame in voted.groupby("benchmark_name"):
        row = extra[extra["benchmark_name"] == name].iloc[0]
        metric = row["metric_type"]
        assert metric == {"gtex": "balanced_accuracy", "tcga_slidebench": "accuracy"}[name]
        scored = frame[frame["slide_available"]]
        assert row["n_scored"] == len(scored) == {"gtex": 2, "tcga_slidebench": 3}[name]
        assert value[name] == pytest.approx(
            sklearn_score(metric, scored["truth_label"], scored["predicted_label"])
        )
        assert row["value_all_items_pct"] == pytest.approx(
            100 * sklearn_score(metric, frame["truth_label"], frame["predicted_label"])
        )

    summary = sql(cli_env, "select benchmark_name, value from metrics_summary")
    assert dict(zip(summary["benchmark_name"], summary["value"], strict=True)) == pytest.approx(value)


def test_wrong_partition_bad_config_missing_upstream_and_ranges_fail_clearly(cli_env: dict[str, str]) -> None:
    """Each mistake exits nonzero with a message naming it (no ingest: the first three fail before it)."""
    procs = {
        "partition": materialize(cli_env, "--select", "predictions", "--partition", "tcga_nope"),
        "config": materialize(
            cli_env,
            "--select",
            "predictions",
            "--partition",
            "gtex",
            config={"ops": {"predictions": {"config": {"agent": "oracle"}}}},
        ),  # fmt: skip
        "upstream": materialize(cli_env, "--select", "predictions", "--partition", "gtex"),
        # `--partition-range` needs BackfillPolicy.single_run() on every selected asset, which the
        # partitioned assets do not have (they read context.partition_key, one benchmark per run).
        "range": materialize(cli_env, "--select", "predictions", "--partition-range", "gtex...panda"),
    }
    results = {name: finish(proc) for name, proc in procs.items()}
    for name, (code, out) in results.items():
        assert code != 0, f"{name}: {out[-2000:]}"
        assert "RUN_SUCCESS" not in out, name

    out = results["partition"][1]
    assert "partition key `tcga_nope`" in out
    out = results["config"][1]
    assert "root:ops:predictions:config:agent" in out and "got oracle" in out
    out = results["upstream"][1]
    assert 'loading input "benchmark_items"' in out and "table 'benchmark_items' has no partitions" in out
    out = results["range"][1]
    assert "BackfillPolicy.single_run()" in out
    assert not (Path(cli_env["GIANT_DATA_DIR"]) / "predictions").exists()  # nothing was written
