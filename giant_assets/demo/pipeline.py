"""`make demo`: materialize the whole pipeline on the bundled sample, offline, and show where to look.

Runs real Dagster materializations against the instance in $DAGSTER_HOME (so they show in `make ui`),
writing Parquet + DuckDB under $GIANT_DATA_DIR (default ./data):

1. ingest the sample CSV and resolve its generated slides;
2. the `random` agent over all five benchmarks, then the metrics summary;
3. the GIANT agent navigating the slides against a scripted model on loopback (no network; a throwaway
   key in GIANT_DEMO_API_KEY takes the path a real key would and is stored nowhere): trajectories,
   crop pictures (files under trajectories/ and previews in the predictions' metadata) and ROI
   evaluation against the sample's reference regions;
4. one GIANT export graded as a submission, the same number as `benchmark_metrics`;
5. where to look: the DuckDB file with queries for `giant-sql`, results, pictures.

Each benchmark partition's tables hold its last materialization: GIANT's, since it runs after the
random agent (the random result set stays in its journals and results JSON).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import time
from pathlib import Path

from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.agents.registry import PRICES_ENV
from giant_assets.core.settings import data_dir
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted_model import serve_demo_model
from giant_assets.experiments.spec import Experiment
from giant_assets.grading.submissions import partition_key_for
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.platform.assets.grading import SUBMISSIONS_DIR, submission_partitions
from giant_assets.platform.definitions import ALL_ASSETS, ALL_CHECKS, RESOURCES

DEMO_MODEL = "scripted-demo"
# the loopback model needs no key; the demo still sends a throwaway one, through the same env-var path a
# real key takes, so the run shows that keys reach only the Authorization header (never logs or tables)
DEMO_KEY_ENV = "GIANT_DEMO_API_KEY"
# Dagster's per-event DEBUG lines would bury the demo's own output; they stay in the run logs (`make ui`)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
GRADED_BENCHMARK = "tcga"
# a stable port keeps the base URL, hence the config hash, the same across demo runs: a second
# `make demo` reuses the GIANT journals instead of asking the model again
DEMO_PORT = 47321
PER_BENCHMARK = AssetSelection.assets("predictions", "item_predictions", "benchmark_metrics")


def _run(
    title: str, selection: AssetSelection, instance: DagsterInstance, run_config: dict | None = None, **kwargs
) -> None:
    started = time.monotonic()
    result = materialize(
        [*ALL_ASSETS, *ALL_CHECKS],
        selection=selection,
        resources=RESOURCES,
        instance=instance,
        run_config=(run_config or {}) | QUIET,
        **kwargs,
    )
    if not result.success:
        sys.exit(f"demo step failed: {title}")
    print(f"  ok  {title} ({time.monotonic() - started:.1f}s)", flush=True)


def _random_agent(instance: DagsterInstance) -> None:
    for benchmark in BENCHMARK_NAMES:
        _run(f"random agent: predictions, votes, metrics for {benchmark}", PER_BENCHMARK, instance,
             partition_key=benchmark)  # fmt: skip
    _run("metrics summary of the random agent", AssetSelection.assets("metrics_summary"), instance)


def _giant_agent(instance: DagsterInstance) -> str:
    """GIANT against the loopback scripted model; returns the result set's config hash."""
    prices = data_dir() / "demo_prices.yaml"  # the scripted model is free; shows GIANT_PRICES at work
    prices.parent.mkdir(parents=True, exist_ok=True)
    prices.write_text(f"{DEMO_MODEL}: {{input_per_mtok: 0.0, output_per_mtok: 0.0}}\n")
    os.environ.setdefault(PRICES_ENV, str(prices))
    os.environ.setdefault(DEMO_KEY_ENV, f"sk-demo-{secrets.token_hex(16)}")
    server = serve_demo_model(port=DEMO_PORT)
    try:
        config = {
            "agent": "giant",
            "model": DEMO_MODEL,
            "provider": "openai",
            "base_url": server.openai_base_url,
            "api_key_env": DEMO_KEY_ENV,  # the variable's NAME; not part of the config hash
        }
        run_config = {"ops": {"predictions": {"config": config}}}
        for benchmark in BENCHMARK_NAMES:
            _run(f"GIANT (scripted loopback model): navigation, metrics, ROI for {benchmark}",
                 PER_BENCHMARK | AssetSelection.assets("roi_evaluation"), instance,
                 partition_key=benchmark, run_config=run_config)  # fmt: skip
    finally:
        server.stop()
    _run("metrics summary beside the paper's Table 1", AssetSelection.assets("metrics_summary"), instance)
    return Experiment(
        name="adhoc-giant", agent="giant", model=DEMO_MODEL, base_url=server.openai_base_url
    ).config_hash()


def _grade_export(instance: DagsterInstance, root: Path, config_hash: str) -> Path:
    """Drop the GIANT export of one benchmark into submissions/ and grade it as a partition."""
    export = root / "exports" / config_hash / f"{GRADED_BENCHMARK}.csv"
    submission = root / SUBMISSIONS_DIR / f"{GRADED_BENCHMARK}__giant-scripted-demo.csv"
    submission.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(export, submission)
    key = partition_key_for(submission.name)
    instance.add_dynamic_partitions(submission_partitions.name, [key])
    _run(f"grade {submission.name} (the GIANT export) as a submission",
         AssetSelection.assets("graded_submissions"), instance, partition_key=key)  # fmt: skip
    return submission


def main() -> None:
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path(__file__).resolve().parents[2] / "dagster_home")
        os.environ["DAGSTER_HOME"] = home
    instance = DagsterInstance.get()
    root = data_dir()
    print(f"giant-assets demo: data in {root}, Dagster home {home}", flush=True)
    ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items")
    _run("ingest the bundled sample CSV and resolve its slides", ingest | ingest.checks(), instance)
    _random_agent(instance)
    config_hash = _giant_agent(instance)
    submission = _grade_export(instance, root, config_hash)
    _report(root, config_hash, submission)


def _report(root: Path, config_hash: str, submission: Path) -> None:
    store = ParquetStore(root)
    table = store.query(
        "select benchmark_name, metric_type, n_scored, paper_format, paper_giant from metrics_summary"
    )
    print("\nGIANT with the scripted model (bootstrap mean ± std, 1000 replicates) beside the paper:")
    print(table.to_string(index=False))
    roi = store.query(
        "select benchmark_name, count(*) runs, count_if(hit)::int hits, "
        "round(avg(best_iou), 3) mean_best_iou from roi_evaluation group by 1 order by 1"
    )
    print("\nWhere GIANT looked vs the reference regions (roi_evaluation):")
    print(roi.to_string(index=False))
    graded = store.query(
        "select task_id, score, medal, rank, leaderboard_size from graded_submissions "
        "where submission_file = ?",
        [submission.name],
    ).iloc[0]
    every, scored = store.query(
        "select value_all_items_pct, value_pct from benchmark_metrics where benchmark_name = ?",
        [GRADED_BENCHMARK],
    ).iloc[0]
    print(
        f"\nGraded submission {submission.name}: score {100 * graded['score']:.1f} %, "
        f"medal {graded['medal']}, "
        f"rank {graded['rank']} of {graded['leaderboard_size'] + 1} on the paper's leaderboard.\n"
        f"benchmark_metrics: {every:.1f} % over all items (items without a slide count wrong, as the "
        f"export's empty predictions do), {scored:.1f} % over the items with a readable slide."
    )
    db = root / "giant.duckdb"
    print(
        f"\nDuckDB file: {db} (views over the Parquet files beside it). Each benchmark partition holds its "
        "LAST materialization, here GIANT's: the random agent's result set stays in its journals and "
        "results JSON (config hash in every row)."
    )
    queries = (
        "select benchmark_name, agent, metric_type, round(value_pct, 1) pct, paper_format "
        "from benchmark_metrics order by 1",
        "select benchmark_id, run_index, step, action, box_x, box_y, box_w, box_h, level "
        "from trajectory_steps where benchmark_name = 'gtex' order by 1, 2, 3",
        "select benchmark_name, benchmark_id, round(best_iou, 3) best_iou, hit, first_hit_step "
        "from roi_evaluation order by 1, 2",
    )
    print("Try the DuckDB CLI in the venv (read-only: fine while Dagster materializes):")
    for sql in queries:
        print(f'  .venv/bin/duckdb -readonly {shlex.quote(str(db))} "{sql}"')
    print("or the same queries without the CLI:")
    for sql in queries:
        print(f'  .venv/bin/giant-sql "{sql}"')
    print(f"Results JSON per result set and chart: {root / 'results'}")
    print(f"GIANT exports (benchmark_id,prediction): {root / 'exports' / config_hash}")
    pictures = root / "trajectories" / config_hash
    print(f"Trajectory pictures (overview.png + step<i>.png crops per run): {pictures}")
