"""`giant-experiments stop NAME` against a real `dagster-daemon`: a backfill of an experiment's row runs
GIANT against a slow loopback model; stop cancels the backfill and terminates its runs (queued ones
leave the queue, started ones end as canceled), and the model is asked nothing more; another
experiment's run is left alone. With --benchmark, only that cell's run is stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRun, DagsterRunStatus, materialize
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.instance.ref import InstanceRef
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemotePartitionSetOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.tags import get_multidimensional_partition_tag
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.utils import make_new_backfill_id

from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.demo.scripted.recorded import RecordedRequest
from giant_assets.demo.scripted.replies import Reply
from giant_assets.platform import experiments_cli
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.definitions import defs
from giant_assets.platform.partitions import BENCHMARK, result_key
from giant_assets.platform.stop import stop_experiment
from tests.support.dagster_env import (
    add_experiments,
    daemon_home,
    dagster_daemon,
    resources_for,
    write_experiments,
)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROW = "slow-row"
CELLS = ("tcga_slidebench", "tcga", "gtex")
RUNS_PER_ITEM = 10
CALLS_PER_CELL = 3 * RUNS_PER_ITEM * 2  # 3 items of each benchmark in the sample, 2 calls per run
DEFINITIONS = "giant_assets.platform.definitions"  # the code location (workspace.yaml's name for it too)
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def wait_for(what: str, done, seconds: float = 180, state=lambda: "") -> None:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}{state()}")
        time.sleep(0.5)


@dataclass
class Row:
    """A daemon-run instance where a backfill of ROW's ``cells`` asks a slow loopback model."""

    env: dict[str, str]
    instance: DagsterInstance
    server: ScriptedModelServer
    answering: threading.Event  # clear: the model takes requests (counted) but answers none yet

    def evaluate_runs(self) -> list[DagsterRun]:
        return [r for r in self.instance.get_runs() if r.job_name == "evaluate_cell"]

    def stop(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([BIN / "giant-experiments", "stop", ROW, *args], env=self.env, cwd=REPO,
                              capture_output=True, text=True, timeout=120)  # fmt: skip


def queue_backfill(instance: DagsterInstance, keys: list[str]) -> str:
    """A backfill of evaluate_cell's partitions ``keys`` left to the daemon, as the UI's *Launch backfill*
    (GraphQL launchPartitionBackfill) makes it: it stays requested while its runs are unfinished."""
    location = ManagedGrpcPythonEnvCodeLocationOrigin(
        LoadableTargetOrigin(module_name=DEFINITIONS), DEFINITIONS
    )
    origin = RemotePartitionSetOrigin(
        repository_origin=RemoteRepositoryOrigin(
            code_location_origin=location, repository_name=SINGLETON_REPOSITORY_NAME
        ),
        partition_set_name="evaluate_cell_partition_set",
    )
    backfill_id = make_new_backfill_id()
    instance.add_backfill(
        PartitionBackfill(backfill_id=backfill_id, partition_set_origin=origin,
                          status=BulkActionStatus.REQUESTED, partition_names=keys, from_failure=False,
                          reexecution_steps=None, tags={}, backfill_timestamp=time.time())
    )  # fmt: skip
    return backfill_id


@contextmanager
def backfilled_row(
    tmp_path: Path, sample_wsi_root: Path, cells: tuple[str, ...], answering: bool = True
) -> Iterator[Row]:
    """A daemon up on an instance whose backfill of ROW's ``cells`` it runs (as the UI launches one; a
    backfill from the shell, `dagster job backfill`, is test_backfill_row's). ``answering=False``: the
    model holds every request until the test sets ``Row.answering``, so no cell can finish meanwhile."""
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    daemon_home(home)
    gate = threading.Event()
    if answering:
        gate.set()

    def held_policy(request: RecordedRequest) -> Reply:
        gate.wait(300)
        return demo_policy(request)

    server = ScriptedModelServer(rule=held_policy, latency_s=1.5).start()
    # ten runs of each item, one request at a time: a cell asks the model for minutes, so the tests stop
    # it long before it could finish (test_stop_cancels_the_backfill... bounds the calls by that; the
    # one-benchmark test holds the answers instead, since a cell can still finish under load)
    slow = {"agent": "giant", "model": "scripted-slow", "base_url": server.openai_base_url, "concurrency": 1,
            "runs_per_item": RUNS_PER_ITEM}  # fmt: skip
    declared = write_experiments(tmp_path / "experiments.yaml", {ROW: slow})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), "GIANT_WSI_ROOT": str(sample_wsi_root),
            "GIANT_EXPERIMENTS": str(declared)}  # fmt: skip
    try:
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, ROW)
            assert materialize(
                [multipathqa_csv, benchmark_items],
                resources=resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root)),
                instance=instance,
            ).success
            queue_backfill(instance, [str(result_key(ROW, b)) for b in cells])
        with dagster_daemon(env, REPO), DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            yield Row(env, instance, server, gate)
    finally:
        gate.set()
        server.stop()


def test_stop_cancels_the_backfill_and_terminates_the_rows_runs(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    with backfilled_row(tmp_path, sample_wsi_root, CELLS) as row:
        instance, server = row.instance, row.server
        wait_for("a run of the row asking the model", lambda: len(server.requests) > 0)
        stopped_at = time.time()
        stop = row.stop()
        assert stop.returncode == 0, stop.stdout + stop.stderr
        # the backfill is canceled, and every run of its cells (it submits them all at once) is stopped
        assert stop.stdout.startswith(f"{ROW}: 1 backfill(s) canceled, {len(CELLS)} run(s) canceled or ")
        (backfill,) = instance.get_backfills()
        assert backfill.status in {BulkActionStatus.CANCELING, BulkActionStatus.CANCELED}

        def ended() -> bool:
            runs = row.evaluate_runs()
            return bool(runs) and all(r.status in FINISHED for r in runs)

        wait_for("every run of the row to end", ended)
        asked = len(server.requests)
        runs = row.evaluate_runs()
        assert DagsterRunStatus.CANCELED in {r.status for r in runs}
        # none ran to its end after the stop (a cell with few calls may have finished before it)
        records = instance.get_run_records()
        finished = [r.end_time for r in records if r.dagster_run.status == DagsterRunStatus.SUCCESS]
        assert all(end is not None and end <= stopped_at for end in finished), (finished, stopped_at)
        time.sleep(5)  # the daemon is still up: the backfill launches nothing more, nothing asks
        assert len(row.evaluate_runs()) == len(runs)
        assert len(server.requests) == asked
    assert asked < len(CELLS) * CALLS_PER_CELL  # the row was cut short


def test_stop_one_benchmark_cancels_its_run_and_leaves_the_other_cells_of_the_backfill_running(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    """One backfill holds both cells: canceling it would cancel the gtex run too, so it is left running.
    The model answers nothing until the tcga_slidebench run is canceled: the gtex cell cannot finish
    before the test looks for its next request (it did, under load, when the model answered all along)."""
    with backfilled_row(tmp_path, sample_wsi_root, ("tcga_slidebench", "gtex"), answering=False) as row:
        tag = get_multidimensional_partition_tag(BENCHMARK)

        def by_benchmark() -> dict[str, DagsterRun]:
            return {r.tags[tag]: r for r in row.evaluate_runs()}

        wait_for("both cells' runs started and asking the model", lambda: len(row.server.requests) > 0 and [
            r.status for r in by_benchmark().values()] == [DagsterRunStatus.STARTED] * 2)  # fmt: skip
        stop = row.stop("--benchmark", "tcga_slidebench")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        stopped = by_benchmark()["tcga_slidebench"].run_id
        assert (
            stop.stdout.splitlines()[0]
            == f"{ROW}: 0 backfill(s) canceled, 1 run(s) canceled or terminating: {stopped}"
        )
        (backfill,) = row.instance.get_backfills()
        assert f"backfill {backfill.backfill_id} also runs other cells: left running" in stop.stdout
        wait_for(
            "the tcga_slidebench run to end", lambda: by_benchmark()["tcga_slidebench"].status in FINISHED
        )
        assert by_benchmark()["tcga_slidebench"].status == DagsterRunStatus.CANCELED
        asked = len(row.server.requests)  # the gtex cell goes on asking the model; its backfill is kept
        row.answering.set()
        gtex = lambda: f" (gtex run {by_benchmark()['gtex'].status.value})"  # noqa: E731
        wait_for("the gtex cell to ask the model again", lambda: len(row.server.requests) > asked, 60, gtex)
        assert by_benchmark()["gtex"].status == DagsterRunStatus.STARTED
        assert row.instance.get_backfill(backfill.backfill_id).status == BulkActionStatus.REQUESTED
        assert row.stop().returncode == 0  # the rest of the row, so the test ends soon
        wait_for("the gtex run to end", lambda: by_benchmark()["gtex"].status in FINISHED)


def test_stop_one_benchmark_names_the_cells_a_mixed_backfill_has_not_launched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No daemon: the backfill has launched nothing yet. Stopping one of its cells leaves it requested and
    says which cells it will still launch (exit 1); stopping the whole row cancels it."""
    home = daemon_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    keys = [str(result_key(ROW, b)) for b in ("tcga_slidebench", "gtex")]
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        backfill_id = queue_backfill(instance, keys)
    assert experiments_cli.main(["stop", ROW, "--benchmark", "gtex"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{ROW}: 0 backfill(s) canceled, 0 run(s) canceled or terminating: none",
        f"backfill {backfill_id} also runs other cells: left running "
        "(its runs of these cells are canceled above)",
    ]
    assert f"not launched yet by such a backfill, so not stopped: {keys[1]};" in err
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert instance.get_backfill(backfill_id).status == BulkActionStatus.REQUESTED
        stopped = stop_experiment(instance, ROW)
        assert (stopped.backfills, stopped.kept_backfills, stopped.not_launched) == ([backfill_id], [], [])
        assert instance.get_backfill(backfill_id).status == BulkActionStatus.CANCELING


def test_stop_finds_the_asset_backfills_of_its_cells(tmp_path: Path) -> None:
    """An asset backfill (the asset pages' *Materialize* of a row or a column) lists no partition names:
    its cells are read from its target; one of ROW's cells alone is canceled, a column with another
    experiment's cell is left running."""
    home = daemon_home(tmp_path / "dagster_home")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        add_experiments(instance, ROW, "other")
        graph = defs.resolve_asset_graph()

        def asset_backfill(*keys: str) -> str:
            backfill = PartitionBackfill.from_asset_partitions(
                backfill_id=make_new_backfill_id(), asset_graph=graph, partition_names=list(keys),
                asset_selection=[AssetKey("predictions"), AssetKey("benchmark_metrics")],
                backfill_timestamp=time.time(), tags={}, dynamic_partitions_store=instance,
                all_partitions=False, title=None, description=None, run_config=None,
            )  # fmt: skip
            instance.add_backfill(backfill)
            return backfill.backfill_id

        row = asset_backfill(str(result_key(ROW, "tcga")), str(result_key(ROW, "gtex")))
        column = asset_backfill(str(result_key(ROW, "panda")), str(result_key("other", "panda")))
        stopped = stop_experiment(instance, ROW)
        assert (stopped.backfills, stopped.kept_backfills) == ([row], [column])
        assert stopped.not_launched == [str(result_key(ROW, "panda"))]
        assert instance.get_backfill(row).status == BulkActionStatus.CANCELING
        assert instance.get_backfill(column).status == BulkActionStatus.REQUESTED


def test_stop_without_an_instance_says_so_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No $DAGSTER_HOME (the real console script), a relative one, a missing folder: a clear error each
    time, no traceback. Mutation: ``_stop`` opening ``DagsterInstance.get()`` unchecked."""
    declared = write_experiments(tmp_path / "e.yaml", {ROW: {"agent": "random"}})
    advice = ": set it to the instance's folder (the Makefile uses ./dagster_home, as an absolute path)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    out = subprocess.run([BIN / "giant-experiments", "--file", str(declared), "stop", ROW], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "error: stop acts on the Dagster instance, and $DAGSTER_HOME is not set" + advice
    missing = str(tmp_path / "nowhere")
    for home, problem in (("dagster_home", "('dagster_home') is not an absolute path"),
                          (missing, f"({missing!r}) is not a folder")):  # fmt: skip
        monkeypatch.setenv("DAGSTER_HOME", home)
        assert experiments_cli.main(["--file", str(declared), "stop", ROW]) == 2
        err = capsys.readouterr().err
        assert err == f"error: stop acts on the Dagster instance, and $DAGSTER_HOME {problem}" + advice


def test_stop_of_an_unknown_experiment_names_it_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not declared, no partition, nothing running: exit 2 naming it. A declared experiment with
    nothing to stop, or one no longer declared whose partition is still there, exits 0. An unknown
    --benchmark is refused too. Mutation: the unknown check removed (exit 0, silence)."""
    home = daemon_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    declared = str(write_experiments(tmp_path / "e.yaml", {"alpha": {"agent": "random"}}))
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        add_experiments(instance, "alpha", "removed")
    assert experiments_cli.main(["--file", declared, "stop", "alhpa"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "error: unknown experiment 'alhpa': not declared (one of: alpha) and no partition, backfill or run "
        "of the instance names it; nothing stopped\n"
    )
    for name in ("alpha", "removed"):
        assert experiments_cli.main(["--file", declared, "stop", name]) == 0
        assert (
            capsys.readouterr().out
            == f"{name}: 0 backfill(s) canceled, 0 run(s) canceled or terminating: none\n"
        )
    assert experiments_cli.main(["--file", declared, "stop", "alpha", "--benchmark", "gtx"]) == 2
    assert "error: unknown benchmark(s) 'gtx' (one of: " in capsys.readouterr().err
