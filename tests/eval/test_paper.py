"""The paper's Table 1 as data: complete, and consistent with the shipped per-benchmark leaderboards."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.eval.paper import paper_results
from giant_assets.grading.leaderboards import reference_leaderboard
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

MODELS = ["GPT-5 + GIANT", "GPT-5 + GIANT x5", "TITAN (zero-shot)", "SlideChat (zero-shot)"]


def test_every_model_has_every_benchmark_once():
    table = paper_results()
    assert sorted(table["model"].unique()) == sorted(MODELS)
    counts = table.groupby(["model", "benchmark"]).size()
    assert len(counts) == 4 * 5 and (counts == 1).all()
    assert set(table["benchmark"]) == set(BENCHMARK_NAMES)


def test_spot_values_from_the_paper():
    table = paper_results().set_index(["model", "benchmark"])
    assert tuple(table.loc[("GPT-5 + GIANT", "gtex")]) == (53.7, 3.4)
    assert tuple(table.loc[("GPT-5 + GIANT x5", "tcga_expert_vqa")]) == (62.5, 4.4)
    assert tuple(table.loc[("SlideChat (zero-shot)", "gtex")]) == (5.0, 0.0)


@pytest.mark.parametrize("benchmark", BENCHMARK_NAMES)
def test_agrees_with_the_leaderboard_csvs(benchmark):
    """The leaderboards were typed independently (fractions, with the text in ``source``)."""
    board = reference_leaderboard(benchmark).set_index("team")
    table = paper_results()
    for row in table[table["benchmark"] == benchmark].itertuples():
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
