"""The topology for real: runs in PostgreSQL, steps on two Celery workers through the daemon's run queue,
a worker killed mid-backfill, the lost run cancelled and its partition re-run without asking the model
again for anything that had finished."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import psycopg2
import pytest
from dagster import DagsterInstance

from giant_assets.cluster.definitions import PROVIDER_TAG
from giant_assets.cluster.instance import INSTANCE_YAML, Cluster
from giant_assets.cluster.processes import CODE_LOCATION, Processes, backfill_command, worker_command
from giant_assets.cluster.report import FINISHED, job_runs, max_overlap, step_workers, wait_for_runs
from giant_assets.cluster.servers import LocalServer
from giant_assets.core.settings import EXPERIMENTS_ENV, PRICES_ENV
from giant_assets.demo.scripted import serve_demo_model
from giant_assets.experiments.declared import load_experiments
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from tests.support.dagster_env import daemon_command, daemon_home

EXPERIMENT = "cluster-kill"
KEY_ENV = "GIANT_CLUSTER_TEST_KEY"
WORKERS = ("worker-1", "worker-2")
PER_PROVIDER = 4  # dagster_home/postgres/dagster.yaml


def journal_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(600)
def test_backfill_on_two_workers_survives_a_killed_worker(
    cluster_root: Path, postgres_server: LocalServer, redis_server: LocalServer, sample_wsi_root: Path
) -> None:
    cluster = Cluster(cluster_root / "home", cluster_root / "data", postgres_server.url, redis_server.url)
    daemon_home(cluster.prepare().dagster_home, base=INSTANCE_YAML)  # its queue launches runs sooner
    model = serve_demo_model(latency_s=0.4)
    experiments = cluster_root / "experiments.yaml"
    experiments.write_text(
        f"experiments:\n  {EXPERIMENT}: {{agent: giant, provider: openai, model: scripted-demo, "
        f"base_url: '{model.openai_base_url}', api_key_env: {KEY_ENV}, concurrency: 1, max_steps: 3, "
        f"runs_per_item: 2, requests_per_minute: 6000}}\n"
    )
    prices = cluster_root / "prices.yaml"
    prices.write_text("scripted-demo: {input_per_mtok: 0.0, output_per_mtok: 0.0}\n")
    env = cluster.env() | {
        EXPERIMENTS_ENV: str(experiments),
        PRICES_ENV: str(prices),
        KEY_ENV: "sk-cluster-test",
        "GIANT_WSI_ROOT": str(sample_wsi_root),
    }
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        _scenario(cluster, model, env, experiments)
    finally:
        model.stop()
        os.environ.clear()
        os.environ.update(saved)


def _scenario(cluster: Cluster, model, env: dict[str, str], experiments: Path) -> None:
    from dagster import AssetSelection, materialize

    from giant_assets.platform.definitions import ALL_ASSETS, RESOURCES
    from giant_assets.platform.sensors import sync_experiments

    instance = DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert sync_experiments(instance, RESOURCES["experiments"]) == [EXPERIMENT]
    ingest = materialize(ALL_ASSETS, selection=AssetSelection.assets("multipathqa_csv", "benchmark_items"),
                         resources=RESOURCES, instance=instance)  # fmt: skip
    assert ingest.success
    items = RESOURCES["storage"].store().read("benchmark_items")
    config_hash = load_experiments(experiments)[EXPERIMENT].config_hash()
    journals = cluster.data_dir / "journals" / config_hash
    partitions = [f"{b}|{EXPERIMENT}" for b in BENCHMARK_NAMES]
    tags = {PROVIDER_TAG: "openai"}

    with Processes(cluster.data_dir.parent / "logs", env) as procs:
        for name in WORKERS:
            procs.start(name, worker_command(name))
        procs.start("daemon", daemon_command(CODE_LOCATION))
        procs.run("backfill", backfill_command("evaluate", partitions, tags))

        # kill the worker running a partition's predictions mid-way (whichever worker the queue gave it):
        # concurrency 1 runs items in order, so its first item is done and a later one is in flight
        victim, victim_worker = None, None
        deadline = time.monotonic() + 240
        while victim is None:
            assert time.monotonic() < deadline, "no worker caught mid-partition"
            for run in job_runs(instance, "evaluate"):
                if run.status.value in FINISHED:
                    continue
                worker = step_workers(instance, run.run_id).get("predictions", "").split("@")[0]
                if worker in WORKERS:
                    benchmark = run.tags["dagster/partition"].split("|")[0]
                    done = len(journal_rows(journals / f"{benchmark}.jsonl"))
                    prompts = prompts_of(items, benchmark)
                    distinct = len(set(prompts.values())) == len(prompts)  # requests attributable to items
                    if distinct and 2 <= done < 2 * len(prompts):  # the first item's 2 runs, not all
                        victim, victim_worker = run, worker
                        break
            time.sleep(0.2)
        procs.kill(victim_worker)
        killed_at = time.monotonic()
        finished = {b: {(r["benchmark_id"], r["run_index"]) for r in journal_rows(journals / f"{b}.jsonl")}
                    for b in BENCHMARK_NAMES}  # fmt: skip
        victim_benchmark = victim.tags["dagster/partition"].split("|")[0]
        expected_runs = 2 * len(prompts_of(items, victim_benchmark))
        assert 0 < len(finished[victim_benchmark]) < expected_runs

        # the others finish on the other worker; the victim waits for a worker that is gone: cancel it
        deadline = time.monotonic() + 300
        while True:
            runs = job_runs(instance, "evaluate")
            waiting = [r for r in runs if r.status.value not in FINISHED]
            if [r.run_id for r in waiting] == [victim.run_id] and len(runs) == len(partitions):
                break
            assert time.monotonic() < deadline, [(r.tags["dagster/partition"], r.status.value) for r in runs]
            time.sleep(1)
        assert instance.run_launcher.terminate(victim.run_id)
        wait_for_runs(instance, "evaluate", len(partitions), 120)
        assert instance.get_run_by_id(victim.run_id).status.value == "CANCELED"

        # re-run the partition on the restarted worker (and the other one)
        procs.start(f"{victim_worker}-restarted", worker_command(victim_worker))
        procs.run("rerun", backfill_command("evaluate", [victim.tags["dagster/partition"]], tags))
        runs = wait_for_runs(instance, "evaluate", len(partitions) + 1, 300)

    by_partition = Counter(r.tags["dagster/partition"] for r in runs if r.status.value == "SUCCESS")
    assert by_partition == Counter(partitions)  # every partition succeeded once: the victim on its re-run
    workers = {step_workers(instance, r.run_id).get("predictions", "").split("@")[0] for r in runs}
    assert set(WORKERS) <= workers, workers  # partitions executed on both workers

    # runs live in PostgreSQL (read with psycopg2, not through Dagster)
    with psycopg2.connect(cluster.env()["GIANT_DAGSTER_POSTGRES_URL"].replace("+psycopg2", "")) as conn:
        cur = conn.cursor()
        cur.execute("select status, count(*) from runs where pipeline_name = 'evaluate' group by 1")
        assert dict(cur.fetchall()) == {"SUCCESS": len(partitions), "CANCELED": 1}
        cur.execute("select start_time, end_time from runs where pipeline_name = 'evaluate'")
        spans = [(s, e) for s, e in cur.fetchall() if s is not None]
    assert max_overlap(spans) <= PER_PROVIDER  # the run queue's per-provider limit held

    # nothing finished was lost or asked again: each journalled (item, run) of the victim was asked once
    rows = journal_rows(journals / f"{victim_benchmark}.jsonl")
    keys = [(r["benchmark_id"], r["run_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == expected_runs and finished[victim_benchmark] <= set(keys)
    victim_prompts = prompts_of(items, victim_benchmark)
    asked: Counter[str] = Counter()  # model requests per item of the victim, as the server saw them
    for request in model.requests:
        text = request.question
        asked.update(
            bid for bid, prompt in victim_prompts.items() if text == prompt or text.startswith(prompt + "\n")
        )
    calls: Counter[str] = Counter()  # model requests per item behind the final journal's runs
    for row in rows:
        calls[row["benchmark_id"]] += model_calls(row)
    done_at_kill = Counter(bid for bid, _ in finished[victim_benchmark])
    fully_done = [bid for bid, n in done_at_kill.items() if n == 2]
    assert fully_done, "no item had both runs journalled at the kill"
    for bid in fully_done:  # journalled before the kill: never asked again
        assert asked[bid] == calls[bid], (bid, asked[bid], calls[bid])
    # the run in flight when the worker died (concurrency 1) was asked again: at most one item differs
    extra = {bid: asked[bid] - calls[bid] for bid in victim_prompts if asked[bid] != calls[bid]}
    assert len(extra) <= 1 and all(0 < n <= 3 for n in extra.values()), extra  # max_steps 3
    assert time.monotonic() - killed_at < 600


def model_calls(row: dict) -> int:
    """Model requests behind a journal row: its trajectory steps minus the thumbnail step."""
    steps = json.loads(row["trajectory_json"])
    assert steps[0]["action"] == "thumbnail"
    return len(steps) - 1


def prompts_of(items, benchmark: str) -> dict[str, str]:
    part = items[(items["benchmark_name"] == benchmark) & (items["wsi_status"] == "ok")]
    return dict(zip(part["benchmark_id"].astype(str), part["prompt"], strict=True))
