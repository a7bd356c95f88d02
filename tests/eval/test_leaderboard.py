"""Leaderboard: our experiments beside the paper's rows, wide and long, and its Markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from giant_assets.eval.bootstrap import bootstrap_metric
from giant_assets.eval.leaderboard import (
    BILLED_COLUMNS,
    LONG_COLUMNS,
    WIDE_COLUMNS,
    leaderboard_long,
    leaderboard_markdown,
    leaderboard_table,
)
from giant_assets.eval.paper import paper_results
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

PAPER_ORDER = [
    "GPT-5 + GIANT",
    "GPT-5 + GIANT x5",
    "GPT-5 thumbnail",
    "GPT-5 patch",
    "TITAN (zero-shot)",
    "SlideChat (zero-shot)",
]


def metrics_row(experiment: str, benchmark: str, mean: float, std: float, **extra) -> dict:
    row = {
        "experiment": experiment,
        "benchmark_name": benchmark,
        "metric_type": "accuracy",
        "n_items": 10,
        "n_slide_readable": 9,
        "n_answered": 8,
        "boot_mean_pct": mean,
        "boot_std_pct": std,
        "cost_usd": 1.25,
        "agent": "giant",
        "model": "gpt-5",
    }
    return row | extra


def example_metrics() -> pd.DataFrame:
    return pd.DataFrame(
        [
            metrics_row("zz-random", "tcga", 3.349, 1.25, agent="random", model="", cost_usd=0.0),
            metrics_row("zz-random", "gtex", 5.0, 1.04, agent="random", model="", cost_usd=0.0),
            metrics_row(
                "gpt5-giant", "tcga_expert_vqa", 57.04, 4.46, n_items=128, n_slide_readable=76, n_answered=70
            ),
            metrics_row(
                "gpt5-giant", "panda", 23.15, 2.35, n_items=197, n_slide_readable=197, n_answered=190
            ),
        ]
    )


def test_wide_table_rows_cells_coverage_and_cost():
    table = leaderboard_table(example_metrics())
    assert list(table.columns) == list(WIDE_COLUMNS)
    assert table["experiment"].tolist() == ["gpt5-giant", "zz-random", *PAPER_ORDER]
    assert table["source"].tolist() == ["ours"] * 2 + ["paper"] * 6
    ours = table.set_index("experiment")
    assert ours.loc["gpt5-giant", list(BENCHMARK_NAMES)].tolist() == ["", "", "23.1 ± 2.4", "", "57.0 ± 4.5"]
    assert ours.loc["zz-random", ["tcga", "gtex"]].tolist() == ["3.3 ± 1.2", "5.0 ± 1.0"]
    giant = ours.loc["gpt5-giant"]
    assert (giant["n_benchmarks"], giant["n_items"], giant["n_slide_readable"], giant["n_answered"]) == (
        2,
        325,
        273,
        260,
    )
    assert giant["coverage"] == "readable 273/325, answered 260/325"
    assert giant["cost_usd"] == pytest.approx(2.5)
    assert (giant["agent"], giant["model"]) == ("giant", "gpt-5")
    assert ours.loc["zz-random", "cost_usd"] == 0.0 and ours.loc["zz-random", "model"] == ""


def test_paper_rows_equal_the_reference_and_unknown_cells_stay_empty():
    table = leaderboard_table(example_metrics()).set_index("experiment")
    for row in paper_results().itertuples():
        assert table.loc[row.model, row.benchmark] == f"{row.mean:.1f} ± {row.std:.1f}"
    for baseline in ("GPT-5 thumbnail", "GPT-5 patch"):
        assert table.loc[baseline, ["tcga_slidebench", "tcga_expert_vqa"]].tolist() == ["", ""]
    assert table.loc["GPT-5 thumbnail", "tcga"] == "9.2 ± 1.9"
    paper = table[table["source"] == "paper"]
    assert paper[["n_benchmarks", "n_items", "n_slide_readable", "n_answered"]].isna().all().all()
    assert paper["cost_usd"].isna().all() and (paper["coverage"] == "").all()
    assert paper["model"].tolist() == PAPER_ORDER


def test_long_form_holds_the_same_numbers_as_the_wide_table():
    metrics = example_metrics()
    long = leaderboard_long(metrics)
    assert list(long.columns) == list(LONG_COLUMNS)
    assert len(long) == len(metrics) + len(paper_results())
    assert long[long["source"] == "ours"][["experiment", "benchmark_name"]].values.tolist() == [
        ["gpt5-giant", "panda"],
        ["gpt5-giant", "tcga_expert_vqa"],
        ["zz-random", "tcga"],
        ["zz-random", "gtex"],
    ]
    wide = leaderboard_table(metrics).set_index(["experiment", "source"])
    for row in long.itertuples():
        assert wide.loc[(row.experiment, row.source), row.benchmark_name] == f"{row.mean:.1f} ± {row.std:.1f}"
    cell = (long["experiment"] == "zz-random") & (long["benchmark_name"] == "tcga")
    assert long.loc[cell, "mean"].item() == 3.349


def test_cells_are_the_bootstrap_in_the_paper_format():
    """Rows carrying a real bootstrap (as benchmark_metrics does): the cell is BootstrapResult.format()."""
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 4, 30)
    rows, formats = [], {}
    for experiment, hit_rate in (("a-weak", 0.3), ("b-strong", 0.8)):
        pred = np.where(rng.random(30) < hit_rate, truth, (truth + 1) % 4)
        boot = bootstrap_metric(truth, pred, "accuracy").as_percent()
        formats[experiment] = bootstrap_metric(truth, pred, "accuracy").format()
        rows.append(metrics_row(experiment, "tcga_slidebench", boot.mean, boot.std, n_answered=pd.NA))
    table = leaderboard_table(pd.DataFrame(rows)).set_index("experiment")
    for experiment, text in formats.items():
        assert table.loc[experiment, "tcga_slidebench"] == text
    assert formats["a-weak"] != formats["b-strong"]
    assert table.loc["a-weak", "coverage"] == "readable 9/10"  # no n_answered known: not claimed
    assert pd.isna(table.loc["a-weak", "n_answered"])
    no_column = leaderboard_table(pd.DataFrame(rows).drop(columns="n_answered")).set_index("experiment")
    assert no_column.loc["b-strong", "coverage"] == "readable 9/10" and pd.isna(
        no_column.loc["b-strong", "n_answered"]
    )


def test_no_experiments_yet_gives_the_paper_rows_only():
    table = leaderboard_table(pd.DataFrame())
    assert table["experiment"].tolist() == PAPER_ORDER
    assert len(leaderboard_long(pd.DataFrame())) == len(paper_results())


def test_a_custom_paper_frame_replaces_the_reference():
    paper = pd.DataFrame(
        {"model": ["M"], "benchmark": ["gtex"], "mean": [50.0], "std": [2.0], "source": ["x"]}
    )
    table = leaderboard_table(example_metrics(), paper=paper)
    assert table["experiment"].tolist() == ["gpt5-giant", "zz-random", "M"]
    assert table.set_index("experiment").loc["M", "gtex"] == "50.0 ± 2.0"


def test_markdown_has_one_line_per_row_with_the_table_cells():
    table = leaderboard_table(example_metrics())
    lines = leaderboard_markdown(table).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["experiment", "source", *BENCHMARK_NAMES, "coverage", "cost", "billed"]
    assert set(lines[1]) <= {"|", "-"}
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert len(body) == len(table)
    for cells, row in zip(body, table.itertuples(index=False), strict=True):
        assert cells[:2] == [row.experiment, row.source]
        assert cells[2:7] == [getattr(row, b) for b in BENCHMARK_NAMES]
        assert cells[8] == ("" if pd.isna(row.cost_usd) else f"${row.cost_usd:,.2f}")
    assert body[0][7:] == ["readable 273/325, answered 260/325", "$2.50", ""]  # rows without a bill
    piped = leaderboard_table(pd.DataFrame([metrics_row("a|b", "tcga", 1.0, 0.5)]))
    assert "| a\\|b | ours |" in leaderboard_markdown(piped)


def test_billed_columns_sum_each_experiments_cells_and_never_undercount():
    metrics = example_metrics()
    metrics["cost_usd_billed"] = [0.0, 0.0, 1.5, 2.25]
    metrics["cost_usd_not_counted"] = [0.0, 0.0, 0.25, 1.0]
    table = leaderboard_table(metrics).set_index("experiment")
    assert table.loc["gpt5-giant", "cost_usd"] == 2.5  # the counted rows, as before
    assert table.loc["gpt5-giant", "cost_usd_billed"] == 3.75
    assert table.loc["gpt5-giant", "cost_usd_not_counted"] == 1.25
    assert table.loc["zz-random", "cost_usd_billed"] == 0.0
    assert table.loc[PAPER_ORDER, "cost_usd_billed"].isna().all()
    assert "| $2.50 | $3.75 ($1.25 not counted) |" in leaderboard_markdown(table.reset_index())
    metrics.loc[3, "cost_usd_billed"] = float("nan")  # one cell's bill unknown (no journal)
    unknown = leaderboard_table(metrics).set_index("experiment")
    assert np.isnan(unknown.loc["gpt5-giant", "cost_usd_billed"])
    older = leaderboard_table(example_metrics()).drop(columns=list(BILLED_COLUMNS))  # a table from before
    assert leaderboard_markdown(older).splitlines()[2].endswith("| $2.50 |  |")
    assert unknown.loc["gpt5-giant", "cost_usd_not_counted"] == 1.25


def test_bad_metrics_rows_fail_clearly():
    metrics = example_metrics()
    with pytest.raises(ValueError, match=r"benchmark_metrics: missing column\(s\) \['experiment'\]"):
        leaderboard_table(metrics.drop(columns="experiment"))
    # any benchmark name is a column (declared benchmarks), but only a name that could be a partition
    with pytest.raises(ValueError, match=r"'TCGA typo' is not a benchmark name"):
        leaderboard_table(pd.concat([metrics, pd.DataFrame([metrics_row("x", "TCGA typo", 1, 1)])]))
    with pytest.raises(
        ValueError, match=r"more than one row for \(experiment, benchmark\) \[\('zz-random', 'tcga'\)"
    ):
        leaderboard_long(pd.concat([metrics, metrics.iloc[:1]]))


def test_an_unknown_cost_or_mean_is_shown_as_unknown_never_as_zero():
    """A cell of a model without a price (``cost_usd`` NaN) makes the experiment's cost unknown, not the
    sum of the others (mutation: ``skipna=True`` reports $1.25); a cell without a value (a benchmark with no
    items: NaN mean) is an empty cell, not ``0.0 ± 0.0``."""
    metrics = example_metrics()
    metrics.loc[3, "cost_usd"] = float("nan")  # gpt5-giant's panda cell has no price
    metrics.loc[3, ["boot_mean_pct", "boot_std_pct"]] = float("nan")
    table = leaderboard_table(metrics).set_index("experiment")
    assert np.isnan(table.loc["gpt5-giant", "cost_usd"])
    assert table.loc["gpt5-giant", "panda"] == ""
    assert table.loc["gpt5-giant", "tcga_expert_vqa"] == "57.0 ± 4.5"
    assert table.loc["zz-random", "cost_usd"] == 0.0
    line = next(row for row in leaderboard_markdown(table.reset_index()).splitlines() if "gpt5-giant" in row)
    assert "$" not in line.split("|")[-3]  # the cost column of the Markdown is empty, not "$nan" or "$0.00"
