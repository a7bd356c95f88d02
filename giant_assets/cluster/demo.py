"""`make cluster-demo`: the scale-out topology on one machine, from pip packages only.

PostgreSQL and Redis under data/cluster/, two Celery workers and the Dagster daemon (each a process
group of its own), a scripted model on loopback. A backfill of 2 experiments x 5 benchmarks goes
through the run queue (at most 4 runs per provider at once) to the workers, every model request
passing one limit of 120 per minute shared through Redis. It prints which worker ran which partition,
the peak requests in any 60 s window as seen by the model server, and the leaderboard, then stops
everything it started, by process id. The last line is the summary.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from pathlib import Path

from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.cluster.definitions import PROVIDER_TAG
from giant_assets.cluster.instance import Cluster
from giant_assets.cluster.processes import Processes, backfill_command, daemon_command, worker_command
from giant_assets.cluster.report import peak_in_window, step_workers, wait_for_runs
from giant_assets.cluster.servers import start_postgres, start_redis
from giant_assets.core.settings import CLUSTER_DIR_ENV, EXPERIMENTS_ENV, PRICES_ENV
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import serve_demo_model
from giant_assets.eval.leaderboard import leaderboard_markdown
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

LIMIT_RPM = 120
MODEL = "scripted-demo"
KEY_ENV = "GIANT_DEMO_API_KEY"
WORKERS = ("worker-1", "worker-2")
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
RUN_TIMEOUT_S = 1200


def experiments_yaml(base_url: str) -> str:
    """The demo's two experiments: one provider/model/key, so one shared limit for both. Ten runs per
    item, eight in flight per partition, ask for well over 120 a minute, so the limit binds."""
    common = (f"provider: openai, model: {MODEL}, base_url: '{base_url}', api_key_env: {KEY_ENV}, "
              f"requests_per_minute: {LIMIT_RPM}, concurrency: 8, runs_per_item: 10")  # fmt: skip
    return (
        "experiments:\n"
        f"  cluster-giant: {{agent: giant, max_steps: 4, {common}}}\n"
        f"  cluster-thumbnail: {{agent: thumbnail, {common}}}\n"
    )


def main() -> None:
    repo = Path(__file__).resolve().parents[2]
    root = Path(os.environ.get(CLUSTER_DIR_ENV, repo / "data" / "cluster")).resolve()
    if root.exists():
        shutil.rmtree(root)  # a fresh cluster each time: new database, new data, new journals
    root.mkdir(parents=True)
    root.chmod(0o755)
    started = time.monotonic()
    print(f"cluster-demo: everything under {root}", flush=True)
    with start_postgres(root / "postgres") as pg, start_redis(root / "redis") as redis_server:
        print(f"  ok  PostgreSQL {pg.url} (pid {pg.pid}), Redis {redis_server.url} (pid {redis_server.pid})")
        model = serve_demo_model(port=47322)
        try:
            cluster = Cluster(root / "dagster_home", root / "data", pg.url, redis_server.url)
            summary, ok = _run(root, cluster, model)
        finally:
            model.stop()
    print(f"  ok  stopped PostgreSQL, Redis and the model server ({time.monotonic() - started:.0f}s in all)")
    print(summary, flush=True)
    if not ok:
        sys.exit(1)


def _run(root: Path, cluster: Cluster, model) -> tuple[str, bool]:
    """The demo proper; returns the summary line and whether it showed what it should."""
    cluster.prepare()
    experiments = root / "experiments.yaml"
    experiments.write_text(experiments_yaml(model.openai_base_url))
    prices = root / "prices.yaml"
    prices.write_text(f"{MODEL}: {{input_per_mtok: 0.0, output_per_mtok: 0.0}}\n")
    env = cluster.env() | {
        EXPERIMENTS_ENV: str(experiments),
        PRICES_ENV: str(prices),
        KEY_ENV: f"sk-demo-{secrets.token_hex(16)}",
    }
    os.environ.update(env)
    from giant_assets.platform.definitions import ALL_ASSETS, ALL_CHECKS, RESOURCES  # reads the env
    from giant_assets.platform.sensors import sync_experiments

    instance = DagsterInstance.get()
    names = sorted(sync_experiments(instance, RESOURCES["experiments"]))
    ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
    _materialize(
        "ingest the sample into the shared data folder", ingest, instance, ALL_ASSETS, ALL_CHECKS, RESOURCES
    )
    partitions = [f"{b}|{e}" for e in names for b in BENCHMARK_NAMES]
    with Processes(root / "logs", env) as procs:
        for name in WORKERS:
            procs.start(name, worker_command(name))
        procs.start("daemon", daemon_command())
        print(
            f"  ok  started {', '.join(WORKERS)} and the Dagster daemon (logs in {root / 'logs'})", flush=True
        )
        procs.run("backfill", backfill_command("evaluate", partitions, {PROVIDER_TAG: "openai"}))
        print(f"  ok  backfill queued: {len(partitions)} partitions ({' x '.join(names)} x 5 benchmarks)")
        runs = wait_for_runs(instance, "evaluate", len(partitions), RUN_TIMEOUT_S)
        print(f"  ok  {len(runs)} runs finished: "
              f"{sum(r.status.value == 'SUCCESS' for r in runs)} succeeded", flush=True)  # fmt: skip
    print("  ok  stopped the workers and the daemon")
    ran_by = {}
    print("\nWhich worker ran which partition (its predictions step; votes and metrics may go elsewhere):")
    for run in sorted(runs, key=lambda r: r.tags.get("dagster/partition", "")):
        workers = step_workers(instance, run.run_id)
        ran_by[run.tags["dagster/partition"]] = workers.get("predictions", "-")
        print(f"  {run.tags['dagster/partition']:32} {run.status.value:8} predictions on "
              f"{workers.get('predictions', '-')}, others on {sorted(set(workers.values()))}")  # fmt: skip
    arrivals = [r.received_at for r in model.requests]
    peak = peak_in_window(arrivals, 60.0)
    span = max(arrivals) - min(arrivals) if arrivals else 0.0
    print(f"\nModel server: {len(arrivals)} requests over {span:.0f}s, at most {peak} in any 60 s window "
          f"(shared limit {LIMIT_RPM}/min)")  # fmt: skip
    _materialize(
        "leaderboard",
        AssetSelection.assets("leaderboard", "leaderboard_long", "leaderboard_stale"),
        instance,
        ALL_ASSETS,
        ALL_CHECKS,
        RESOURCES,
    )
    print("\nLeaderboard:")
    print(leaderboard_markdown(ParquetStore(cluster.data_dir).read("leaderboard")))
    failed = [r for r in runs if r.status.value != "SUCCESS"]
    workers_used = {w for w in ran_by.values() if w != "-"}
    summary = (f"cluster-demo: workers={len(workers_used)} partitions={len(runs) - len(failed)} "
               f"peak_rpm={peak} limit={LIMIT_RPM}")  # fmt: skip
    if failed:
        print(f"{len(failed)} runs did not succeed; see {root / 'logs'}", file=sys.stderr)
    return summary, not failed and len(workers_used) == len(WORKERS) and peak <= LIMIT_RPM


def _materialize(title, selection, instance, assets, checks, resources) -> None:
    result = materialize([*assets, *checks], selection=selection, resources=resources, instance=instance,
                         run_config=QUIET)  # fmt: skip
    if not result.success:
        sys.exit(f"cluster-demo step failed: {title}")
    print(f"  ok  {title}", flush=True)


if __name__ == "__main__":
    main()
