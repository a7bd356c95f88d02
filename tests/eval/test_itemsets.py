"""Which results are over today's items: status per cell, the set-aside rows and what they say to run."""

from __future__ import annotations

import pandas as pd
import pytest

from giant_assets.eval.comparisons import experiment_comparisons
from giant_assets.eval.itemsets import (
    SET_ASIDE_COLUMNS,
    combined_fingerprint,
    current_item_sets,
    foreign_runs,
    foreign_runs_error,
    set_aside_markdown,
    split_current,
)
from giant_assets.multipathqa.fingerprint import item_set_fingerprint


def items(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["benchmark_name", "benchmark_id", "item_fingerprint", "truth_label"])


TODAY = items([("gtex", "a", "fa", 1), ("gtex", "b", "fb", 2), ("tcga", "c", "fc", 0)])
GTEX_NOW = item_set_fingerprint(TODAY[TODAY["benchmark_name"] == "gtex"])
GTEX_BEFORE = item_set_fingerprint(items([("gtex", "a", "fa", 1)]))  # the 1-item CSV used before
TCGA_NOW = item_set_fingerprint(TODAY[TODAY["benchmark_name"] == "tcga"])


def metrics(rows: list[tuple[str, str, int, str | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["experiment", "benchmark_name", "n_items", "item_set_fingerprint"])


def test_current_item_sets_are_per_benchmark_and_need_item_fingerprints():
    assert current_item_sets(TODAY) == {"gtex": GTEX_NOW, "tcga": TCGA_NOW}
    assert current_item_sets(TODAY.iloc[::-1]) == {"gtex": GTEX_NOW, "tcga": TCGA_NOW}
    with pytest.raises(ValueError, match="no item_fingerprint column .* materialize benchmark_items again"):
        current_item_sets(TODAY.drop(columns="item_fingerprint"))


def test_only_current_cells_of_declared_experiments_are_kept_the_rest_says_what_to_run():
    frame = metrics(
        [
            ("a", "gtex", 2, GTEX_NOW),
            ("a", "tcga", 1, TCGA_NOW),
            ("b", "gtex", 1, GTEX_BEFORE),  # computed over the earlier CSV
            ("c", "tcga", 1, None),  # computed before fingerprints
            ("gone", "tcga", 1, TCGA_NOW),  # current items, but no longer declared
            ("a", "panda", 4, "f" * 64),  # no panda items today
        ]
    )
    kept, aside = split_current(frame, TODAY, declared={"a", "b", "c"}, experiments_file="exp.yaml")
    assert kept[["experiment", "benchmark_name"]].values.tolist() == [["a", "gtex"], ["a", "tcga"]]
    assert list(aside.columns) == list(SET_ASIDE_COLUMNS)
    assert aside[["partition", "status", "n_items", "n_items_now"]].values.tolist() == [
        ["panda|a", "stale", 4, 0],
        ["gtex|b", "stale", 1, 2],
        ["tcga|c", "stale", 1, 1],
        ["tcga|gone", "removed", 1, 1],
    ]
    by = aside.set_index("partition")
    assert by.loc["gtex|b", "item_set_fingerprint"] == GTEX_BEFORE
    assert by.loc["gtex|b", "current_item_set_fingerprint"] == GTEX_NOW
    assert by.loc["gtex|b", "reason"] == (
        f"computed over another item set (1 items, {GTEX_BEFORE[:12]}); today's has 2 items ({GTEX_NOW[:12]})"
    )
    assert by.loc["gtex|b", "rerun"].endswith(
        '--select predictions,trajectory_steps,item_predictions,benchmark_metrics --partition "gtex|b"'
    )
    assert by.loc["tcga|c", "reason"] == "computed before item sets were fingerprinted"
    assert pd.isna(by.loc["tcga|c", "item_set_fingerprint"])
    assert by.loc["panda|a", "rerun"].startswith("nothing to re-run")
    assert by.loc["tcga|gone", "reason"] == "experiment no longer declared in exp.yaml"
    assert "giant-experiments prune" in by.loc["tcga|gone", "rerun"]
    listed = set_aside_markdown(aside).splitlines()
    assert len(listed) == 4 + 3  # one line per cell, one backfill per experiment with stale cells
    assert listed[-1] == (
        "- all of `c` at once (a backfill, needs the daemon): dagster job backfill -m "
        'giant_assets.platform.definitions -j evaluate_cell --noprompt --partitions "tcga|c"'
    )
    assert set_aside_markdown(aside.iloc[:0]) == "none: every result is over today's items"
    _, everyone = split_current(frame, TODAY, declared=None)  # no declared list: nothing is removed
    assert "removed" not in set(everyone["status"])


def test_per_item_rows_are_set_aside_once_per_cell_counting_their_items():
    rows = pd.DataFrame(
        {
            "experiment": ["x", "x", "y", "y"],
            "benchmark_name": ["gtex"] * 4,
            "benchmark_id": ["a", "b", "a", "b"],
            "item_set_fingerprint": [GTEX_NOW, GTEX_NOW, GTEX_BEFORE, GTEX_BEFORE],
        }
    )
    kept, aside = split_current(rows, TODAY, declared={"x", "y"})
    assert kept["experiment"].tolist() == ["x", "x"]
    assert aside[["partition", "n_items"]].values.tolist() == [["gtex|y", 2]]


def test_combined_fingerprint_ignores_order_and_missing_cells():
    assert combined_fingerprint({"gtex": "1", "tcga": "2"}) == combined_fingerprint(
        {"tcga": "2", "gtex": "1"}
    )
    assert combined_fingerprint({"gtex": "1", "tcga": None}) == combined_fingerprint({"gtex": "1"})
    assert combined_fingerprint({"gtex": "1"}) != combined_fingerprint({"gtex": "2"})
    assert combined_fingerprint({"gtex": None}) is None


def test_comparisons_refuse_rows_of_different_item_sets_and_name_the_one_they_use():
    frame = pd.DataFrame(
        {
            "experiment": ["x", "x", "y", "y"],
            "benchmark_name": ["tcga"] * 4,
            "benchmark_id": ["1", "2", "1", "2"],
            "metric_type": ["balanced_accuracy"] * 4,
            "truth_label": [0, 1, 0, 1],
            "predicted_label": [0, 1, 1, 1],
            "item_set_fingerprint": ["s1"] * 4,
        }
    )
    assert experiment_comparisons(frame, n_replicates=50)["item_set_fingerprint"].tolist() == ["s1"]
    mixed = frame.assign(item_set_fingerprint=["s1", "s1", "s2", "s2"])
    with pytest.raises(ValueError, match=r"different item sets \{'x': 's1', 'y': 's2'\}: compare one"):
        experiment_comparisons(mixed, n_replicates=50)


def test_runs_answering_other_items_than_todays_are_found():
    today = TODAY.assign(question_fingerprint=["qa", "qb", "qc"])
    runs = pd.DataFrame(
        {
            "benchmark_name": ["gtex"] * 7,
            "benchmark_id": ["a", "a", "b", "zz", "b", "a", "a"],
            "truth_label": [1, 1, 3, 0, 2, 1, 1],  # b: label 3 then, 2 now (the first of two runs of b)
            "question_fingerprint": ["qa", None, "qb", None, "qb-old", "qa", "qa"],  # None: recorded before
            "item_fingerprint": ["fa", None, "fb", None, "fb", "fa-old", "fa-old"],  # fa-old: another slide
            "slide_verified": [True, True, True, True, True, True, False],  # False: kept, slide unreadable
        }
    )
    foreign = foreign_runs(runs, today)
    assert foreign.values.tolist() == [
        ["b", "truth label 3 then, 2 now"],
        ["zz", "not in today's items"],
        ["b", "another question"],
        ["a", "another slide"],
    ]
    older = runs.drop(columns=["question_fingerprint", "item_fingerprint", "slide_verified"])
    assert foreign_runs(older, today)["benchmark_id"].tolist() == ["b", "zz"]
    assert foreign_runs(runs.iloc[:2], today).empty
    line = foreign_runs_error("m", "gtex", foreign, 7)
    assert line.startswith("predictions of m/gtex: 4 of 7 stored runs answer items that are not today's")
    assert "(item 'b': truth label 3 then, 2 now)" in line and line.endswith('--partition "gtex|m"')
    assert "\n" not in line


def test_many_stale_demo_cells_are_listed_once_with_what_to_do():
    """After a switch from the sample CSV, 4 demo experiments x 2 benchmarks are stale: one line says
    so, with one backfill of all of them and how to drop them; removed cells keep their own lines."""
    demo = [f"demo-{n}" for n in ("giant", "patch", "thumbnail", "random")]
    frame = metrics(
        [(e, b, 1, "e" * 64) for e in demo for b in ("gtex", "tcga")] + [("gone", "tcga", 1, TCGA_NOW)]
    )
    _, aside = split_current(frame, TODAY, declared=set(demo), experiments_file="exp.yaml")
    assert len(aside) == 9
    listed = set_aside_markdown(aside).splitlines()
    assert len(listed) == 2 and listed[1].startswith("- `tcga|gone` removed: ")
    head = listed[0]
    assert head.startswith(
        "- 8 cells of 4 experiment(s) (demo-giant, demo-patch, demo-random, demo-thumbnail)"
    )
    assert "dagster asset materialize" not in head and head.count("dagster job backfill") == 1
    partitions = head.split('--partitions "')[1].split('"')[0].split(",")
    assert sorted(partitions) == sorted(f"{b}|{e}" for e in demo for b in ("gtex", "tcga"))
    assert "giant-experiments prune" in head
