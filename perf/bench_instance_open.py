"""Opening a Dagster instance with alembic's migration folder parsed at every look (Dagster as shipped)
against parsed once per process (platform/migration_scripts.py): CPU of this process per open.

Three opens: a new Dagster home with the shipped dagster.yaml (what every test and a first `make demo`
do), the same home again (every run worker, code server and CLI command), and an ephemeral instance
(``materialize()`` without an instance). The two ways alternate so load on the machine affects both alike.

    python -m perf.bench_instance_open [--rounds 6]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from alembic.script import ScriptDirectory
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef

from giant_assets.platform import migration_scripts

REPO = Path(__file__).resolve().parents[1]


def open_home(home: Path) -> None:
    DagsterInstance.from_ref(InstanceRef.from_dir(str(home))).dispose()


def new_home(root: Path, n: int) -> Path:
    home = root / f"home-{n}"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def cpu(action: Callable[[], None]) -> float:
    started = time.process_time()
    action()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    rounds = parser.parse_args().rounds
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        existing = new_home(root, 0)
        open_home(existing)  # created, and a warm-up of both ways' imports
        made = 0
        for n in range(rounds + 1):
            for way in ("alembic", "once"):
                if way == "alembic":
                    ScriptDirectory.from_config = classmethod(migration_scripts.alembic_from_config)  # type: ignore[method-assign,assignment]
                else:
                    migration_scripts.parse_once()
                made += 1
                home = new_home(root, made)
                runs = {
                    "new home": cpu(lambda home=home: open_home(home)),
                    "existing home": cpu(lambda: open_home(existing)),
                    "ephemeral": cpu(lambda: DagsterInstance.ephemeral().dispose()),
                }
                if n:  # round 0 is a warm-up
                    for kind, seconds in runs.items():
                        times.setdefault((kind, way), []).append(seconds)
    migration_scripts.parse_once()
    print(f"CPU-ms per instance opened, median of {rounds} alternated rounds")
    print(f"{'open':14s} {'parsed each look':>17s} {'parsed once':>12s} {'ratio':>6s}")
    for kind in ("new home", "existing home", "ephemeral"):
        each = statistics.median(times[kind, "alembic"]) * 1000
        once = statistics.median(times[kind, "once"]) * 1000
        print(f"{kind:14s} {each:17.0f} {once:12.0f} {each / once:6.1f}")


if __name__ == "__main__":
    main()
