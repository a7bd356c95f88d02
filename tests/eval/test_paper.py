"""The paper's Table 1 as data: complete, and consistent with the shipped per-benchmark leaderboards."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.eval.paper import paper_models, paper_results
from giant_assets.grading.leaderboards import reference_leaderboard
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

TABLE1 = ["GPT-5 + GIANT", "GPT-5 + GIANT x5", "TITAN (zero-shot)", "SlideChat (zero-shot)"]
BASELINES = ["GPT-5 thumbnail", "GPT-5 patch"]
BASELINE_BENCHMARKS = ["tcga", "gtex", "panda"]  # the VQA baseline cells are not known


def test_table1_models_have_every_benchmark_and_baselines_only_the_known_ones():
    table = paper_results()
    assert paper_models(table) == TABLE1[:2] + BASELINES + TABLE1[2:]  # the leaderboard's row order
    counts = table.groupby(["model", "benchmark"]).size()
    assert (counts == 1).all() and len(counts) == 4 * 5 + 2 * 3
    for model in TABLE1:
        assert sorted(table.loc[table["model"] == model, "benchmark"]) == sorted(BENCHMARK_NAMES)
    for model in BASELINES:
        assert table.loc[table["model"] == model, "benchmark"].tolist() == BASELINE_BENCHMARKS
    assert table["source"].str.startswith("arXiv 2511.19652").all()


def test_spot_values_from_the_paper():
    table = paper_results().set_index(["model", "benchmark"])[["mean", "std"]]
    assert tuple(table.loc[("GPT-5 + GIANT", "gtex")]) == (53.7, 3.4)
    assert tuple(table.loc[("GPT-5 + GIANT x5", "tcga_expert_vqa")]) == (62.5, 4.4)
    assert tuple(table.loc[("SlideChat (zero-shot)", "gtex")]) == (5.0, 0.0)


def test_baseline_values_from_multipathqa_md():
    table = paper_results().set_index(["model", "benchmark"])[["mean", "std"]]
    assert table.loc["GPT-5 thumbnail"].to_dict("index") == {
        "tcga": {"mean": 9.2, "std": 1.9},
        "gtex": {"mean": 36.5, "std": 3.4},
        "panda": {"mean": 12.2, "std": 2.2},
    }
    assert table.loc["GPT-5 patch"].to_dict("index") == {
        "tcga": {"mean": 12.8, "std": 2.1},
        "gtex": {"mean": 43.7, "std": 2.4},
        "panda": {"mean": 21.3, "std": 2.4},
    }


@pytest.mark.parametrize("benchmark", BENCHMARK_NAMES)
def test_agrees_with_the_leaderboard_csvs(benchmark):
    """The leaderboards were typed independently (fractions, with the text in ``source``)."""
    board = reference_leaderboard(benchmark).set_index("team")
    table = paper_results()
    rows = table[(table["benchmark"] == benchmark) & table["model"].isin(TABLE1)]
    assert sorted(rows["model"]) == sorted(board.index)
    for row in rows.itertuples():
        assert board.loc[row.model, "score"] == pytest.approx(row.mean / 100)
        mean, std = re.search(r"([\d.]+) ± ([\d.]+)", board.loc[row.model, "source"]).groups()
        assert (float(mean), float(std)) == (row.mean, row.std)


def test_bad_file_errors(tmp_path: Path):
    bad = tmp_path / "t.csv"
    bad.write_text("model,benchmark,mean,std\nm,nope,1.0,0.1\n")
    with pytest.raises(ValueError, match=r"t.csv: unknown benchmark name\(s\) \['nope'\]"):
        paper_results(bad)
    pd.DataFrame({"model": ["m"], "benchmark": ["tcga"], "mean": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['std'\]"):
        paper_results(bad)
    pd.DataFrame(
        {"model": ["m", "m"], "benchmark": ["tcga"] * 2, "mean": [1.0] * 2, "std": [0.1] * 2}
    ).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"t.csv: \(model, benchmark\) repeated in row\(s\) \[2, 3\]"):
        paper_results(bad)
    bad.write_text("model,benchmark,mean,std\nm,tcga,1.0,0.1\n")
    assert paper_results(bad)["source"].tolist() == [str(bad)]  # no source column: the file names it
