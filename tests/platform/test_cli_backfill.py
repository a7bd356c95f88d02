"""The `dagster` CLI on the real definitions: experiments synced by `giant-experiments sync`, cells of
the benchmark x experiment grid materialized by concurrent processes into one data dir, two experiments
side by side in every table, the leaderboard and comparisons over them, metrics re-derived with
scikit-learn from DuckDB, and clear nonzero-exit errors for a wrong partition, an undeclared experiment,
bad config, missing upstream, a partition range, and a name whose answer settings changed.

Runs use the in-process executor (the code location's default, also passed explicitly here) so each
CLI call pays Dagster's import once instead of once per step; the last test checks the default and
that ``multiprocess`` can still be chosen in run config.

The module's tests share one synced Dagster home and one materialized grid (they only read it), and run
on one xdist worker so that both are built once.
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
BENCHMARKS = ("gtex", "tcga_slidebench")  # one balanced-accuracy and one accuracy benchmark
EXPERIMENTS = ("random", "majority")
# one worker builds the shared grid once; its first test's setup holds the grid's 7 CLI runs
pytestmark = [pytest.mark.xdist_group("cli_backfill"), pytest.mark.timeout(600)]
GIANT_EXPERIMENTS_CLI = str(Path(sys.executable).with_name("giant-experiments"))
DEFAULT_EXECUTOR: dict = {}  # passed as ``config``: no --config-json at all
DEFAULT_RUN = "TEST_DEFAULT_EXECUTOR_RUN_OUTPUT"  # the grid's ingest output, kept in its env for a test
TIMEOUT_S = 240  # a CLI run takes ~5 CPU-seconds; several at once on a loaded 2-core machine take long


def write_experiments(path: Path, seed: int = 7) -> Path:
    path.write_text(
        f"experiments:\n  random: {{agent: random, seed: {seed}}}\n  majority: {{agent: majority}}\n"
    )
    return path


@pytest.fixture(scope="module")
def synced_env(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path) -> dict[str, str]:
    """A private DAGSTER_HOME with both experiments synced by `giant-experiments sync`, shared by the
    module's tests (each passes its own GIANT_DATA_DIR unless it reads the shared grid).

    The home's SQLite storages are created here, once: CLI processes started at the same moment on a
    fresh DAGSTER_HOME race to create the schema (UNIQUE constraint failed: alembic_version).
    """
    root = tmp_path_factory.mktemp("cli_backfill")
    home = root / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.get_runs(limit=1)  # history/runs.db
        instance.event_log_storage.get_asset_records()  # history/runs/index.db
        instance.all_instigator_state()  # schedules/schedules.db
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "GIANT_DATA_DIR": str(root / "data"),
        "GIANT_WSI_ROOT": str(sample_wsi_root),
        "GIANT_EXPERIMENTS": str(write_experiments(root / "experiments.yaml")),
        "GIANT_RATE_LIMIT_DIR": str(root / "ratelimits"),
    }
    synced = subprocess.run([GIANT_EXPERIMENTS_CLI, "sync"], env=env, capture_output=True, text=True)
    assert synced.returncode == 0, synced.stderr
    assert "added 2 experiment partition(s): majority, random" in synced.stdout
    return env


@pytest.fixture
def cli_env(synced_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The synced home over an empty data dir of the test's own."""
    return synced_env | {"GIANT_DATA_DIR": str(tmp_path / "data")}


@pytest.fixture(scope="module")
def grid_env(synced_env: dict[str, str]) -> dict[str, str]:
    """The sample ingested by a run on the code location's default executor (its output is kept under
    ``DEFAULT_RUN``), then the 2 x 2 grid of cells materialized by concurrent CLI processes into the one
    data dir, then the tables across experiments. Tests only read it (a failing run may be added)."""
    ingest = materialize(synced_env, "--select", "multipathqa_csv,benchmark_items", config=DEFAULT_EXECUTOR)
    env = synced_env | {DEFAULT_RUN: succeed(ingest)}
    selection = "predictions,trajectory_steps,item_predictions,benchmark_metrics"
    cells = [f"{b}|{e}" for b in BENCHMARKS for e in EXPERIMENTS]
    procs = [materialize(env, "--select", selection, "--partition", cell) for cell in cells]
    for proc in procs:  # all were started before any is waited on
        succeed(proc)
    succeed(
        materialize(env, "--select", "leaderboard,leaderboard_long,leaderboard_stale,experiment_comparisons")
    )
    return env


def materialize(env: dict[str, str], *args: str, config: dict | None = None) -> subprocess.Popen:
    """Start ``dagster asset materialize`` on the real definitions; output is merged into stdout.
    ``config=DEFAULT_EXECUTOR`` passes no run config (the code location's default executor)."""
    run_config = (
        [] if config is DEFAULT_EXECUTOR else ["--config-json", json.dumps(IN_PROCESS | (config or {}))]
    )
    return subprocess.Popen(
        [DAGSTER, "asset", "materialize", "-m", "giant_assets.platform.definitions", *args, *run_config],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT_S) -> tuple[int, str]:
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


def test_two_experiments_side_by_side_from_concurrent_cli_runs_then_leaderboard(
    grid_env: dict[str, str],
) -> None:
    cli_env = grid_env
    data = Path(cli_env["GIANT_DATA_DIR"])
    for table in ("predictions", "item_predictions", "benchmark_metrics"):
        files = sorted(p.relative_to(data / table).as_posix() for p in (data / table).rglob("*.parquet"))
        assert files == sorted(f"{e}/{b}.parquet" for b in BENCHMARKS for e in EXPERIMENTS), table
    counts = sql(cli_env, "select experiment, benchmark_name, count(*) n from predictions group by all")
    assert sorted(counts.itertuples(index=False, name=None)) == sorted(
        (e, b, {"gtex": 3, "tcga_slidebench": 3}[b]) for b in BENCHMARKS for e in EXPERIMENTS
    )
    keys = ["experiment", "benchmark_name", "benchmark_id", "run_index"]
    assert not sql(cli_env, "select * from predictions").duplicated(keys).any()

    metrics = sql(cli_env, "select * from benchmark_metrics")
    assert sorted(metrics[["experiment", "benchmark_name"]].itertuples(index=False, name=None)) == sorted(
        (e, b) for b in BENCHMARKS for e in EXPERIMENTS
    )
    voted = sql(cli_env, "select * from item_predictions")
    for (experiment, name), frame in voted.groupby(["experiment", "benchmark_name"]):
        row = metrics[(metrics["experiment"] == experiment) & (metrics["benchmark_name"] == name)].iloc[0]
        metric = row["metric_type"]
        assert metric == {"gtex": "balanced_accuracy", "tcga_slidebench": "accuracy"}[name]
        readable = frame[frame["slide_available"]]
        assert row["n_items"] == len(frame) == 3
        assert row["n_slide_readable"] == len(readable) == {"gtex": 2, "tcga_slidebench": 3}[name]
        assert row["value"] == pytest.approx(
            sklearn_score(metric, frame["truth_label"], frame["predicted_label"])
        )
        assert row["value_readable_pct"] == pytest.approx(
            100 * sklearn_score(metric, readable["truth_label"], readable["predicted_label"])
        )
    board = sql(cli_env, "select * from leaderboard")
    ours = board[board["source"] == "ours"].set_index("experiment")
    assert sorted(ours.index) == sorted(EXPERIMENTS)
    assert {"GPT-5 + GIANT", "TITAN (zero-shot)"} <= set(board.loc[board["source"] == "paper", "experiment"])
    shown = metrics.set_index(["experiment", "benchmark_name"])["paper_format"]
    for (experiment, name), text in shown.items():
        assert ours.at[experiment, name] == text
    pairs = sql(cli_env, "select * from experiment_comparisons")
    assert sorted(pairs["benchmark_name"]) == sorted(BENCHMARKS)
    assert set(zip(pairs["experiment_a"], pairs["experiment_b"], strict=True)) == {("majority", "random")}


def test_wrong_partition_bad_config_missing_upstream_and_ranges_fail_clearly(cli_env: dict[str, str]) -> None:
    """Each mistake exits nonzero with a message naming it (no ingest: the first three fail before it)."""
    procs = {
        "partition": materialize(cli_env, "--select", "predictions", "--partition", "tcga_nope|random"),
        "experiment": materialize(cli_env, "--select", "predictions", "--partition", "gtex|nobody"),
        "config": materialize(
            cli_env,
            "--select",
            "predictions",
            "--partition",
            "gtex|random",
            config={"ops": {"predictions": {"config": {"concurrency": "many"}}}},
        ),  # fmt: skip
        "upstream": materialize(cli_env, "--select", "predictions", "--partition", "gtex|random"),
        # `--partition-range` needs BackfillPolicy.single_run() on every selected asset, which the
        # partitioned assets do not have (they read context.partition_key, one cell per run).
        "range": materialize(cli_env, "--select", "predictions", "--partition-range", "gtex...panda"),
    }
    results = {name: finish(proc) for name, proc in procs.items()}
    for name, (code, out) in results.items():
        assert code != 0, f"{name}: {out[-2000:]}"
        assert "RUN_SUCCESS" not in out, name

    out = results["partition"][1]
    assert "tcga_nope|random" in out
    assert "gtex|nobody" in results["experiment"][1]
    out = results["config"][1]
    assert "root:ops:predictions:config:concurrency" in out
    out = results["upstream"][1]
    assert 'loading input "benchmark_items"' in out and "table 'benchmark_items' has no partitions" in out
    out = results["range"][1]
    assert "BackfillPolicy.single_run()" in out
    assert not (Path(cli_env["GIANT_DATA_DIR"]) / "predictions").exists()  # nothing was written


def test_a_name_rerun_with_other_answer_settings_fails_naming_them(
    grid_env: dict[str, str], tmp_path: Path
) -> None:
    """The grid ran `random` with seed 7; the same name declared with seed 8 may not run another cell."""
    env = grid_env | {"GIANT_EXPERIMENTS": str(write_experiments(tmp_path / "experiments.yaml", seed=8))}
    code, out = finish(materialize(env, "--select", "predictions", "--partition", "tcga|random"))
    assert code != 0 and "RUN_SUCCESS" not in out
    assert "experiment 'random' already ran with other answer-deciding settings (seed: 7 -> 8)" in out
    cells = sql(env, "select distinct experiment, benchmark_name from predictions order by all")
    assert cells.values.tolist() == sorted([e, b] for b in BENCHMARKS for e in EXPERIMENTS)  # no tcga


def test_runs_execute_in_their_own_process_unless_configured_multiprocess(
    grid_env: dict[str, str], cli_env: dict[str, str]
) -> None:
    default = grid_env[DEFAULT_RUN]  # the grid's ingest, run with no run config
    assert "Executing steps in process" in default and "multiprocess" not in default
    config = {"execution": {"config": {"multiprocess": {}}}}
    multi = succeed(materialize(cli_env, "--select", "multipathqa_csv", config=config))
    assert "Executing steps using multiprocess executor" in multi
    assert 'Launching subprocess for "multipathqa_csv"' in multi
