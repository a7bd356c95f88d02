"""A benchmark declared in the experiments file, run end to end with no code change: generated pyramidal
TIFF slides, an items CSV with its own column names, the ``random`` agent and GIANT at the scripted
loopback model, through predictions -> item_predictions -> benchmark_metrics -> leaderboard, and
roi_evaluation against the declared benchmark's own reference regions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely
from dagster import AssetSelection, DagsterInstance, materialize
from sklearn.metrics import f1_score

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.experiments_cli import main as experiments_cli
from giant_assets.platform.partitions import BENCHMARK, result_key
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign
from tests.support.dagster_env import add_experiments, resources_for
from tests.support.slides import write_pyramidal_slide

NAME = "lesion-check"
CELL = AssetSelection.assets(
    "predictions", "trajectory_steps", "item_predictions", "benchmark_metrics", "roi_evaluation"
)
BOARD = AssetSelection.assets("leaderboard", "leaderboard_long", "leaderboard_stale")
QUESTION = "Is there a lesion in this slide?"
# case id -> (slide, label); the options are ["yes", "no"], so the truth is 1 for yes, 2 for no
CASES = {"c1": ("a.tiff", "yes"), "c2": ("b.tiff", "no"), "c3": ("c.tiff", "Yes"), "c4": ("d.tiff", "no")}
TRUTH = {"c1": 1, "c2": 2, "c3": 1, "c4": 2}
# reference regions of the declared benchmark: the lesion's box on c1, a triangle on c2's tissue
REGIONS = {"c1": [580, 310, 240, 180], "c2": [[500, 300], [1000, 300], [500, 700]]}


def _regions(path: Path) -> Path:
    rows = [
        {"benchmark_name": NAME, "benchmark_id": "c1", "region_id": "lesion", "kind": "box",
         "coords": REGIONS["c1"]},
        {"benchmark_name": NAME, "benchmark_id": "c2", "region_id": "tri", "kind": "polygon",
         "coords": REGIONS["c2"]},
    ]  # fmt: skip
    path.write_text(json.dumps(rows))
    return path


def _slides(root: Path) -> None:
    lesion = (Blob(700, 400, 120, 90, LESION),)
    for slide, label in CASES.values():
        design = SlideDesign(1536, 1024, (Blob(768, 512, 600, 400, TISSUE),), lesion if label != "no" else ())
        write_pyramidal_slide(root / "slides" / slide, design, levels=3)


def _declare(tmp_path: Path, base_url: str) -> Path:
    cohort = tmp_path / "cohorts" / "lesions.csv"
    cohort.parent.mkdir()
    rows = [
        {"case_id": case, "slide_path": f"slides/{slide}", "question_text": QUESTION,
         "choices": "['yes', 'no']", "label": label}
        for case, (slide, label) in CASES.items()
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(cohort, index=False)
    path = tmp_path / "experiments.yaml"
    columns = "{id: case_id, slide: slide_path, question: question_text, options: choices, answer: label}"
    path.write_text(
        "experiments:\n"
        "  random: {agent: random}\n"
        f"  scripted-giant: {{agent: giant, model: scripted-demo, base_url: '{base_url}', max_steps: 2}}\n"
        "benchmarks:\n"
        f"  {NAME}:\n"
        "    items: cohorts/lesions.csv\n"
        f"    columns: {columns}\n"
        "    answer: label\n"
        "    metric: f1_macro\n"
        f"    wsi_root: {tmp_path / 'wsi'}\n"
    )
    return path


def test_a_declared_benchmark_runs_end_to_end(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _slides(tmp_path / "wsi")
    data = tmp_path / "data"
    instance = DagsterInstance.ephemeral()
    with ScriptedModelServer(rule=demo_policy) as server:
        declared = _declare(tmp_path, server.openai_base_url)
        regions = _regions(tmp_path / "regions.json")
        resources = resources_for(
            data, experiments_file=declared, wsi_root=str(sample_wsi_root), regions_path=str(regions)
        )
        add_experiments(instance, "random", "scripted-giant")

        def run(selection: AssetSelection, key=None) -> None:
            result = materialize(
                ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
            )
            assert result.success

        run(AssetSelection.assets("multipathqa_csv", "benchmark_items"))
        # ingest made the declared benchmark a column of the grid, beside the five built-ins
        assert sorted(instance.get_dynamic_partitions(BENCHMARK)) == sorted([*BENCHMARK_NAMES, NAME])
        for experiment in ("random", "scripted-giant"):
            run(CELL, result_key(experiment, NAME))
        run(BOARD)
        requests = list(server.requests)

    store = ParquetStore(data)
    items = store.read("benchmark_items").set_index("benchmark_id")
    mine = items[items["benchmark_name"] == NAME]
    assert mine["truth_label"].to_dict() == TRUTH  # "Yes" matched "yes" case-insensitively
    assert (mine["wsi_status"] == "ok").all() and (mine["metric_type"] == "f1_macro").all()
    assert mine["wsi_path"].map(lambda p: Path(p).name).to_dict() == {c: s for c, (s, _) in CASES.items()}
    assert mine.loc["c1", "prompt"].startswith(QUESTION) and "1. yes\n2. no" in mine.loc["c1", "prompt"]
    assert len(items) > len(mine)  # the sample's MultiPathQA items are still there

    metrics = store.read("benchmark_metrics").set_index("experiment")
    for experiment in ("random", "scripted-giant"):
        voted = store.read("item_predictions", [f"{experiment}/{NAME}"]).set_index("benchmark_id")
        assert len(voted) == 4 and voted["predicted_label"].notna().all()
        truth = [TRUTH[c] for c in voted.index]
        expected = f1_score(truth, voted["predicted_label"].astype(int), labels=[1, 2], average="macro")
        row = metrics.loc[experiment]
        assert row["benchmark_name"] == NAME and row["metric_type"] == "f1_macro"
        assert row["value_pct"] == pytest.approx(100 * expected)
        assert row["n_items"] == 4
    runs = store.read("predictions", [f"scripted-giant/{NAME}"])
    assert runs["error"].isna().all()
    for doc in runs["trajectory_json"]:
        assert [s["action"] for s in json.loads(doc)] == ["thumbnail", "crop", "answer"]
    assert len(requests) == 8  # 4 items x (crop, answer) at the loopback model

    board = store.read("leaderboard").set_index("experiment")
    assert NAME in board.columns and list(board.columns).index(NAME) > list(board.columns).index(
        "tcga_expert_vqa"
    )  # a sixth column, after the built-ins
    for experiment in ("random", "scripted-giant"):
        row = metrics.loc[experiment]
        assert board.loc[experiment, NAME] == f"{row['boot_mean_pct']:.1f} ± {row['boot_std_pct']:.1f}"
    assert set(board.loc[board["source"] == "paper", NAME]) == {""}  # the paper never ran it
    assert np.isfinite(metrics["boot_std_pct"]).all()

    # roi_evaluation scored the declared benchmark's regions: best IoU of the crops, against shapely
    refs = {
        "c1": shapely.box(580, 310, 820, 490),
        "c2": shapely.Polygon(REGIONS["c2"]),
    }
    roi = store.read("roi_evaluation", [f"scripted-giant/{NAME}"]).set_index("benchmark_id")
    assert sorted(roi.index) == ["c1", "c2"]  # the items with regions, one run each
    for done in runs.itertuples():
        if done.benchmark_id not in refs:
            continue
        (box,) = [s["box"] for s in json.loads(done.trajectory_json) if s["action"] == "crop"]
        x, y, w, h = box
        view, ref = shapely.box(x, y, x + w, y + h), refs[done.benchmark_id]
        assert roi.loc[done.benchmark_id, "best_iou"] == pytest.approx(
            view.intersection(ref).area / view.union(ref).area, abs=1e-12
        )
    assert roi.loc["c1", "best_iou"] > 0.1 and bool(roi.loc["c1", "hit"])  # GIANT looked at the lesion
    random_roi = store.read("roi_evaluation", [f"random/{NAME}"])
    assert len(random_roi) == 2 and (random_roi["n_viewed"] == 0).all()  # viewed nothing: scored misses

    # the declaration removed: its results leave the leaderboard, set aside as removed, files kept
    text = declared.read_text()
    declared.write_text(text[: text.index("benchmarks:")])
    run(BOARD)
    board = store.read("leaderboard")
    assert NAME not in board.columns and "tcga_expert_vqa" in board.columns
    stale = store.read("leaderboard_stale")
    assert stale[["experiment", "benchmark_name", "status"]].values.tolist() == [
        ["random", NAME, "removed"], ["scripted-giant", NAME, "removed"]
    ]  # fmt: skip
    assert set(stale["reason"]) == {f"benchmark {NAME!r} no longer declared in {declared}"}
    assert all("giant-experiments prune" in r and "declare benchmark" in r for r in stale["rerun"])
    # sync names its partition, prune deletes it (as an experiment's): the stored results stay
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setattr(DagsterInstance, "get", staticmethod(lambda: instance))
    assert experiments_cli(["sync", "--file", str(declared)]) == 0
    assert f"benchmarks no longer declared (kept; `giant-experiments prune` deletes them): {NAME}" in (
        capsys.readouterr().out
    )
    assert experiments_cli(["prune", "--file", str(declared)]) == 0
    assert f"deleted 1 partition(s) of removed benchmarks: {NAME}" in capsys.readouterr().out
    assert sorted(instance.get_dynamic_partitions(BENCHMARK)) == sorted(BENCHMARK_NAMES)
    assert store.exists("benchmark_metrics", f"random/{NAME}")
    assert experiments_cli(["prune", "--file", str(declared)]) == 0  # the built-ins are never pruned
    assert "deleted 0 partition(s) of removed benchmarks: none" in capsys.readouterr().out


GRADES = {"g1": ("a.tiff", 0), "g2": ("b.tiff", 2), "g3": ("c.tiff", 2), "g4": ("d.tiff", 3)}


def test_a_declared_grade_benchmark_is_scored_by_quadratic_kappa(tmp_path: Path) -> None:
    """Parquet items, integer grades, no options: majority and scripted GIANT, kappa against sklearn."""
    from sklearn.metrics import cohen_kappa_score

    _slides(tmp_path / "wsi")
    items = tmp_path / "grades.parquet"
    pd.DataFrame(
        {"id": list(GRADES), "slide": [f"slides/{s}" for s, _ in GRADES.values()],
         "question": ['How severe is the lesion? Reply {"answer": N}, N from 0 to 3.'] * 4,
         "grade": [g for _, g in GRADES.values()]}
    ).to_parquet(items)  # fmt: skip
    data = tmp_path / "data"
    instance = DagsterInstance.ephemeral()
    with ScriptedModelServer(rule=demo_policy) as server:
        declared = tmp_path / "experiments.yaml"
        declared.write_text(
            "experiments:\n  majority: {agent: majority}\n"
            f"  scripted-giant: {{agent: giant, model: scripted-demo, base_url: '{server.openai_base_url}', "
            "max_steps: 2}\n"
            "benchmarks:\n  severity:\n    items: grades.parquet\n"
            "    columns: {id: id, slide: slide, question: question, answer: grade}\n"
            "    answer: grade\n    metric: quadratic_kappa\n    wsi_root: wsi\n"
        )
        resources = resources_for(data, experiments_file=declared)  # no wsi_root: its own is declared
        add_experiments(instance, "majority", "scripted-giant")
        for selection, key in [
            (AssetSelection.assets("multipathqa_csv", "benchmark_items"), None),
            (CELL, result_key("majority", "severity")),
            (CELL, result_key("scripted-giant", "severity")),
        ]:
            result = materialize(
                ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
            )
            assert result.success

    store = ParquetStore(data)
    metrics = store.read("benchmark_metrics").set_index("experiment")
    truth = {g: grade for g, (_, grade) in GRADES.items()}
    for experiment in ("majority", "scripted-giant"):
        voted = store.read("item_predictions", [f"{experiment}/severity"]).set_index("benchmark_id")
        assert voted["predicted_label"].notna().all()
        pred = voted["predicted_label"].astype(int)
        y = [truth[g] for g in voted.index]
        scale = list(range(min(*y, *pred), max(*y, *pred) + 1))
        expected = cohen_kappa_score(y, pred, labels=scale, weights="quadratic")
        expected = 0.0 if np.isnan(expected) else expected  # undefined (one grade): reported as 0
        assert metrics.loc[experiment, "metric_type"] == "quadratic_kappa"
        assert metrics.loc[experiment, "value_pct"] == pytest.approx(100 * expected)
    majority = store.read("item_predictions", ["majority/severity"])
    assert set(majority["predicted_label"]) == {2}  # the most frequent grade
