"""The path review end to end: real materializations of predictions, trajectory_steps and the path-review
assets against the scripted loopback model on the sample slides; the parsed regions checked against the
boxes the server sent and plain shapely, and a malformed reply reported field by field, never dropped."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely
from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy
from giant_assets.demo.scripted.review import reported_regions, zooms
from giant_assets.eval.path_review import MIN_IOU
from giant_assets.eval.qupath import CROP_CLASS, REPORTED_CLASS
from giant_assets.eval.qupath_cli import main as qupath_main
from giant_assets.eval.reviews import ReviewFiles, load_queue
from giant_assets.experiments.prompts import BUILT_IN, PATH_REVIEW_PROMPT
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.path_review import path_review
from giant_assets.platform.assets.predictions import predictions, trajectory_steps
from giant_assets.platform.definitions import ALL_ASSETS, ALL_CHECKS
from giant_assets.platform.partitions import result_key
from giant_assets.report.review.cli import main as review_main
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

PARTITION = "tcga"
pytestmark = pytest.mark.xdist_group("path_review")  # one worker builds the module's fixture once
GOOD, BROKEN, PLAIN, RANDOM = "review-ok", "review-broken", "giant-plain", "random-plain"
SAMPLED = "review-sampled"  # item_sample: 2 of the benchmark's 3 items


def broken(request: RecordedRequest) -> Reply:
    """The demo's review with region 3's width as text and region 5 without observations."""
    reply = demo_policy(request)
    if not isinstance(reply.answer, dict):
        return reply
    regions = [dict(r) for r in reply.answer["regions"]]
    regions[2] = regions[2] | {"bbox": regions[2]["bbox"] | {"width": "wide"}}
    del regions[4]["observations"]
    return replace(reply, answer=reply.answer | {"regions": regions})


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path):
    data = tmp_path_factory.mktemp("review") / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, GOOD, BROKEN, PLAIN, RANDOM, SAMPLED)
    declared = data.parent / "experiments.yaml"
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    assets = [multipathqa_csv, benchmark_items, predictions, trajectory_steps, path_review]
    results, requests = {}, {}
    try:
        assert materialize(assets[:2], resources=resources, instance=instance).success
        with ScriptedModelServer(rule=demo_policy) as good, ScriptedModelServer(rule=broken) as bad:
            settings = {"agent": "path_review", "model": "scripted-review"}
            write_experiments(
                declared,
                {
                    GOOD: settings | {"base_url": good.openai_base_url},
                    BROKEN: settings | {"base_url": bad.openai_base_url},
                    PLAIN: {"agent": "giant", "model": "scripted-review", "base_url": good.openai_base_url},
                    RANDOM: {"agent": "random", "seed": 3},
                    SAMPLED: settings
                    | {"base_url": good.openai_base_url, "item_sample": {"n": 2, "seed": 42}},
                },
            )
            for name in (GOOD, BROKEN, PLAIN, SAMPLED):
                before = len(good.requests)
                results[name] = materialize(
                    assets,
                    selection=[predictions, trajectory_steps, path_review],
                    partition_key=result_key(name, PARTITION),
                    resources=resources,
                    instance=instance,
                )
                assert results[name].success, name
                requests[name] = list(good.requests[before:]) if name != BROKEN else list(bad.requests)
    finally:
        mp.undo()
    store = ParquetStore(data)
    tables = {
        (name, t): store.read(t, [f"{name}/{PARTITION}"])
        for name in (GOOD, BROKEN, PLAIN, SAMPLED)
        for t in ("predictions", "trajectory_steps", "path_review_regions", "path_review_answers")
    }

    def run(selection: list[str], key: str | None = None) -> None:
        assert materialize(
            [*ALL_ASSETS, *ALL_CHECKS],
            selection=AssetSelection.assets(*selection),
            partition_key=key,
            resources=resources,
            instance=instance,
        ).success

    return tables, results, requests, data, run


def test_the_review_request_replaces_the_question(reviewed) -> None:
    _, _, requests, _, _ = reviewed
    firsts = [r for r in requests[GOOD] if r.assistant_turns == 0]
    assert firsts
    for r in firsts:
        user = next(t for t in r.turns if t.role == "user")
        assert user.texts[0] == BUILT_IN.review_request == PATH_REVIEW_PROMPT.format()
        assert "slide_zoom" in r.tools
    plain = next(r for r in requests[PLAIN] if r.assistant_turns == 0)
    assert next(t for t in plain.turns if t.role == "user").texts[0] != BUILT_IN.review_request


def test_regions_match_the_reply_and_shapely(reviewed) -> None:
    """Every reported region is stored as sent; its best IoU with the crops shown is shapely's."""
    tables, _, requests, _, _ = reviewed
    runs = tables[GOOD, "predictions"]
    regions, answers, steps = (
        tables[GOOD, t] for t in ("path_review_regions", "path_review_answers", "trajectory_steps")
    )
    answered = runs[runs["error_kind"].isna()]
    assert len(answered) >= 2 and len(answers) == len(runs)
    finals = [r for r in requests[GOOD] if r.assistant_turns == 2]
    assert len(finals) == len(answered)
    for run in answered.itertuples():
        mine = regions[(regions.benchmark_id == run.benchmark_id) & (regions.run_index == run.run_index)]
        crops = steps[
            (steps.benchmark_id == run.benchmark_id)
            & (steps.run_index == run.run_index)
            & (steps.action == "crop")
        ]
        shown = [
            shapely.box(r.box_x, r.box_y, r.box_x + r.box_w, r.box_y + r.box_h) for r in crops.itertuples()
        ]
        assert len(shown) == 2
        # the server's reply for this run: the zooms it asked for, as the trajectory recorded them
        asked = [tuple(s["requested_box"]) for s in json.loads(run.trajectory_json) if s["action"] == "crop"]
        request = next(r for r in finals if zooms(r) == asked)
        sent = reported_regions(zooms(request), _size_of(request))
        assert mine["region_index"].tolist() == [0, 1, 2, 3, 4] and mine["valid"].all()
        assert list(zip(mine.x, mine.y, mine.width, mine.height, strict=True)) == [
            tuple(map(float, b)) for b in sent
        ]
        for row, (x, y, w, h) in zip(mine.itertuples(), sent, strict=True):
            box = shapely.box(x, y, x + w, y + h)
            ious = [box.intersection(s).area / box.union(s).area for s in shown]
            assert row.best_iou == pytest.approx(max(ious), abs=1e-12)
            step = crops.iloc[ious.index(max(ious))]["step"] if max(ious) > 0 else None
            assert (None if pd.isna(row.best_crop_step) else row.best_crop_step) == step
            assert bool(row.viewed) == (max(ious) >= MIN_IOU)
        assert mine.iloc[1].best_iou == pytest.approx(
            1.0
        )  # the quarter lies inside the slide: shown as asked
        assert mine.iloc[3].best_iou < MIN_IOU  # the bottom-right quarter was never viewed
        answer = answers[
            (answers.benchmark_id == run.benchmark_id) & (answers.run_index == run.run_index)
        ].iloc[0]
        assert answer.parsed and answer.n_problems == 0 and json.loads(answer.problems) == []
        assert (answer.organ_type, answer.confidence) == ("synthetic tissue", "medium")
        assert answer.n_regions_viewed == int(mine.viewed.sum()) and answer.n_crops == 2
        assert answer.mean_best_iou == pytest.approx(mine.best_iou.mean())


def _size_of(request: RecordedRequest) -> tuple[int, int]:
    import re

    system = "\n".join(t for turn in request.turns if turn.role == "system" for t in turn.texts)
    m = re.search(r"(\d+) [x×] (\d+) pixels", system)
    assert m is not None
    return int(m[1]), int(m[2])


def test_a_malformed_region_is_reported_with_its_item_and_field(reviewed) -> None:
    tables, results, _, _, _ = reviewed
    regions, answers = tables[BROKEN, "path_review_regions"], tables[BROKEN, "path_review_answers"]
    answered = answers[answers.parsed]
    assert len(answered) >= 2
    assert len(regions) == 5 * len(answered)  # nothing dropped
    bad = regions[~regions["valid"].astype(bool)]
    assert sorted(set(bad.region_index)) == [2, 4]
    width = bad[bad.region_index == 2].iloc[0]
    assert width.problem == "regions[2].bbox.width: must be a number, got 'wide'"
    assert pd.isna(width.x) and pd.isna(width.best_iou)
    assert (
        bad[bad.region_index == 4].iloc[0].problem
        == "regions[4].observations: must be non-empty text, got nothing"
    )
    for row in answered.itertuples():
        assert json.loads(row.problems) == [
            "regions[2].bbox.width: must be a number, got 'wide'",
            "regions[4].observations: must be non-empty text, got nothing",
        ]
        assert row.n_valid_regions == 3
    meta = results[BROKEN].asset_materializations_for_node("path_review")[0].metadata
    listed = meta["problems_first"].value
    for row in answered.itertuples():
        assert f"{PARTITION} item {row.benchmark_id} run {row.run_index}: regions[2].bbox.width" in listed
    assert meta["problems"].value == 2 * len(answered) + int((~answers.parsed).sum())


def test_another_agent_gets_empty_review_tables(reviewed) -> None:
    tables, results, _, _, _ = reviewed
    assert tables[PLAIN, "path_review_regions"].empty and tables[PLAIN, "path_review_answers"].empty
    assert len(tables[PLAIN, "predictions"]) == 3


def _box(x: float, y: float, w: float, h: float) -> shapely.Polygon:
    return shapely.box(x, y, x + w, y + h)


def test_qupath_export_and_the_review_queue_read_the_stored_regions(reviewed, tmp_path: Path) -> None:
    """Without a hand-made --reported file, giant-qupath export and giant-review prepare take a
    path-review experiment's regions from the stored path_review_regions table: every valid region once,
    its polygon the stored box (shapely), its texts as properties; invalid regions and other agents none."""
    tables, _, _, data, _ = reviewed
    for name in (GOOD, BROKEN, PLAIN):
        out = tmp_path / name
        args = ["--data-dir", str(data), "export", "--experiment", name, "--benchmark", PARTITION]
        assert qupath_main([*args, "--out", str(out)]) == 0
        features = [f for p in sorted(out.glob("*.geojson")) for f in json.loads(p.read_text())["features"]]
        reported = [f for f in features if f["properties"]["classification"]["name"] == REPORTED_CLASS]
        stored = tables[name, "path_review_regions"]
        valid = stored[stored["valid"].fillna(False).astype(bool)] if len(stored) else stored
        assert len(reported) == len(valid) and (len(valid) > 0) == (name != PLAIN)
        if name == BROKEN:
            assert len(valid) == 3 * len(tables[name, "path_review_answers"].query("parsed"))
        got = {
            (f["properties"]["benchmark_id"], f["properties"]["run"], f["properties"]["region_number"]): f
            for f in reported
        }
        for row in valid.itertuples():
            feature = got[(row.benchmark_id, row.run_index, row.region_number)]
            polygon = shapely.geometry.shape(feature["geometry"])
            assert polygon.equals(_box(row.x, row.y, row.width, row.height))
            props = feature["properties"]
            assert (props["finding"], props["why_zoomed"]) == (row.observations, row.why_zoomed)
            assert props["best_iou"] == pytest.approx(row.best_iou) and props["viewed"] == bool(row.viewed)
        crops = [f for f in features if f["properties"]["classification"]["name"] == CROP_CLASS]
        assert len(crops) == (tables[name, "trajectory_steps"]["action"] == "crop").sum()

    reviews = ["--data-dir", str(data), "prepare", "--benchmark", PARTITION]
    assert review_main([*reviews, "--experiment", GOOD, "--experiment", PLAIN]) == 0
    units = {
        (u["experiment"], u["benchmark_id"], u["run_index"]): u
        for u in load_queue(ReviewFiles(data / "reviews"))
    }
    good = tables[GOOD, "path_review_regions"]
    # prepare leaves out runs that cannot be reviewed (no slide file, no answer, no region): the rest
    runs = tables[GOOD, "predictions"].itertuples()
    queued = [r for r in runs if (GOOD, r.benchmark_id, r.run_index) in units]
    assert queued and any(len(good[good.benchmark_id == r.benchmark_id]) for r in queued)
    for run in queued:
        mine = good[(good.benchmark_id == run.benchmark_id) & (good.run_index == run.run_index)]
        shown = units[(GOOD, run.benchmark_id, run.run_index)]["shown"]["regions"]
        assert [r["reason"] for r in shown] == mine["observations"].tolist()
        assert [_box(*r["box"]) for r in shown] == [
            _box(*b) for b in mine[["x", "y", "width", "height"]].to_numpy()
        ]
    steps = tables[PLAIN, "trajectory_steps"]
    for run in tables[PLAIN, "predictions"].itertuples():
        if (PLAIN, run.benchmark_id, run.run_index) not in units:  # left out: cannot be reviewed
            continue
        crops = steps[
            (steps.benchmark_id == run.benchmark_id)
            & (steps.run_index == run.run_index)
            & (steps.action == "crop")
        ]
        shown = units[(PLAIN, run.benchmark_id, run.run_index)]["shown"]["regions"]
        assert [r["step"] for r in shown] == crops["step"].tolist()  # another agent: its crops


def test_a_path_review_gets_no_leaderboard_row_and_no_comparison(reviewed) -> None:
    """Backfilled like any cell (its item_predictions and benchmark_metrics materialized: no option in a
    review JSON, so near zero), a path-review experiment still gets no leaderboard row, no long cell, no
    stale entry, no results.json and no paired comparison; the answering experiments do."""
    _, _, _, data, run = reviewed
    scoring = ["item_predictions", "benchmark_metrics"]
    for name in (GOOD, PLAIN):
        run(scoring, result_key(name, PARTITION))
    run(["predictions", "trajectory_steps", *scoring], result_key(RANDOM, PARTITION))
    run(["leaderboard", "leaderboard_long", "leaderboard_stale", "experiment_comparisons"])
    store = ParquetStore(data)
    metrics = store.read("benchmark_metrics").set_index("experiment")
    assert {GOOD, PLAIN, RANDOM} <= set(metrics.index) and metrics.at[GOOD, "value_pct"] == 0.0
    board = store.read("leaderboard")
    assert sorted(board.loc[board.source == "ours", "experiment"]) == sorted([PLAIN, RANDOM])
    assert GOOD not in set(store.read("leaderboard_long").experiment)
    stale = store.read("leaderboard_stale")
    assert GOOD not in set(stale.experiment) if len(stale) else True
    pairs = store.read("experiment_comparisons")
    assert sorted(zip(pairs.experiment_a, pairs.experiment_b, strict=True)) == [
        tuple(sorted([PLAIN, RANDOM]))
    ]
    assert not (data / "results" / GOOD).exists() and (data / "results" / PLAIN / "results.json").is_file()


def test_an_item_sample_runs_only_the_sampled_items(reviewed) -> None:
    """item_sample {n: 2, seed: 42}: the cell runs the two items pandas' sample(n=2, random_state=42)
    picks from the benchmark's items in CSV order (the released script's draw), no other."""
    tables, _, _, data, _ = reviewed
    items = ParquetStore(data).read("benchmark_items")
    tcga = items[items.benchmark_name == PARTITION].sort_values("row_number").reset_index(drop=True)
    assert len(tcga) == 3
    picked = np.random.RandomState(42).choice(len(tcga), size=2, replace=False)
    expected = set(tcga.loc[picked, "benchmark_id"].astype(str))
    runs = tables[SAMPLED, "predictions"]
    assert set(runs.benchmark_id.astype(str)) == expected and len(runs) == 2
    assert set(tables[GOOD, "predictions"].benchmark_id.astype(str)) == set(tcga.benchmark_id.astype(str))


def test_the_viewer_of_a_path_review_cell_draws_its_stored_regions(reviewed) -> None:
    """The cell's trajectory_viewer (a real materialization) shows each run's valid
    stored regions as reported overlays R1, R2... in order; another agent's viewer shows none."""
    tables, _, _, data, run = reviewed
    for name in (GOOD, PLAIN):
        run(["item_predictions", "trajectory_pictures", "trajectory_viewer"], result_key(name, PARTITION))
    stored = tables[GOOD, "path_review_regions"]
    valid = stored[stored["valid"].fillna(False).astype(bool)]
    assert len(valid) > 0
    seen = 0
    for page in sorted((data / "viewer" / GOOD / PARTITION).glob("*/index.html")):
        html = page.read_text(encoding="utf-8")
        for match in re.finditer(r"data-run=\"(\d+)\" data-overlays='([^']*)'", html):
            overlays = json.loads(unescape(match[2]))
            mine = valid[(valid.benchmark_id == page.parent.name) & (valid.run_index == int(match[1]))]
            boxes = [[float(v) for v in b] for b in mine[["x", "y", "width", "height"]].to_numpy()]
            shown = [(o["label"], o["box"]) for o in overlays if o["kind"] == "reported"]
            assert shown == [(f"R{k}", b) for k, b in enumerate(boxes, 1)]
            seen += len(shown)
    assert seen == len(valid)
    for page in (data / "viewer" / PLAIN / PARTITION).glob("*/index.html"):
        assert '"kind": "reported"' not in unescape(page.read_text(encoding="utf-8"))
