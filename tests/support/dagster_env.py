"""Resources for real materializations over a temp data directory, and experiments files for them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from dagster import DagsterInstance

from giant_assets.benchmarks.registry import BUILT_IN_NAMES
from giant_assets.core.settings import SENSOR_INTERVAL_ENV
from giant_assets.platform.io_manager import ParquetDuckDBIOManager
from giant_assets.platform.partitions import BENCHMARK, EXPERIMENT
from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource, StorageResource

REPO = Path(__file__).resolve().parents[2]
INSTANCE_YAML = REPO / "dagster_home" / "dagster.yaml"  # the SQLite instance `make ui` runs on
SENSOR_TICK_S = 2  # a daemon test's sensors: every 2 s (the code location's own: 15 to 30 s)


def write_experiments(path: Path, experiments: dict[str, dict[str, Any]], **defaults: Any) -> Path:
    """An experiments YAML file declaring ``experiments`` (name -> settings)."""
    doc: dict[str, Any] = {"experiments": experiments}
    if defaults:
        doc["defaults"] = defaults
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def resources_for(data_dir: Path, experiments_file: Path | str = "", **dataset: str) -> dict:
    storage = StorageResource(data_dir=str(data_dir))
    return {
        "io_manager": ParquetDuckDBIOManager(storage=storage),
        "storage": storage,
        "dataset": MultiPathQAResource(**dataset),
        "experiments": ExperimentsResource(path=str(experiments_file)),
    }


def ingested_sample(data_dir: Path, experiments_file: Path, wsi_root: Path) -> tuple[DagsterInstance, dict]:
    """An ephemeral instance and resources over ``data_dir`` with the bundled sample's
    ``multipathqa_csv`` and ``benchmark_items`` materialized (the start of every cell test)."""
    from dagster import AssetSelection, materialize

    from giant_assets.platform.definitions import ALL_ASSETS

    instance = DagsterInstance.ephemeral()
    resources = resources_for(data_dir, experiments_file=experiments_file, wsi_root=str(wsi_root))
    ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
    assert materialize(ALL_ASSETS, selection=ingest, resources=resources, instance=instance).success
    return instance, resources


def add_experiments(instance: DagsterInstance, *names: str) -> None:
    """Register experiment partitions, and the five built-in benchmarks', on an instance (what the sensor
    or `giant-experiments sync` do)."""
    instance.add_dynamic_partitions(EXPERIMENT, list(names))
    known = set(instance.get_dynamic_partitions(BENCHMARK))
    instance.add_dynamic_partitions(BENCHMARK, [b for b in BUILT_IN_NAMES if b not in known])


def daemon_home(home: Path, base: Path = INSTANCE_YAML, **run_monitoring: int) -> Path:
    """``home`` made a Dagster home as ``base`` (the repository's dagster.yaml unless given), with a quicker
    run queue: looked at every second instead of Dagster's five, and its runs launched on as many threads
    as may run at once (as the repository's dagster.yaml does; the PostgreSQL one leaves Dagster's one at
    a time). ``run_monitoring`` overrides settings of its run monitoring (e.g. a short
    ``start_timeout_seconds``)."""
    home.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(base.read_text())
    queue = config["run_queue"]
    queue |= {"dequeue_interval_seconds": 1, "dequeue_use_threads": True}
    queue["dequeue_num_workers"] = queue["max_concurrent_runs"]
    config["run_monitoring"] |= run_monitoring
    (home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return home


QUICK_DAEMON = Path(__file__).parent / "commands" / "quick_daemon.py"


def daemon_command(module: str) -> list[str]:
    """The command of a test's daemon for the code location ``module``: ``dagster-daemon run`` whose code
    server is started once (commands/quick_daemon.py)."""
    return [sys.executable, str(QUICK_DAEMON), "run", "-m", module]


DAEMON_STOPPED = b"Daemon threads shut down."  # dagster-daemon's last line once SIGTERM stopped its daemons


@contextmanager
def dagster_daemon(env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen]:
    """A real ``dagster-daemon run`` (daemon_command) of the code location in its own session, stopped with
    everything it started when the block ends: SIGTERM, then SIGKILL once it says its daemons stopped
    (after that it only waits ~10 s for its code server to exit), or after 20 s. Its sensors tick every
    SENSOR_TICK_S seconds (GIANT_SENSOR_INTERVAL_S) instead of their 15 to 30, unless ``env`` sets it."""
    daemon = subprocess.Popen(
        daemon_command("giant_assets.platform.definitions"),
        env={SENSOR_INTERVAL_ENV: str(SENSOR_TICK_S)} | env,
        cwd=cwd,
        stdout=subprocess.PIPE,  # its log (a handler that flushes each line)
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stopped = threading.Event()

    def read_log() -> None:  # drains the daemon's log (a full pipe would block it), watching for its end
        for line in daemon.stdout:
            if DAEMON_STOPPED in line:
                stopped.set()

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        yield daemon
    finally:
        with contextlib.suppress(ProcessLookupError):  # a test may have killed the group already
            os.killpg(daemon.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while not stopped.is_set() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()
        reader.join(timeout=2)  # the pipe ends with the group; a child outside it would keep it open
        if not reader.is_alive():
            daemon.stdout.close()
