"""pathologist_reviews and review_metrics materialized from a stored review, every number checked
against an independent computation: scikit-learn's cohen_kappa_score, the krippendorff package, a
bootstrap loop, shapely for the drawn regions."""

from __future__ import annotations

import json
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
import shapely
from dagster import DagsterInstance, materialize
from sklearn.metrics import cohen_kappa_score

from giant_assets.core.storage import ParquetStore
from giant_assets.eval.review_metrics import METRIC_COLUMNS, REVIEW_COLUMNS, review_metrics_table
from giant_assets.eval.reviews import ReviewFiles, append_review, build_units, write_queue
from giant_assets.platform.assets.reviews import pathologist_reviews, review_metrics
from tests.support.dagster_env import resources_for

ANSWERS = ["wrong", "partly", "correct"]  # ordinal, lowest first
REGIONS = ["not relevant", "partly", "relevant"]
N_ITEMS = 12
AGENT_BOXES = [[100, 100, 200, 200], [1000, 1000, 300, 300]]


def _units(files: ReviewFiles, experiment: str) -> list[dict]:
    steps = [{"index": i + 1, "action": "crop", "box": b, "text": "why"} for i, b in enumerate(AGENT_BOXES)]
    runs = pd.DataFrame(
        {
            "config_hash": f"h-{experiment}",
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(N_ITEMS)],
            "run_index": 0,
            "truth_label": 1,
            "correct": [i % 2 == 0 for i in range(N_ITEMS)],
            "answer_text": "1",
            "trajectory_json": json.dumps(steps),
        }
    )
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(N_ITEMS)],
            "prompt": "q",
            "wsi_path": "",
            "width": 4096,
            "height": 3072,
        }  # fmt: skip
    )
    return build_units(files.secret(), experiment, runs, items)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("review") / "data"
    files = ReviewFiles(data / "reviews")
    rng = np.random.default_rng(7)
    plan = {"exp-a": ["ana", "ben"], "exp-b": ["ana", "ben", "cy"]}
    ratings: dict[tuple[str, str, str], dict] = {}  # (experiment, reviewer, unit) -> latest review
    for experiment, reviewers in plan.items():
        units = _units(files, experiment)
        write_queue(files, units)
        truth = rng.integers(0, 3, size=(len(units), 3))
        for reviewer in reviewers:
            for u, unit in enumerate(units):
                if reviewer == "cy" and u % 4 == 0:
                    continue  # cy skipped some runs: missing ratings
                agree = rng.random(3) < 0.7
                codes = np.where(agree, truth[u], rng.integers(0, 3, size=3))
                review = {
                    "regions": [REGIONS[codes[0]], REGIONS[codes[1]]],
                    "answer": ANSWERS[codes[2]],
                    "supports": "yes" if codes[2] == 2 else "no",
                    "drawn": [[150.0, 150.0, 200.0, 100.0]] if u % 3 == 0 else [],
                    "comment": "",
                }
                if reviewer == "ben" and u == 0:  # a first opinion, revised below
                    append_review(files, reviewer, unit["unit"], review | {"answer": "correct"})
                append_review(files, reviewer, unit["unit"], review)
                ratings[(experiment, reviewer, unit["unit"])] = review
    result = materialize([pathologist_reviews, review_metrics], resources=resources_for(data))
    assert result.success
    store = ParquetStore(data)
    return (
        ratings,
        store.read("pathologist_reviews"),
        store.read("review_metrics").set_index("experiment"),
        result,
    )


def test_the_reviews_table_holds_the_latest_submission_unblinded(reviewed) -> None:
    ratings, reviews, _, result = reviewed
    assert len(reviews) == len(ratings) == 12 * 2 + 12 * 2 + 9
    for row in reviews.itertuples():
        expected = ratings[(row.experiment, row.reviewer, row.unit)]
        assert row.answer == expected["answer"] and json.loads(row.region_ratings) == expected["regions"]
        assert row.n_submissions == (2 if row.reviewer == "ben" and row.benchmark_id == "0" else 1)
        assert row.agent_correct == (int(row.benchmark_id) % 2 == 0)
    meta = result.asset_materializations_for_node("pathologist_reviews")[0].metadata
    assert meta["revisions_kept"].value == 2 and meta["reviewers"].value == 3


def _bootstrap_std(hits: np.ndarray, totals: np.ndarray) -> float:
    """The bootstrap written as a loop: 1000 replicates of the runs, seed 42, std with ddof=1."""
    rng = np.random.default_rng(42)
    values = []
    for _ in range(1000):
        idx = rng.choice(len(hits), size=len(hits), replace=True)
        values.append(hits[idx].sum() / totals[idx].sum())
    return float(np.std(values, ddof=1))


def test_shares_and_their_bootstrap_std(reviewed) -> None:
    ratings, reviews, metrics, _ = reviewed
    for experiment in ("exp-a", "exp-b"):
        mine = {k: v for k, v in ratings.items() if k[0] == experiment}
        units = sorted({u for _, _, u in mine})
        correct = np.array(
            [sum(v["answer"] == "correct" for k, v in mine.items() if k[2] == u) for u in units]
        )
        rated = np.array([sum(1 for k in mine if k[2] == u) for u in units])
        relevant = np.array(
            [sum(v["regions"].count("relevant") for k, v in mine.items() if k[2] == u) for u in units]
        )
        row = metrics.loc[experiment]
        assert row.share_answers_correct == pytest.approx(correct.sum() / rated.sum(), abs=1e-12)
        assert row.share_answers_correct_std == pytest.approx(_bootstrap_std(correct, rated), abs=1e-12)
        assert row.share_regions_relevant == pytest.approx(relevant.sum() / (2 * rated.sum()), abs=1e-12)
        assert row.share_regions_relevant_std == pytest.approx(_bootstrap_std(relevant, 2 * rated), abs=1e-12)
        assert row.runs_reviewed == N_ITEMS and row.reviews == len(mine)


def test_agreement_matches_scikit_learn_and_krippendorff(reviewed) -> None:
    ratings, _, metrics, _ = reviewed
    units = sorted({u for e, _, u in ratings if e == "exp-a"})
    a = [ratings[("exp-a", "ana", u)]["answer"] for u in units]
    b = [ratings[("exp-a", "ben", u)]["answer"] for u in units]
    assert metrics.loc["exp-a"].cohen_kappa_answer == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert np.isnan(metrics.loc["exp-b"].cohen_kappa_answer)  # three reviewers: alpha
    for experiment, reviewers in (("exp-a", ["ana", "ben"]), ("exp-b", ["ana", "ben", "cy"])):
        units = sorted({u for e, _, u in ratings if e == experiment})

        def code(reviewer: str, unit: str, field: str, k: int | None = None, exp: str = experiment) -> float:
            review = ratings.get((exp, reviewer, unit))
            if review is None:
                return np.nan
            return float(
                (REGIONS if k is not None else ANSWERS).index(
                    review[field][k] if k is not None else review[field]
                )
            )

        answers = [[code(r, u, "answer") for u in units] for r in reviewers]
        regions = [[code(r, u, "regions", k) for u in units for k in (0, 1)] for r in reviewers]
        row = metrics.loc[experiment]
        assert row.alpha_answer == pytest.approx(
            krippendorff.alpha(reliability_data=answers, level_of_measurement="ordinal"), abs=1e-12
        )
        assert row.alpha_regions == pytest.approx(
            krippendorff.alpha(reliability_data=regions, level_of_measurement="ordinal"), abs=1e-12
        )


def test_drawn_regions_are_matched_against_the_agent_regions(reviewed) -> None:
    ratings, _, metrics, _ = reviewed
    drawn = shapely.box(150, 150, 350, 250)
    agent = [shapely.box(x, y, x + w, y + h) for x, y, w, h in AGENT_BOXES]
    best = max(a.intersection(drawn).area / a.union(drawn).area for a in agent)
    for experiment in ("exp-a", "exp-b"):
        with_drawn = [v for k, v in ratings.items() if k[0] == experiment and v["drawn"]]
        row = metrics.loc[experiment]
        assert row.reviews_with_drawn == len(with_drawn) > 0
        assert row.mean_best_iou_drawn == pytest.approx(best, abs=1e-12) and row.share_drawn_hit == 1.0


def test_every_metric_is_a_column_and_no_review_gives_empty_tables(reviewed, tmp_path: Path) -> None:
    _, _, metrics, _ = reviewed
    assert list(metrics.reset_index().columns) == METRIC_COLUMNS
    assert metrics.drop(columns=["cohen_kappa_answer"]).notna().all().all()
    assert materialize(
        [pathologist_reviews, review_metrics], resources=resources_for(tmp_path / "data")
    ).success
    store = ParquetStore(tmp_path / "data")
    assert list(store.read("review_metrics").columns) == METRIC_COLUMNS and store.read("review_metrics").empty
    assert list(store.read("pathologist_reviews").columns) == REVIEW_COLUMNS


# --- hostile or partial reviews --------------------------------------------------------------------

NAN_BOX = [float("nan"), 0.0, 10.0, 10.0]
ANA = {  # four runs; supports "partly" counts as not
    "answer": ["correct", "wrong", "correct", "partly"],
    "supports": ["yes", "partly", "no", "partly"],
    "regions": [
        ["relevant", "partly"],
        ["relevant", "relevant"],
        ["not relevant", None],
        ["partly", "relevant"],
    ],
}
BEN = {  # rated no answer at all: a valid review
    "answer": [None] * 4,
    "supports": ["yes", "yes", "partly", None],
    "regions": [["relevant", "relevant"], [None, None], ["relevant", "not relevant"], ["partly", "partly"]],
}


def test_a_stored_bad_review_is_skipped_and_named_and_a_reviewer_without_answers_counts(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    files = ReviewFiles(data / "reviews")
    units = _units(files, "exp-c")[:4]
    write_queue(files, units)
    for name, plan in (("ana", ANA), ("ben", BEN)):
        for u, unit in enumerate(units):
            review = {k: plan[k][u] for k in ("answer", "supports")} | {"regions": plan["regions"][u]}
            append_review(files, name, unit["unit"], review | {"drawn": [], "comment": ""})
    # stored before validate_review refused NaN: one such review must not stop the others counting
    nan_review = {"regions": ["relevant", "relevant"], "answer": "correct", "supports": "yes"}
    append_review(files, "dan", units[0]["unit"], nan_review | {"drawn": [NAN_BOX], "comment": ""})
    result = materialize([pathologist_reviews, review_metrics], resources=resources_for(data))
    assert result.success
    meta = result.asset_materializations_for_node("pathologist_reviews")[0].metadata
    assert meta["invalid_skipped"].value == 1
    named = f"dan's review of unit {units[0]['unit']} (exp-c/tcga item 0 run 0): field 'drawn[0]': x = nan"
    assert named in meta["invalid_first"].value
    store = ParquetStore(data)
    reviews, row = store.read("pathologist_reviews"), store.read("review_metrics").iloc[0]
    assert sorted(set(reviews["reviewer"])) == ["ana", "ben"] and len(reviews) == 8
    # by hand: answers 2 correct of 4 rated (ben: none); support 3 "yes" of 7; regions 4 + 3 of 7 + 6
    assert row.share_answers_correct == pytest.approx(2 / 4, abs=1e-12)
    assert row.share_findings_support == pytest.approx(3 / 7, abs=1e-12)
    assert row.share_regions_relevant == pytest.approx(7 / 13, abs=1e-12)
    assert np.isnan(row.cohen_kappa_answer) and np.isnan(row.alpha_answer)  # no run both rated
    order = {u["unit"]: i for i, u in enumerate(units)}
    cells = {
        who: [REGIONS.index(r) if r else np.nan for u in sorted(order) for r in plan["regions"][order[u]]]
        for who, plan in (("ana", ANA), ("ben", BEN))
    }
    expected = krippendorff.alpha(reliability_data=list(cells.values()), level_of_measurement="ordinal")
    assert row.alpha_regions == pytest.approx(expected, abs=1e-12)

    # a pathologist_reviews table stored before the check: its bad row is left out and named, never raised
    bad = reviews.iloc[[0]].assign(reviewer="eve", drawn=json.dumps([NAN_BOX]))
    worse = reviews.iloc[[1]].assign(reviewer="fay", answer="maybe")
    again, skipped = review_metrics_table(pd.concat([reviews, bad, worse], ignore_index=True))
    unit0, unit1 = reviews.iloc[0], reviews.iloc[1]
    assert skipped == [
        f"eve's review of exp-c/tcga item {unit0.benchmark_id} run 0: drawn[0]: x = nan: not a finite number",
        f"fay's review of exp-c/tcga item {unit1.benchmark_id} run 0: answer: 'maybe' is not one of "
        "('correct', 'partly', 'wrong')",
    ]
    pd.testing.assert_frame_equal(again, store.read("review_metrics"), check_dtype=False)


def test_the_old_demo_reviewers_files_in_the_real_review_are_left_out_and_named(tmp_path: Path) -> None:
    """A data folder from before the demo's own review folder still holds demo-a's and demo-b's scripted
    reviews under reviews/submitted/: pathologist_reviews leaves them out (also with demo: true, which
    reads the demo's folder instead), counts them and names the files to delete. A pathologist who
    happens to be called demo-b, with a comment of their own, still counts."""
    data = tmp_path / "data"
    files = ReviewFiles(data / "reviews")
    units = _units(files, "exp-d")[:3]
    write_queue(files, units)
    rated = {"regions": ["relevant", "partly"], "answer": "correct", "supports": "yes", "drawn": []}
    for unit in units:
        append_review(files, "ana", unit["unit"], rated | {"comment": ""})
        for old in ("demo-a", "demo-b"):  # what the demo wrote here before reviews-demo/ existed
            append_review(files, old, unit["unit"], rated | {"comment": f"scripted demo reviewer {old}"})
    append_review(files, "demo-b", units[0]["unit"], rated | {"comment": "checked on the slide"})
    for config in ({}, {"ops": {"pathologist_reviews": {"config": {"demo": True}}}}):
        instance = DagsterInstance.ephemeral()
        result = materialize(
            [pathologist_reviews], resources=resources_for(data), run_config=config, instance=instance
        )
        assert result.success
        reviews = ParquetStore(data).read("pathologist_reviews")
        assert sorted(zip(reviews.reviewer, reviews.comment, strict=True)) == [("ana", "")] * 3 + [
            ("demo-b", "checked on the slide")
        ]
        meta = result.asset_materializations_for_node("pathologist_reviews")[0].metadata
        assert meta["old_demo_reviews_left_out"].value == 6  # 3 units x 2 scripted reviewers
        named = f"{files.submitted('demo-a')} and {files.submitted('demo-b')}"
        warned = [e.user_message for e in instance.all_logs(result.run_id)]
        assert any("left out 6 reviews of the demo's scripted reviewers" in m and named in m for m in warned)
