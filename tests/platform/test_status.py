"""`giant-experiments status` and the failed cells beside `leaderboard_stale`, over real materializations
on an on-disk Dagster instance: a complete cell, a row whose every call the model refuses (failed, with
the reason and the command that retries it), a cell whose run is in flight (running), cells not started."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.core.settings import SUPERSEDED_WARNING_FILTER
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy
from giant_assets.platform import experiments_cli
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.platform.resources import ExperimentsResource
from giant_assets.platform.status import grid_states
from tests.support.dagster_env import INSTANCE_YAML, add_experiments, resources_for, write_experiments

BENCHMARK = "tcga_slidebench"  # three items, every slide readable
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
BOARD = AssetSelection.assets("leaderboard", "leaderboard_long", "leaderboard_stale")
WARNINGS_PREFIX = f"PYTHONWARNINGS={shlex.quote(SUPERSEDED_WARNING_FILTER)}"
DAGSTER = shlex.quote(str(Path(sys.executable).parent / "dagster"))  # the venv's, by its absolute path
REVIEW_CELL = AssetSelection.assets(
    "predictions", "trajectory_steps", "path_review_regions", "path_review_answers"
)


class Model:
    """Refuses every call of the experiment 'refused' (HTTP 400); holds a call of 'slow' until released."""

    def __init__(self) -> None:
        self.refuse = True
        self.release = threading.Event()
        self.held = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.json.get("model") == "scripted-refused" and self.refuse:
            return Reply(status=400, text="model not available to this key")
        if request.json.get("model") == "scripted-slow":
            self.held.set()
            self.release.wait(60)
        return demo_policy(request)


@pytest.fixture
def grid(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    shutil.copyfile(INSTANCE_YAML, tmp_path / "dagster_home" / "dagster.yaml")  # the instance users run
    declared = tmp_path / "experiments.yaml"
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    instance = DagsterInstance.get()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    model = Model()
    with ScriptedModelServer(rule=model) as server:
        common = {"agent": "giant", "base_url": server.openai_base_url, "max_steps": 2, "concurrency": 1}
        write_experiments(
            declared,
            {
                "rand": {"agent": "random"},
                "refused": common | {"model": "scripted-refused"},
                "slow": common | {"model": "scripted-slow"},
                "review": common | {"agent": "path_review", "model": "scripted-review"},
            },
        )
        add_experiments(instance, "rand", "refused", "slow", "review")

        def run(selection: AssetSelection, key=None):
            return materialize(
                ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance,
                raise_on_error=False,
            )  # fmt: skip

        assert run(AssetSelection.assets("multipathqa_csv", "benchmark_items")).success
        yield run, model, instance, data
        model.release.set()


def _states(instance: DagsterInstance | None, data: Path) -> dict[tuple[str, str], object]:
    declared = ExperimentsResource().all()
    items = ParquetStore(data).read("benchmark_items")
    return {(s.experiment, s.benchmark): s for s in grid_states(instance, data, declared, items)}


def test_status_of_complete_failed_running_and_to_do_cells(grid, capsys: pytest.CaptureFixture[str]) -> None:
    run, model, instance, data = grid
    assert run(CELL, result_key("rand", BENCHMARK)).success
    assert not run(CELL, result_key("refused", BENCHMARK)).success  # every call refused: 3 of 3 failed
    states = _states(instance, data)
    done = states[("rand", BENCHMARK)]
    assert done.state == "complete" and "3/3 runs answered" in done.detail and not done.retry
    failed = states[("refused", BENCHMARK)]
    assert failed.state == "failed" and failed.detail.startswith("run ")  # the run's failure event
    assert "3 of 3 runs with a slide failed" in failed.detail and "model not available" in failed.detail
    assert failed.retry.startswith(f"fix the cause, then {WARNINGS_PREFIX} {DAGSTER} asset materialize")
    assert failed.retry.endswith(f'--partition "{BENCHMARK}|refused"')  # retry_failed is on by default
    untouched = states[("refused", "gtex")]
    assert untouched.state == "to do" and "not started" in untouched.detail
    assert untouched.retry == ""  # nothing failed: no retry command for a cell never started
    without_runs = _states(None, data)[("refused", BENCHMARK)]  # no instance: from the journal alone
    assert without_runs.state == "failed"
    assert without_runs.detail.startswith("3 of 3 runs with a slide failed")

    # the leaderboard lists the 100%-failed row beside the set-aside cells, with its reason
    assert run(BOARD).success
    stale = ParquetStore(data).read("leaderboard_stale")
    row = stale[stale["status"] == "failed"].set_index("partition").loc[f"{BENCHMARK}|refused"]
    assert "3 of 3 runs with a slide failed" in row["reason"] and "dagster asset materialize" in row["rerun"]
    assert set(stale["status"]) == {"failed"}  # the complete cell is not set aside

    # a cell whose run is in flight: running, with the journal's counts until progress is reported
    worker = threading.Thread(target=run, args=(CELL, result_key("slow", BENCHMARK)))
    worker.start()
    try:
        assert model.held.wait(120)
        slow = _states(instance, data)[("slow", BENCHMARK)]
        assert slow.state == "running" and "/3 runs" in slow.detail
    finally:
        model.release.set()
        worker.join()
    assert _states(instance, data)[("slow", BENCHMARK)].state == "complete"

    # the command prints every cell of one experiment, and the counts
    assert experiments_cli.main(["status", "refused"]) == 0
    out = capsys.readouterr().out
    assert f"refused                  {BENCHMARK:<18} failed" in out and "retry: fix the cause, then" in out
    assert out.strip().splitlines()[-1] == "1 failed, 4 to do of 5 cell(s)"
    assert out.count("retry:") == 1  # the failed cell's only
    assert experiments_cli.main(["status", "nope"]) == 2

    # without a name: one line per experiment (4 experiments x 5 benchmarks), no retry lines
    assert experiments_cli.main(["status"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 + 2 and "retry:" not in "\n".join(lines)
    by_name = {line.split()[0]: line for line in lines[:4]}
    assert set(by_name) == {"rand", "refused", "review", "slow"}
    assert "5 cell(s): 1 failed, 4 to do; $" in by_name["refused"]
    assert "5 cell(s): 1 complete, 4 to do; $0.0000 spent" in by_name["rand"]
    assert lines[-2] == "2 complete, 1 failed, 17 to do of 20 cell(s)"


def test_a_path_review_cell_is_reviewed_not_to_do(grid, capsys: pytest.CaptureFixture[str]) -> None:
    """A path review's runs are never scored: once journalled its cell reads `reviewed`, not `to do ...
    not scored yet`, and has no retry command."""
    run, model, instance, data = grid
    assert run(REVIEW_CELL, result_key("review", BENCHMARK)).success
    reviewed = _states(instance, data)[("review", BENCHMARK)]
    assert reviewed.state == "reviewed" and reviewed.detail.startswith("3/3 review runs answered, 0 failed")
    assert "not scored yet" not in reviewed.detail and reviewed.retry == ""
    assert _states(instance, data)[("review", "gtex")].state == "to do"  # not journalled yet
    assert experiments_cli.main(["status"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("review "))
    assert "5 cell(s): 1 reviewed, 4 to do;" in line


def test_the_printed_retry_command_runs_the_cell_without_the_supersession_warning(
    grid, tmp_path: Path, sample_wsi_root: Path
) -> None:
    """What `status` and leaderboard_stale print, pasted into a shell without the README's environment
    (no PYTHONWARNINGS), materializes the cell on the instance and prints no Dagster FutureWarning."""
    run, model, instance, data = grid
    assert run(CELL, result_key("rand", BENCHMARK)).success  # the leaderboard needs one cell done
    assert not run(CELL, result_key("refused", BENCHMARK)).success
    assert run(BOARD).success
    stale = ParquetStore(data).read("leaderboard_stale").set_index("partition")
    printed = stale.loc[f"{BENCHMARK}|refused", "rerun"]
    assert _states(instance, data)[("refused", BENCHMARK)].retry == printed
    command = printed.removeprefix("fix the cause, then ")
    assert command.startswith(f"{WARNINGS_PREFIX} {DAGSTER} asset materialize ")
    model.refuse = False  # the cause fixed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {
        "GIANT_WSI_ROOT": str(sample_wsi_root),
        "PATH": "/usr/bin:/bin",  # the venv is not on PATH: the command names its dagster itself
    }
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RUN_SUCCESS" in done.stderr and "Warning" not in done.stderr, done.stderr[-3000:]
    assert _states(instance, data)[("refused", BENCHMARK)].state == "complete"


def test_a_cell_waiting_on_its_provider_batches(tmp_path: Path, sample_wsi_root: Path) -> None:
    from giant_assets.demo.batch_api import BatchAPIServer

    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    instance = DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=10**6) as api:
        settings = {"agent": "giant", "model": "gpt-5", "base_url": api.openai_base_url, "max_steps": 3,
                    "batch": True}  # fmt: skip
        write_experiments(declared, {"batched": settings})
        add_experiments(instance, "batched")
        for selection, key in ((AssetSelection.assets("multipathqa_csv", "benchmark_items"), None),
                               (CELL, result_key("batched", "gtex"))):  # fmt: skip
            assert materialize(
                ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
            ).success
        (batch_id,) = api.batches
    declared_exps = ExperimentsResource(path=str(declared)).all()
    items = ParquetStore(data).read("benchmark_items")
    states = {s.benchmark: s for s in grid_states(instance, data, declared_exps, items)}
    waiting = states["gtex"]
    assert waiting.state == "waiting" and f"wait on provider batch(es) {batch_id} since" in waiting.detail
    assert waiting.detail.startswith("2 run(s)") and "0/2 runs answered" in waiting.detail
    assert states["tcga"].state == "to do"
