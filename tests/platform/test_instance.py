"""The platform's Dagster instance (platform/instance.py): a run asks the event log storage for each
dynamic partition key once; this process's adds and deletes count at once; outside a run nothing is
remembered, so a long-lived process sees another process's delete at once. Real SQLite instance from the
shipped dagster.yaml, real materializations, another real process."""

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import AssetExecutionContext, DagsterInstance, asset, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.cluster.instance import POSTGRES_URL_ENV
from giant_assets.platform.instance import GiantInstance
from giant_assets.platform.partitions import BENCHMARK, EXPERIMENT, result_key, results_partitions
from tests.support.warm_start.server import warm_code

REPO = Path(__file__).resolve().parents[2]
CELL = result_key("e1", "gtex")


@asset(partitions_def=results_partitions)
def first() -> int:
    return 1


@asset(partitions_def=results_partitions)
def second(first: int) -> int:
    return first + 1


@asset(partitions_def=results_partitions)
def third(second: int) -> int:
    return second + 1


@pytest.fixture(scope="module")
def shipped_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Dagster home with the shipped dagster.yaml, its SQLite storages created once (the slow part),
    holding cell e1 x gtex and the benchmarks panda and tcga."""
    home = tmp_path_factory.mktemp("home")
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.add_dynamic_partitions(EXPERIMENT, ["e1"])
        instance.add_dynamic_partitions(BENCHMARK, ["gtex", "panda", "tcga"])
        instance.all_instigator_state()  # schedules.db too
    return home


@pytest.fixture
def instance(shipped_home: Path, tmp_path: Path) -> Iterator[DagsterInstance]:
    """A persistent instance of its own: a copy of the shipped home."""
    home = shutil.copytree(shipped_home, tmp_path / "home")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        yield instance


def storage_log(instance: DagsterInstance) -> list[tuple[str, ...]]:
    """What the event log storage is asked from now on, in order: partition look-ups and stored events."""
    storage, log = instance.event_log_storage, []
    ask, store = storage.has_dynamic_partition, storage.store_event

    def has_dynamic_partition(name: str, key: str) -> bool:
        log.append(("ask", name, key))
        return ask(name, key)

    def store_event(event) -> None:
        log.append(("event", str(event.dagster_event_type), event))
        store(event)

    storage.has_dynamic_partition, storage.store_event = has_dynamic_partition, store_event
    return log


def asked_per_run(log: list[tuple[str, ...]]) -> list[list[tuple[str, ...]]]:
    """The look-ups between each RUN_START and its run's end, one list per run."""
    runs, current = [], None
    for entry in log:
        if entry[:2] == ("event", "DagsterEventType.RUN_START"):
            current = []
        elif entry[0] == "event" and entry[1] in (
            "DagsterEventType.RUN_SUCCESS",
            "DagsterEventType.RUN_FAILURE",
        ):
            runs.append(current)
            current = None
        elif entry[0] == "ask" and current is not None:
            current.append(entry)
    return runs


def test_the_shipped_instance_files_name_the_platform_instance(
    instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert type(instance) is GiantInstance
    assert type(DagsterInstance.from_ref(instance.get_ref())) is GiantInstance  # what a run worker builds
    # the cluster's file, read as its processes read it (no database is reached to build the ref)
    monkeypatch.setenv(POSTGRES_URL_ENV, "postgresql+psycopg2://nobody@127.0.0.1:9/none")
    cluster = InstanceRef.from_dir(str(REPO / "dagster_home" / "postgres"))
    assert cluster.custom_instance_class is GiantInstance
    assert cluster.storage_data.class_name == "DagsterPostgresStorage"


def test_a_run_asks_the_storage_for_each_partition_key_once(instance: DagsterInstance) -> None:
    log = storage_log(instance)
    for _ in range(2):  # the second run asks again: nothing is remembered between runs
        assert materialize([first, second, third], instance=instance, partition_key=CELL).success
    once = sorted([("ask", BENCHMARK, "gtex"), ("ask", EXPERIMENT, "e1")])
    assert [sorted(asked) for asked in asked_per_run(log)] == [once, once]


def test_a_step_process_asks_once_per_step_and_a_run_end_ends_its_steps(instance: DagsterInstance) -> None:
    """What a step's own process stores (the multiprocess executor, the cluster's Celery workers): the
    step's events only, no RUN_START. Replayed from a real run into the instance, in order."""
    log = storage_log(instance)
    assert materialize([first, second, third], instance=instance, partition_key=CELL).success
    events = [entry[2] for entry in log if entry[0] == "event"]
    kind = {str(e.dagster_event_type): e for e in events if e.step_key in (None, "first")}
    del log[:]

    def ask_three_times() -> None:
        for _ in range(3):
            assert instance.has_dynamic_partition(BENCHMARK, "gtex")

    for event in (e for e in events if e.step_key):  # the three steps, each in a process of its own
        instance.handle_new_event(event)
        if str(event.dagster_event_type) == "DagsterEventType.STEP_START":
            ask_three_times()
    ask_three_times()  # no step executing: every time
    # a run that ends without its step's end (the step's process died): its steps end with it
    for name in ("RUN_START", "STEP_START", "RUN_SUCCESS"):
        instance.handle_new_event(kind[f"DagsterEventType.{name}"])
    ask_three_times()
    assert [entry for entry in log if entry[0] == "ask"] == [("ask", BENCHMARK, "gtex")] * (3 + 3 + 3)


@asset(partitions_def=results_partitions)
def churn(context: AssetExecutionContext) -> dict[str, bool]:
    """Deletes and adds partitions while its run executes; what the instance answers after each."""
    instance = context.instance
    seen = {"gtex before": instance.has_dynamic_partition(BENCHMARK, "gtex")}
    instance.delete_dynamic_partition(BENCHMARK, "gtex")
    seen["gtex deleted"] = instance.has_dynamic_partition(BENCHMARK, "gtex")
    instance.add_dynamic_partitions(BENCHMARK, ["gtex"])  # back: the step's output checks its partition
    seen["gtex added back"] = instance.has_dynamic_partition(BENCHMARK, "gtex")
    seen["new before"] = instance.has_dynamic_partition(BENCHMARK, "new")
    instance.add_dynamic_partitions(BENCHMARK, ["new"])
    seen["new added"] = instance.has_dynamic_partition(BENCHMARK, "new")
    # a delete landing while a look-up is in flight (another thread): the answer read before it is not kept
    storage = instance.event_log_storage
    ask = storage.has_dynamic_partition

    def answer_then_delete(name: str, key: str) -> bool:
        found = ask(name, key)
        storage.has_dynamic_partition = ask
        instance.delete_dynamic_partition(name, key)
        return found

    storage.has_dynamic_partition = answer_then_delete
    seen["tcga in flight"] = instance.has_dynamic_partition(BENCHMARK, "tcga")
    seen["tcga after"] = instance.has_dynamic_partition(BENCHMARK, "tcga")
    return seen


def test_this_process_adds_and_deletes_count_at_once_during_a_run(instance: DagsterInstance) -> None:
    result = materialize([churn], instance=instance, partition_key=CELL)
    assert result.output_for_node("churn") == {
        "gtex before": True,
        "gtex deleted": False,
        "gtex added back": True,
        "new before": False,
        "new added": True,
        "tcga in flight": True,
        "tcga after": False,
    }


def delete_elsewhere(home: str, *benchmarks: str) -> None:
    """Delete benchmark partitions from another process, as `giant-experiments prune` or the sensor do."""
    code = (
        "import sys\nfrom dagster import DagsterInstance\n"
        "from dagster._core.instance.ref import InstanceRef\n"
        "with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as instance:\n"
        "    for key in sys.argv[2:]:\n        instance.delete_dynamic_partition('benchmark', key)\n"
    )
    subprocess.run([sys.executable, "-c", code, home, *benchmarks], check=True, timeout=120, env=warm_code())


@asset(partitions_def=results_partitions)
def others_delete(context: AssetExecutionContext) -> dict[str, bool]:
    """Another process deletes panda (which this run has looked up) and tcga while the run executes."""
    instance = context.instance
    seen = {"panda before": instance.has_dynamic_partition(BENCHMARK, "panda")}
    delete_elsewhere(instance.root_directory, "panda", "tcga")
    seen["panda after"] = instance.has_dynamic_partition(BENCHMARK, "panda")
    return seen


def test_another_process_delete_is_seen_at_once_outside_runs_and_by_a_run_once_it_ends(
    instance: DagsterInstance,
) -> None:
    with DagsterInstance.from_ref(instance.get_ref()) as daemon:  # a long-lived process: runs nothing
        assert daemon.has_dynamic_partition(BENCHMARK, "tcga")
        result = materialize([others_delete], instance=instance, partition_key=CELL)
        # the run keeps its answer to its end, as if the delete came a moment later
        assert result.output_for_node("others_delete") == {"panda before": True, "panda after": True}
        assert not instance.has_dynamic_partition(BENCHMARK, "panda")  # the run ended: asked again
        assert not daemon.has_dynamic_partition(BENCHMARK, "tcga")  # nothing remembered outside a run
