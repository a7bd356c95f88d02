"""`make demo`: materialize the whole pipeline on the bundled sample, offline, and show where to look.

Runs real Dagster materializations against the instance in $DAGSTER_HOME (so they show in `make ui`),
writing Parquet + DuckDB under $GIANT_DATA_DIR (default ./data):

1. write experiments.yaml's declarations and the demo's own (demo/overlay.yaml: the declared benchmark
   `demo-lesion`, the example plug-in `demo-two-model`, the sweep `demo-steps-*`) into
   <data>/demo-experiments.yaml and run on that file (experiments.yaml is not changed); sync them as
   partitions; ingest the sample CSV and the lesion items, resolve their generated slides and list them
   (`slide_inventory`);
2. four experiments over the five MultiPathQA benchmarks: `random`, and against a scripted model on
   loopback (no network; a throwaway key in GIANT_DEMO_API_KEY takes the path a real key would and is
   stored nowhere) GIANT (`demo-giant`, tool protocol, 2 runs per item) and the thumbnail and patch
   baselines: runs, trajectory steps, votes, metrics, ROI evaluation against the sample's reference
   regions, trajectory pictures and the static trajectory viewer; the example two-model plug-in
   (examples/two_model_agent) on `demo-lesion`; GIANT with 1, 2 and 5 steps on tcga_slidebench (the
   iteration figure's points);
3. the path review (`demo-path-review`) on gtex and tcga: reported regions set against the crops viewed;
   the leaderboard beside the paper's rows and paired comparisons between experiments;
4. a bundled review: two scripted reviewers rate the demo-giant runs through the review's real files
   (demo/reviewers.py), so `pathologist_reviews` and `review_metrics` show shares, kappa and alpha;
5. one GIANT export graded as a submission, the same number as `benchmark_metrics`;
6. where to look: the DuckDB file with queries for the DuckDB CLI and `giant-sql`, results JSON, chart.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.core.settings import (
    DAGSTER_HOME_ENV,
    DEMO_KEY_ENV,
    EXPERIMENTS_ENV,
    PRICES_ENV,
    data_dir,
    env,
)
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.overlay import COMPOSED_NAME, compose, overlay_path
from giant_assets.demo.reviewers import REVIEWERS, bundle_review
from giant_assets.demo.scripted import DEMO_MODEL, ScriptedModelServer, demo_policy, scripted_model_at
from giant_assets.demo.scripted.policy import READABLE_DARK
from giant_assets.demo.serve_cli import DEMO_PORT
from giant_assets.eval.export import submission_path
from giant_assets.eval.leaderboard import leaderboard_markdown
from giant_assets.eval.reviews import DEMO_REVIEW_FOLDER
from giant_assets.grading.submissions import partition_key_for
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.multipathqa.inventory import ALL_BENCHMARKS
from giant_assets.platform.assets.grading import SUBMISSIONS_DIR, submission_partitions
from giant_assets.platform.definitions import ALL_ASSETS, ALL_CHECKS, CELL_ASSETS, RESOURCES
from giant_assets.platform.partitions import result_key
from giant_assets.platform.sensors import sync_experiments

# the loopback model needs no key; the demo still sends a throwaway one, through the same env-var path a
# real key takes, so the run shows that keys reach only the Authorization header (never logs or tables)
# Dagster's per-event DEBUG lines would bury the demo's own output; they stay in the run logs (`make ui`)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
# the demo is small: every run's pictures drawn up front, so its viewers open complete from file://
# (measured: 17 s of a 446 s demo on a loaded machine, 11 s of it demo-giant's, whose viewer it names)
DRAW_ALL = {"ops": {"trajectory_pictures": {"config": {"render": "all"}}}}
GRADED = ("demo-giant", "tcga")
REVIEWED_RUNS = "demo-giant"  # the bundled review's experiment
# the demo's experiments (declared in experiments.yaml); the model ones talk to the scripted model on a
# stable port, so their base URL, hence config hash, is the same across demo runs: a second `make demo`
# reuses their journals instead of asking the model again
EXPERIMENTS = ("random", "demo-giant", "demo-thumbnail", "demo-patch")
# the demo's own declarations (demo/overlay.yaml, beside the given experiments file: demo/overlay.py):
# the example plug-in on the declared lesion benchmark, and a GIANT iteration sweep on one benchmark for
# the paper's accuracy-vs-iterations figure
PLUGIN, LESION = "demo-two-model", "demo-lesion"
SWEEP, SWEPT = ("demo-steps-1", "demo-steps-2", "demo-steps-5"), "tcga_slidebench"
OVERLAID = (PLUGIN, *SWEEP)
PLUGIN_PATH = Path(__file__).resolve().parents[2] / "examples"  # examples/two_model_agent of the clone
PER_CELL = AssetSelection.assets(*CELL_ASSETS)
# the path review, on gtex and tcga as the released run: its runs and review tables only (it answers no
# benchmark question, so it has no metrics and no leaderboard row)
REVIEW, REVIEWED = "demo-path-review", ("gtex", "tcga")
REVIEW_CELL = AssetSelection.assets(
    "predictions", "trajectory_steps", "path_review_regions", "path_review_answers"
)
REVIEW_ASSETS = AssetSelection.assets("pathologist_reviews", "review_metrics")
ACROSS = AssetSelection.assets(
    "leaderboard", "leaderboard_long", "leaderboard_stale", "experiment_comparisons", "paper_figures"
)


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


def _demo_port(experiments) -> int:
    """The port the demo's model experiments name in their base_url (DEMO_PORT in experiments.yaml; a
    copy of the file naming another port, e.g. a test's free one, moves the demo's model there)."""
    declared = experiments.all()
    urls = [declared[name].base_url for name in (*EXPERIMENTS, REVIEW, *OVERLAID) if declared[name].base_url]
    ports = {urlsplit(url).port or DEMO_PORT for url in urls}
    if len(ports) != 1:
        sys.exit(
            f"demo: the demo-* experiments of {experiments.file} name different scripted-model ports "
            f"{sorted(ports)} in their base_url; give them one"
        )
    return ports.pop()


def _demo_model(port: int) -> ScriptedModelServer | None:
    """The scripted model on the port the demo experiments name: ours, or one already serving there
    (``make ui``, ``giant-scripted-model``); another program on that port is an error, never silently
    talked to."""
    try:
        return ScriptedModelServer(rule=demo_policy, port=port).start()
    except OSError:
        identity = scripted_model_at(port)
        if identity is not None and identity.get("demo_model") == DEMO_MODEL:
            print(f"  ok  using the scripted model already serving on 127.0.0.1:{port}", flush=True)
            return None
        if identity is not None:  # e.g. make ui of an older checkout: its answers would be stored as ours
            sys.exit(
                f"demo: the scripted model serving on 127.0.0.1:{port} answers as "
                f"{identity.get('demo_model') or 'a test script'}, not as this version's {DEMO_MODEL}; "
                "stop it (a make ui or giant-scripted-model started from another checkout?) and run make "
                "demo again"
            )
        sys.exit(
            f"demo: port {port} on 127.0.0.1 (the demo-* experiments' base_url) is taken by another "
            "program that is not the scripted model; stop it and run make demo again"
        )


def _rebind_after_upgrade(root: Path, experiments) -> None:
    """The demo's own experiments follow the platform and the scripted model: a binding left by an older
    giant-assets (another protocol version, or an older scripted policy, named by its model
    ``scripted-demo*``) is replaced, and the demo re-runs every cell of those names (free: a scripted
    model; the new settings hash to new journals, so no older answer is reused). Any other change, and a
    user's experiments, are never rebound silently (see experiments/binding.py)."""
    from giant_assets.experiments.binding import (
        ExperimentConflict,
        bind,
        binding_path,
        differing_fields,
        read_binding,
    )

    for name in (*EXPERIMENTS, REVIEW, *OVERLAID):
        experiment = experiments.get(name)
        try:
            bind(experiment, root)
        except ExperimentConflict:
            bound = read_binding(binding_path(root, name))["answer_settings"]
            current = json.loads(json.dumps(experiment.answer_settings(), default=str))
            changed = set(differing_fields(bound, current))
            older_model = str(bound.get("model", "")).startswith("scripted-demo")
            if not changed <= {"protocol_version", "model"} or ("model" in changed and not older_model):
                raise
            binding_path(root, name).unlink()
            bind(experiment, root)
            what = " and ".join(
                text
                for field, text in (
                    ("protocol_version", "protocol"),
                    ("model", f"scripted model {DEMO_MODEL}"),
                )
                if field in changed
            )
            print(
                f"  ok  {name}: bound to this version's {what} (its earlier results are replaced)", flush=True
            )


def _experiment(instance: DagsterInstance, name: str, benchmarks: tuple[str, ...] = BENCHMARK_NAMES) -> None:
    for benchmark in benchmarks:
        title = f"{name}: runs, steps, votes, metrics, ROI, pictures, viewer for {benchmark}"
        _run(title, PER_CELL, instance, DRAW_ALL, partition_key=result_key(name, benchmark))


def _grade_export(instance: DagsterInstance, root: Path) -> Path:
    """Drop one experiment's export of one benchmark into submissions/ and grade it as a partition."""
    experiment, benchmark = GRADED
    export = submission_path(root, experiment, benchmark)
    submission = root / SUBMISSIONS_DIR / f"{benchmark}__{experiment}.csv"
    submission.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(export, submission)
    key = partition_key_for(submission.name)
    instance.add_dynamic_partitions(submission_partitions.name, [key])
    _run(f"grade {submission.name} (the {experiment} export) as a submission",
         AssetSelection.assets("graded_submissions"), instance, partition_key=key)  # fmt: skip
    return submission


def main() -> None:
    home = env(DAGSTER_HOME_ENV)
    if not home:
        home = str(Path(__file__).resolve().parents[2] / "dagster_home")
        os.environ[DAGSTER_HOME_ENV] = home
    instance = DagsterInstance.get()
    root = data_dir()
    experiments = RESOURCES["experiments"]
    given = experiments.file
    os.environ[EXPERIMENTS_ENV] = str(compose(given, root / COMPOSED_NAME))  # read by every step below
    print(
        f"giant-assets demo: data in {root}, Dagster home {home}, experiments {given} and the demo's "
        f"own ({overlay_path().name}) in {experiments.file}",
        flush=True,
    )
    sys.path.insert(0, str(PLUGIN_PATH))  # the example plug-in, as docs/plugins.md has it on PYTHONPATH
    added = sync_experiments(instance, experiments)
    print(f"  ok  experiments synced as partitions ({len(added)} new)", flush=True)
    ingest = AssetSelection.assets("multipathqa_csv", "benchmark_items", "slide_inventory")
    _run(
        f"ingest the bundled sample CSV and the {LESION} items, resolve and list their slides",
        ingest | ingest.checks(),
        instance,
    )
    _report_inventory(ParquetStore(root))
    prices = root / "demo_prices.yaml"  # the scripted model is free; shows GIANT_PRICES at work
    prices.write_text(f"{DEMO_MODEL}: {{input_per_mtok: 0.0, output_per_mtok: 0.0}}\n")
    os.environ.setdefault(PRICES_ENV, str(prices))
    os.environ.setdefault(DEMO_KEY_ENV, f"sk-demo-{secrets.token_hex(16)}")
    _rebind_after_upgrade(root, experiments)
    server = _demo_model(_demo_port(experiments))
    try:
        for name in EXPERIMENTS:
            _experiment(instance, name)
        _experiment(instance, PLUGIN, (LESION,))
        for name in SWEEP:
            _experiment(instance, name, (SWEPT,))
        for benchmark in REVIEWED:
            title = f"{REVIEW}: runs, steps, reported regions vs crops viewed for {benchmark}"
            _run(title, REVIEW_CELL, instance, partition_key=result_key(REVIEW, benchmark))
    finally:
        if server is not None:
            server.stop()
    _run("leaderboard beside the paper's Table 1, paired comparisons, the paper's figures", ACROSS, instance)
    _bundled_review(instance, root)
    submission = _grade_export(instance, root)
    _report(root, submission)


def _bundled_review(instance: DagsterInstance, root: Path) -> None:
    """Two scripted reviewers' ratings of the demo-giant runs, then the review's assets."""
    _, references = RESOURCES["dataset"].reference_regions()
    if references is None:
        return
    done = bundle_review(root, REVIEWED_RUNS, references)
    print(
        f"  ok  {' and '.join(REVIEWERS)} reviewed {done['units']} {REVIEWED_RUNS} runs "
        f"({done['appended']} new reviews stored under {root / DEMO_REVIEW_FOLDER})",
        flush=True,
    )
    demo = {"ops": {"pathologist_reviews": {"config": {"demo": True}}}}  # the scripted reviews counted
    _run("pathologist_reviews and review_metrics of the bundled review", REVIEW_ASSETS, instance, demo)


def _report(root: Path, submission: Path) -> None:
    store = ParquetStore(root)
    board = store.read("leaderboard")
    print(
        "\nLeaderboard (bootstrap mean ± std over all items, 1000 replicates; the paper's rows below ours):"
    )
    print(leaderboard_markdown(board))
    print(
        "(the scripted model knows the sample's answers but gives one only when the lesion fills at least "
        f"{READABLE_DARK:.0%} of its last view, else it guesses from a hash of the prompt: GIANT zooms onto "
        "the lesion, the 1024 px thumbnail shows it too small, a 224 px patch lands on it only by chance; "
        "items whose slide is missing or corrupt count as wrong for all)"
    )
    pair = store.query(
        "select benchmark_name, experiment_a, experiment_b, n_shared, round(diff_pct, 1) diff_pct, "
        "round(ci_low_pct, 1) ci_low_pct, round(ci_high_pct, 1) ci_high_pct, round(p_le_0, 3) p_le_0 "
        "from experiment_comparisons where experiment_a = 'demo-giant' and experiment_b = 'random' "
        "order by benchmark_name"
    )
    print("\nPaired comparison demo-giant - random (same resampled items for both):")
    print(pair.to_string(index=False))
    graded = store.query(
        "select task_id, score, medal, rank, leaderboard_size from graded_submissions "
        "where submission_file = ?",
        [submission.name],
    ).iloc[0]
    experiment, benchmark = GRADED
    value = store.query(
        "select value_pct from benchmark_metrics where experiment = ? and benchmark_name = ?",
        [experiment, benchmark],
    ).iloc[0, 0]
    print(
        f"\nGraded submission {submission.name}: score {100 * graded['score']:.1f} %, "
        f"medal {graded['medal']}, rank {graded['rank']} of {graded['leaderboard_size'] + 1} on the "
        f"paper's leaderboard; benchmark_metrics says {value:.1f} % (all items, as the export)."
    )
    review = store.query(
        "select count(*) runs, count(*) filter (where parsed) answered, "
        "coalesce(sum(n_valid_regions), 0)::int regions, coalesce(sum(n_regions_viewed), 0)::int viewed, "
        "coalesce(sum(n_problems) filter (where parsed), 0)::int problems "
        "from path_review_answers where experiment = ?",
        [REVIEW],
    ).iloc[0]
    print(
        f"\nPath review ({REVIEW}, {' and '.join(REVIEWED)}): {review['answered']} of {review['runs']} runs "
        f"answered (the others: no readable slide) with {review['regions']} regions, {review['viewed']} of "
        f"them where a crop was viewed (IoU >= 0.5); {review['problems']} problems in the replies "
        "(path_review_regions, path_review_answers)."
    )
    _report_review(store)
    db = root / "giant.duckdb"
    print(f"\nDuckDB file: {db} (views over the Parquet files beside it; every experiment side by side).")
    queries = (
        "select experiment, benchmark_name, round(value_pct, 1) pct, paper_format, n_answered, n_items "
        "from benchmark_metrics order by 2, 1",
        "select experiment, benchmark_id, run_index, step, action, box_x, box_y, box_w, box_h, level "
        "from trajectory_steps where benchmark_name = 'gtex' order by 1, 2, 3, 4",
        "select experiment, benchmark_name, benchmark_id, round(best_iou, 3) best_iou, hit, first_hit_step "
        "from roi_evaluation order by 1, 2, 3",
    )
    print("Try the DuckDB CLI in the venv (read-only: fine while Dagster materializes):")
    for sql in queries:
        print(f'  .venv/bin/duckdb -readonly {shlex.quote(str(db))} "{sql}"')
    print("or the same queries without the CLI:")
    for sql in queries:
        print(f'  .venv/bin/giant-sql "{sql}"')
    print(f"Results JSON per experiment and the leaderboard chart: {root / 'results'}")
    print(f"The paper's figures (PNGs and their numbers): {root / 'results' / 'figures'}")
    print(f"Exports per experiment (benchmark_id,prediction): {root / 'exports'}")
    viewer = root / "viewer" / GRADED[0] / "index.html"
    print(f"Trajectory viewer (open in a browser, or `make view` on a remote machine): {viewer.as_uri()}")


def _report_inventory(store: ParquetStore) -> None:
    """One line of slide_inventory: the slides the items name, found, missing or unreadable."""
    every = store.read("slide_inventory").set_index("benchmark_name").loc[ALL_BENCHMARKS]
    print(
        f"  ok  slide_inventory: {every['slides']} slides named by {every['questions']} questions, "
        f"{every['found']} found, {every['missing']} missing, {every['unreadable']} unreadable "
        "(the sample's on purpose; per benchmark in the table)",
        flush=True,
    )


def _report_review(store: ParquetStore) -> None:
    if "review_metrics" not in store.tables():
        return
    metrics = store.query(
        "select benchmark_name, runs_reviewed runs, round(share_regions_relevant, 2) regions_relevant, "
        "round(share_answers_correct, 2) answers_correct, round(cohen_kappa_answer, 2) kappa_answer, "
        "round(alpha_answer, 2) alpha_answer, round(alpha_regions, 2) alpha_regions, "
        "round(mean_best_iou_drawn, 2) iou_drawn from review_metrics where experiment = ? order by 1",
        [REVIEWED_RUNS],
    )
    if metrics.empty:
        return
    print(
        f"\nBundled review of {REVIEWED_RUNS} by two scripted reviewers ({' and '.join(REVIEWERS)}: rules "
        "on each viewed region's overlap with the sample's reference regions, demo-b with seeded noise; "
        "shares, Cohen's kappa and Krippendorff's alpha from review_metrics, NaN where undefined):"
    )
    print(metrics.to_string(index=False))
    print("A real review: giant-review add-reviewer / prepare / serve (docs/pathologists.md).")
