"""Dagster's own SQLite storage against the platform's (platform/instance_storage.py: engines kept per
database file, schema answers remembered): the same runs on each, CPU of this process per run.

Each run materializes one partition of a chain of partitioned assets (the shape of a cell: every step
reads the previous one), on a fresh Dagster home: Dagster's defaults (no dagster.yaml) against the
shipped dagster_home/dagster.yaml (the platform's instance and storage). The runs alternate between the
two homes so load on the machine affects both alike; the first run of each is a warm-up.

    python -m perf.bench_instance_storage [--runs 8] [--steps 6]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from dagster import AssetIn, AssetsDefinition, DagsterInstance, StaticPartitionsDefinition, asset, materialize
from dagster._core.instance.ref import InstanceRef

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = StaticPartitionsDefinition([f"p{n}" for n in range(64)])


def chain(steps: int) -> list[AssetsDefinition]:
    """``steps`` partitioned assets, each reading the one before."""
    made: list[AssetsDefinition] = []
    for n in range(steps):
        if made:

            @asset(name=f"step_{n}", partitions_def=PARTITIONS, ins={"before": AssetIn(key=made[-1].key)})
            def step(before: int) -> int:
                return before + 1

        else:

            @asset(name="step_0", partitions_def=PARTITIONS)
            def step() -> int:
                return 0

        made.append(step)
    return made


def home(root: Path, name: str, shipped: bool) -> DagsterInstance:
    folder = root / name
    folder.mkdir()
    if shipped:
        shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", folder / "dagster.yaml")
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(folder)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args(argv)
    assets = chain(args.steps)
    cpu: dict[str, list[float]] = {"dagster": [], "platform": []}
    with tempfile.TemporaryDirectory() as tmp:
        instances = {
            "dagster": home(Path(tmp), "dagster", False),
            "platform": home(Path(tmp), "platform", True),
        }
        names = (f"{kind}: {type(i.event_log_storage).__name__}" for kind, i in instances.items())
        print(f"event log storages: {', '.join(names)}")
        for run in range(args.runs + 1):
            for kind, instance in instances.items():
                started = time.process_time()
                result = materialize(assets, instance=instance, partition_key=f"p{run}")
                spent = time.process_time() - started
                assert result.success
                if run:  # the first run of each warms caches and creates files
                    cpu[kind].append(spent)
        for instance in instances.values():
            instance.dispose()
    base, ours = statistics.median(cpu["dagster"]), statistics.median(cpu["platform"])
    print(f"{args.runs} runs of {args.steps} partitioned steps each, CPU of this process per run (median):")
    print(f"  Dagster's SQLite storage   {base:.3f} s")
    print(f"  the platform's storage     {ours:.3f} s   ratio {ours / base:.2f}")


if __name__ == "__main__":
    main()
