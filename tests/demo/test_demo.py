"""`make demo` end to end in a temp data dir: four experiments over the five benchmarks side by side,
GIANT trajectories with pictures and a viewer, ROI evaluation checked against shapely, the leaderboard
and comparisons, and the graded export equal to benchmark_metrics; the demo's own declarations
(demo/overlay.yaml): slide_inventory, the example plug-in on the declared demo-lesion benchmark (the
sixth column) and the GIANT steps sweep in the iteration figure."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import krippendorff
import numpy as np
import pandas as pd
import pytest
import shapely
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from giant_assets.multipathqa.sample import sample_regions_path
from giant_assets.platform.definitions import defs
from tests.report.browser import Browser, chromium_path, file_url

# one worker runs the whole module (xdist group), so the session-scoped demo runs once per suite; its
# first test's time includes the demo's (~2 min on two idle cores, up to 10 min on a loaded machine)
pytestmark = [pytest.mark.xdist_group("demo"), pytest.mark.timeout(1000)]

REPO = Path(__file__).resolve().parents[2]
DEMO_KEY = "sk-demo-test-4a7e19c2SECRET0000000000"  # what the demo sends the loopback model
EXPERIMENTS = ["random", "demo-giant", "demo-thumbnail", "demo-patch"]
PLUGIN, SWEEP = "demo-two-model", ["demo-steps-1", "demo-steps-2", "demo-steps-5"]  # demo/overlay.yaml


@pytest.fixture(scope="session")  # session: xdist may interleave other modules between its tests
def demo(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("demo")
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIANT_")}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(tmp / "data"), "GIANT_DEMO_API_KEY": DEMO_KEY}
    # experiments.yaml with the demo-* experiments' port (47321, what `make demo` and `make ui` use) moved
    # to a free one, so a `make ui` or another checkout's tests on this machine never answer this demo
    declared = (REPO / "experiments.yaml").read_text()
    assert declared.count(":47321/v1") == 4
    env["GIANT_EXPERIMENTS"] = str(tmp / "experiments.yaml")
    (tmp / "experiments.yaml").write_text(declared.replace(":47321/v1", f":{free_port()}/v1"))
    # the worker's generated sample slides (the same files the demo would generate): saves ~8 s
    env["GIANT_WSI_ROOT"] = str(sample_wsi_root)
    out = subprocess.run(
        [sys.executable, "-m", "giant_assets.demo"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,  # ~2 min on two idle cores; 9-10 min measured with the machine's load at 10
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert DEMO_KEY not in out.stdout + out.stderr
    return tmp / "data", out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sql(data: Path, query: str) -> pd.DataFrame:
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        return con.sql(query).df()


def test_demo_materializes_everything_and_says_where_to_look(demo: tuple[Path, str]) -> None:
    data, stdout = demo
    counts = sql(data, "select benchmark_name, count(*) n from benchmark_items group by 1 order by 1")
    assert dict(zip(counts["benchmark_name"], counts["n"], strict=True)) == {
        "demo-lesion": 5, "gtex": 3, "panda": 3, "tcga": 3, "tcga_expert_vqa": 2, "tcga_slidebench": 3,
    }  # fmt: skip
    metrics = sql(
        data, "select experiment, benchmark_name, agent, n_items, paper_format from benchmark_metrics"
    )
    ran = metrics[metrics["experiment"].isin(EXPERIMENTS)]
    assert sorted(set(ran["experiment"])) == sorted(EXPERIMENTS) and len(ran) == 5 * len(EXPERIMENTS)
    assert set(metrics["experiment"]) == {*EXPERIMENTS, PLUGIN, *SWEEP}
    assert len(metrics) == 5 * len(EXPERIMENTS) + 1 + len(SWEEP)  # the plug-in on one, the sweep on one
    assert dict(zip(metrics["experiment"], metrics["agent"], strict=False)) == {
        "random": "random", "demo-giant": "giant", "demo-thumbnail": "thumbnail", "demo-patch": "patch",
        PLUGIN: "two_model_agent:make_agent", **dict.fromkeys(SWEEP, "giant"),
    }  # fmt: skip
    assert metrics["paper_format"].str.fullmatch(r"\d+\.\d ± \d+\.\d").all()
    board = sql(data, "select * from leaderboard")
    assert sorted(board.loc[board.source == "ours", "experiment"]) == sorted([*EXPERIMENTS, PLUGIN, *SWEEP])
    assert "GPT-5 + GIANT x5" in set(board.loc[board.source == "paper", "experiment"])
    pairs = sql(data, "select experiment_a, experiment_b from experiment_comparisons")
    # five benchmarks x the six pairs of four experiments; on tcga_slidebench the sweep's three as well:
    # 7 experiments, 21 pairs; the plug-in alone on demo-lesion: no pair
    assert len(pairs) == 4 * 6 + 21
    assert "DuckDB file:" in stdout and ".venv/bin/giant-sql" in stdout
    assert "Leaderboard" in stdout and "| demo-giant | ours |" in stdout and "Paired comparison" in stdout
    results = {p.parent.name: json.loads(p.read_text()) for p in (data / "results").glob("*/results.json")}
    assert sorted(results) == sorted([*EXPERIMENTS, PLUGIN, *SWEEP])
    assert results["demo-giant"]["binding"]["answer_settings"]["runs_per_item"] == 2
    assert len(results["demo-giant"]["metrics"]) == 5 and results["random"]["provenance"]["csv_sha256"]
    # the paper's figures: the thumbnail baseline at its 1024 px on every benchmark, beside the paper's
    figures = sql(data, "select figure, experiment, x, benchmark_name, mean, source from paper_figures")
    thumb = figures[(figures["figure"] == "thumbnail_resolution") & (figures["source"] == "ours")]
    assert set(thumb["experiment"]) == {"demo-thumbnail"} and set(thumb["x"]) == {1024.0} and len(thumb) == 5
    boot = sql(data, "select benchmark_name, boot_mean_pct from benchmark_metrics where agent = 'thumbnail'")
    assert dict(zip(thumb["benchmark_name"], thumb["mean"], strict=True)) == pytest.approx(
        dict(zip(boot["benchmark_name"], boot["boot_mean_pct"], strict=True))
    )
    assert (data / "results" / "figures" / "iterations.png").stat().st_size > 0


def test_every_table_in_the_duckdb_file_is_an_asset(demo: tuple[Path, str]) -> None:
    data, _ = demo
    with duckdb.connect(str(data / "giant.duckdb"), read_only=True) as con:
        views = {
            row[0] for row in con.sql("select view_name from duckdb_views() where not internal").fetchall()
        }
    assets = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "leaderboard_long" in views and "trajectory_steps" in views
    assert views <= assets, views - assets


def test_giant_trajectories_have_crops_read_pictures_and_a_viewer(demo: tuple[Path, str]) -> None:
    data, stdout = demo
    steps = sql(data, "select * from trajectory_steps where experiment = 'demo-giant' and action = 'crop'")
    assert len(steps) >= 10 and steps["level"].notna().all()
    runs = sql(data, "select * from predictions where experiment = 'demo-giant' and error_kind is null")
    bad = sql(data, "select benchmark_id, error_kind, error from predictions where experiment = 'demo-giant'")
    assert len(runs) == 2 * 11, bad.to_string()  # two runs of every item with a readable slide, all answered
    overviews = list((data / "trajectories" / "demo-giant").glob("*/*/run*/overview.png"))
    sent = list((data / "trajectories" / "demo-giant").glob("*/*/run*/step*.jpg"))  # the images as sent
    shown = sql(
        data,
        "select image_sha256 from trajectory_steps where experiment = 'demo-giant' "
        "and action in ('thumbnail', 'crop') and image_sha256 is not null",
    )
    assert len(overviews) == len(runs) and len(sent) == len(shown) >= len(steps) + len(runs)
    pictures = sql(
        data, "select * from trajectory_pictures where experiment = 'demo-giant' and sha256 is not null"
    )
    assert len(pictures) == len(sent) and pictures["verified"].all()
    assert set(pictures["sha256"]) == set(shown["image_sha256"])
    index = data / "viewer" / "demo-giant" / "index.html"
    assert index.is_file() and index.as_uri() in stdout


def test_roi_evaluation_matches_shapely(demo: tuple[Path, str]) -> None:
    data, _ = demo
    roi = sql(data, "select * from roi_evaluation")
    steps = sql(data, "select * from trajectory_steps where action = 'crop'")
    regions = pd.read_csv(sample_regions_path(), dtype={"benchmark_id": str})
    with_refs = regions[["benchmark_name", "benchmark_id"]].drop_duplicates()
    giant = roi[roi.experiment == "demo-giant"]
    assert len(giant) == 2 * len(with_refs)  # every run of every item with reference regions
    for run in giant.itertuples():
        refs = regions[
            (regions.benchmark_name == run.benchmark_name) & (regions.benchmark_id == run.benchmark_id)
        ]
        ref_boxes = [shapely.box(x, y, x + w, y + h) for x, y, w, h in refs["coords"].map(json.loads)]
        viewed = steps[
            (steps.experiment == run.experiment)
            & (steps.benchmark_name == run.benchmark_name)
            & (steps.benchmark_id == run.benchmark_id)
            & (steps.run_index == run.run_index)
        ]
        views = [
            shapely.box(r.box_x, r.box_y, r.box_x + r.box_w, r.box_y + r.box_h) for r in viewed.itertuples()
        ]
        best = max(v.intersection(r).area / v.union(r).area for v in views for r in ref_boxes)
        assert run.best_iou == pytest.approx(best)
        # geometry.roi's hit rule: IoU >= 0.1, or half the reference covered, or half the view inside it
        covered = any(v.intersection(r).area >= 0.5 * min(r.area, v.area) for v in views for r in ref_boxes)
        assert bool(run.hit) == (best >= 0.1 or covered)


def test_graded_export_equals_benchmark_metrics(demo: tuple[Path, str]) -> None:
    data, _ = demo
    graded = sql(data, "select task_id, score, valid_submission from graded_submissions")
    assert len(graded) == 1 and bool(graded.at[0, "valid_submission"])
    task = graded.at[0, "task_id"]
    value = sql(
        data,
        "select value_pct from benchmark_metrics "
        f"where experiment = 'demo-giant' and benchmark_name = '{task}'",
    )
    assert 100 * graded.at[0, "score"] == pytest.approx(value.iat[0, 0])


def test_roi_hits_and_misses_and_the_printed_queries_run(demo: tuple[Path, str]) -> None:
    data, stdout = demo
    roi = sql(data, "select * from roi_evaluation where experiment = 'demo-giant'")
    assert 0 < roi["hit"].sum() < len(roi)  # the sample's regions give a mix, not all hits
    queries = [line.split('giant-sql "', 1)[1][:-1] for line in stdout.splitlines() if 'giant-sql "' in line]
    assert len(queries) == 3
    for query in queries:
        out = subprocess.run(
            [sys.executable, "-m", "giant_assets.core.sql", query, "--db", str(data / "giant.duckdb")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and "(no rows)" not in out.stdout, out.stderr


def test_the_demo_key_is_stored_nowhere(demo: tuple[Path, str]) -> None:
    data, _ = demo
    for root in (data, data.parent / "dagster_home"):
        for path in root.rglob("*"):
            if path.is_file():
                assert DEMO_KEY.encode() not in path.read_bytes(), path


def test_the_demo_viewer_shows_every_giant_step_in_chromium(demo: tuple[Path, str]) -> None:
    """What a user opens after `make demo`: the index lists every item, and an item page shows each
    run's map and the images it sent decoded, one figure per step the trajectory_steps table records."""
    data, _ = demo
    site = data / "viewer" / "demo-giant"
    with Browser(chromium_path()) as browser:
        browser.open(file_url(site / "index.html"))
        rows = browser.eval("document.querySelectorAll('#items tbody tr').length")
        assert rows == 14  # every item of the sample, with or without a slide
        browser.open(file_url(site / "tcga_slidebench" / "0" / "index.html"))
        images = browser.eval("[...document.images].map(i => [i.complete, i.naturalWidth])")
        crops = sql(
            data,
            "select count(*) n from trajectory_steps where experiment = 'demo-giant' "
            "and benchmark_name = 'tcga_slidebench' and benchmark_id = '0' and action = 'crop'",
        ).at[0, "n"]
        assert len(images) == 2 + 2 + crops  # per run the map and the overview as sent, then every crop
        assert all(done and width > 0 for done, width in images)
        assert browser.eval("document.querySelectorAll('section.run').length") == 2
        assert browser.problems() == []


def test_giant_beats_the_thumbnail_because_it_zooms_in(demo: tuple[Path, str]) -> None:
    """The scripted model gives the sample's answer only when the lesion fills enough of its last view:
    GIANT's crop does, the 1024 px thumbnail does not, so GIANT scores higher and the reason is printed."""
    data, stdout = demo
    metrics = sql(
        data,
        "select experiment, benchmark_name, value_pct from benchmark_metrics "
        "where experiment in ('demo-giant', 'demo-thumbnail')",
    ).pivot(index="benchmark_name", columns="experiment", values="value_pct")
    assert (metrics["demo-giant"] > metrics["demo-thumbnail"]).any(), metrics
    # every item with a readable slide right: the missing gtex/tcga slides and the corrupt panda one cap it
    assert metrics.loc[["gtex", "tcga", "panda"], "demo-giant"].round(1).tolist() == [66.7] * 3
    assert metrics.loc[["tcga_slidebench", "tcga_expert_vqa"], "demo-giant"].tolist() == [100.0] * 2
    assert "gives one only when the lesion fills at least 8% of its last view" in stdout


def test_the_readme_states_the_numbers_the_demo_prints(demo: tuple[Path, str]) -> None:
    _, stdout = demo
    readme = " ".join((REPO / "README.md").read_text().split())
    for experiment in ("demo-giant", "demo-thumbnail", "demo-patch"):
        (row,) = [line for line in stdout.splitlines() if line.startswith(f"| {experiment} | ours |")]
        means = ", ".join(cell.split(" ± ")[0] for cell in row.split(" | ")[2:7])
        assert means in readme, (experiment, means)


def test_the_demo_path_review_reports_where_it_looked(demo: tuple[Path, str]) -> None:
    """demo-path-review on gtex and tcga: every answered run reports five valid regions, two of them
    exactly its two crops (IoU 1 up to clipping at the slide's edge), the bottom-right quarter unseen."""
    data, stdout = demo
    answers = sql(data, "select * from path_review_answers where experiment = 'demo-path-review'")
    runs = sql(data, "select * from predictions where experiment = 'demo-path-review'")
    assert sorted(set(answers.benchmark_name)) == ["gtex", "tcga"] and len(answers) == len(runs) >= 4
    answered = answers[answers.parsed]
    assert len(answered) == runs["error_kind"].isna().sum() >= 4
    assert (answered.n_valid_regions == 5).all() and (answered.n_problems == 0).all()
    regions = sql(data, "select * from path_review_regions where experiment = 'demo-path-review'")
    assert len(regions) == 5 * len(answered)
    second = regions[regions.region_index == 1]  # the top-left quarter, shown as asked
    assert (second.best_iou == 1.0).all() and second.viewed.all()
    assert not regions[regions.region_index == 3].viewed.any()  # the bottom-right quarter
    said = f"Path review (demo-path-review, gtex and tcga): {len(answered)} of {len(runs)} runs answered"
    assert said in stdout and f"with {5 * len(answered)} regions" in stdout and "0 problems" in stdout
    metrics = sql(data, "select distinct experiment from benchmark_metrics")
    assert "demo-path-review" not in set(metrics.experiment)  # no leaderboard row


def test_the_bundled_review_follows_its_rules_and_agrees_with_sklearn_and_krippendorff(
    demo: tuple[Path, str],
) -> None:
    """The demo's two scripted reviewers rated every answered demo-giant run of an item with reference
    regions once; demo-a's region ratings follow the overlap rule (shapely); review_metrics' kappa and
    alpha per benchmark are scikit-learn's and the krippendorff package's on the same ratings."""
    data, stdout = demo
    reviews = sql(data, "select * from pathologist_reviews")
    metrics = sql(data, "select * from review_metrics").set_index("benchmark_name")
    assert set(reviews.experiment) == {"demo-giant"} and set(metrics.experiment) == {"demo-giant"}
    refs = pd.read_csv(sample_regions_path(), dtype={"benchmark_id": str})
    with_refs = set(zip(refs.benchmark_name, refs.benchmark_id, strict=True))
    runs = sql(
        data,
        "select benchmark_name, benchmark_id, run_index from predictions "
        "where experiment = 'demo-giant' and error_kind is null",
    )
    expected = {(b, i, r) for b, i, r in runs.itertuples(index=False) if (b, i) in with_refs}
    for reviewer in ("demo-a", "demo-b"):
        mine = reviews[reviews.reviewer == reviewer]
        assert set(zip(mine.benchmark_name, mine.benchmark_id, mine.run_index, strict=True)) == expected
    assert len(expected) == 20 and (reviews.n_submissions == 1).all()
    ratings = {"relevant": 0, "partly": 0, "not relevant": 0}
    for row in reviews[reviews.reviewer == "demo-a"].itertuples():
        mine = refs[(refs.benchmark_name == row.benchmark_name) & (refs.benchmark_id == row.benchmark_id)]
        ref_boxes = [shapely.box(x, y, x + w, y + h) for x, y, w, h in mine["coords"].map(json.loads)]
        for (x, y, w, h), rating in zip(
            json.loads(row.agent_regions), json.loads(row.region_ratings), strict=True
        ):
            view = shapely.box(x, y, x + w, y + h)
            inter = [view.intersection(r).area for r in ref_boxes]
            hit = any(
                i / view.union(r).area >= 0.1 or i >= 0.5 * r.area or i >= 0.5 * view.area
                for i, r in zip(inter, ref_boxes, strict=True)
            )
            want = "relevant" if hit else "partly" if max(inter) > 0 else "not relevant"
            assert rating == want
            ratings[rating] += 1
        assert [shapely.box(x, y, x + w, y + h) for x, y, w, h in json.loads(row.drawn)] == ref_boxes
    assert ratings["relevant"] and ratings["not relevant"]  # the rules give a mix
    order = {"wrong": 0, "partly": 1, "correct": 2}
    region_order = {"not relevant": 0, "partly": 1, "relevant": 2}
    kappas = []
    for benchmark, group in reviews.groupby("benchmark_name"):
        answers = group.pivot(index="unit", columns="reviewer", values="answer")
        kappa = cohen_kappa_score(answers["demo-a"], answers["demo-b"])
        got = metrics.loc[benchmark]
        assert got.cohen_kappa_answer == pytest.approx(kappa, abs=1e-12, nan_ok=True)
        kappas.append(kappa)
        answer_matrix = [[order[v] for v in answers[r]] for r in ("demo-a", "demo-b")]
        alpha = krippendorff.alpha(
            reliability_data=answer_matrix, level_of_measurement="ordinal", value_domain=[0, 1, 2]
        )
        assert got.alpha_answer == pytest.approx(alpha, abs=1e-12, nan_ok=True)
        regions = group.pivot(index="unit", columns="reviewer", values="region_ratings")
        region_matrix = [
            [region_order[v] for unit in regions.index for v in json.loads(regions.at[unit, r])]
            for r in ("demo-a", "demo-b")
        ]
        alpha = krippendorff.alpha(
            reliability_data=region_matrix, level_of_measurement="ordinal", value_domain=[0, 1, 2]
        )
        assert got.alpha_regions == pytest.approx(alpha, abs=1e-12, nan_ok=True)
        assert got.reviewers == 2 and got.runs_reviewed == len(answers)
    assert any(np.isfinite(kappas)) and not all(k == 1 for k in kappas)  # disagreement, and a kappa
    printed = stdout.split("Bundled review of demo-giant", 1)[1]
    for benchmark in metrics.index:
        line = next(ln for ln in printed.splitlines() if ln.split()[:1] == [benchmark])
        assert str(int(metrics.loc[benchmark].runs_reviewed)) in line.split()


def test_the_demo_lists_the_slides_it_found(demo: tuple[Path, str]) -> None:
    """slide_inventory, counted by hand from the sample CSV and demo/lesion_items.csv: one gtex and one
    tcga slide are missing, one panda slide is corrupt, two tcga_slidebench items share a slide, and the
    lesion items' five slides are all among the sample's (one file counted once in ``all``)."""
    data, stdout = demo
    inventory = sql(data, "select * from slide_inventory").set_index("benchmark_name")
    counts = inventory[["questions", "slides", "found", "missing", "unreadable"]].T.to_dict("list")
    assert counts == {
        "gtex": [3, 3, 2, 1, 0], "tcga": [3, 3, 2, 1, 0], "panda": [3, 3, 2, 0, 1],
        "tcga_slidebench": [3, 2, 2, 0, 0], "tcga_expert_vqa": [2, 2, 2, 0, 0],
        "demo-lesion": [5, 5, 5, 0, 0], "all": [19, 12, 9, 2, 1],
    }  # fmt: skip
    said = "slide_inventory: 12 slides named by 19 questions, 9 found, 2 missing, 1 unreadable"
    assert said in stdout


def test_the_plug_in_answers_the_declared_benchmark_in_a_sixth_column(demo: tuple[Path, str]) -> None:
    """The example two-model plug-in on demo-lesion: the scripted proposer crops each slide's darkest
    blob, the answerer says yes when a lesion fills the crop. So it says yes on the four slides with a
    lesion, also where the question's region holds none (gtex-fragment), and no on the lesion-free
    panda slide: 4 of 5 right, balanced accuracy (3/3 + 1/2) / 2 = 75 %."""
    data, stdout = demo
    voted = sql(
        data,
        "select benchmark_id, predicted_label, truth_label from item_predictions "
        "where experiment = 'demo-two-model'",
    )
    yes, no = 1, 2  # the options' numbers: ['yes', 'no']
    assert dict(zip(voted.benchmark_id, voted.predicted_label, strict=True)) == {
        "gtex-lesion": yes, "tcga-lesion": yes, "tcga-lesion-2": yes, "gtex-fragment": yes, "panda-clear": no,
    }  # fmt: skip
    truth = dict(zip(voted.benchmark_id, voted.truth_label, strict=True))
    assert truth == {"gtex-lesion": yes, "tcga-lesion": yes, "tcga-lesion-2": yes, "gtex-fragment": no,
                     "panda-clear": no}  # fmt: skip
    assert balanced_accuracy_score(voted.truth_label, voted.predicted_label) == 0.75  # the oracle agrees
    value = sql(data, "select value_pct from benchmark_metrics where benchmark_name = 'demo-lesion'")
    assert value["value_pct"].tolist() == [75.0]
    header = next(line for line in stdout.splitlines() if line.startswith("| experiment | source |"))
    columns = header.strip("| ").split(" | ")
    assert columns[2:8] == ["tcga", "gtex", "panda", "tcga_slidebench", "tcga_expert_vqa", "demo-lesion"]
    (row,) = [line for line in stdout.splitlines() if line.startswith("| demo-two-model | ours |")]
    cells = row.strip("| ").split(" | ")
    assert cells[2:7] == [""] * 5 and abs(float(cells[7].split(" ± ")[0]) - 75.0) < 10  # bootstrap mean


def test_the_iteration_figure_holds_the_sweep_beside_the_paper(demo: tuple[Path, str]) -> None:
    """demo-steps-1/2/5 on tcga_slidebench: with two calls or more GIANT crops the lesion and reads all
    three items (100 %); with one it answers from the overview, never cropping."""
    data, _ = demo
    points = sql(data, "select * from paper_figures where figure = 'iterations'")
    ours = points[points.source == "ours"].set_index("x")
    assert sorted(ours.index) == [1.0, 2.0, 5.0] and set(ours.benchmark_name) == {"tcga_slidebench"}
    assert ours.loc[2.0, "mean"] == 100.0 and ours.loc[5.0, "mean"] == 100.0
    assert ours.loc[1.0, "experiment"] == "demo-steps-1" and (points.source != "ours").sum() == 5
    one = sql(data, "select action from trajectory_steps where experiment = 'demo-steps-1'")
    assert "crop" not in set(one.action) and len(one)
    assert (data / "results" / "figures" / "iterations.png").stat().st_size > 0
