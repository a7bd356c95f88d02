"""The leaderboard: every experiment beside the paper's rows, per benchmark in the paper's ``mean ± std``.

Two shapes of one table, both built from ``benchmark_metrics`` rows (one per experiment and benchmark)
and the paper's results (:func:`giant_assets.eval.paper.paper_results`):

- long (:func:`leaderboard_long`): ``experiment, source, benchmark_name, mean, std,
  item_set_fingerprint``, one row per known cell (ours: the bootstrap mean and std in percent and the
  item set it was computed over; the paper: its Table 1 / baseline numbers, no fingerprint). It feeds
  the DuckDB view and the chart.
- wide (:func:`leaderboard_table`): one row per experiment (ours first, by name; then the paper's rows in
  the paper's order), one column per benchmark holding ``"mean ± std"`` (empty where unknown), item
  coverage (items scored of items in the benchmarks run, items answered), total cost (``cost_usd``: the
  stored runs' rows), what the provider billed (``cost_usd_billed``, every paid call of its cells) and of
  it what runs that do not count cost (``cost_usd_not_counted``), and ``item_set_fingerprint`` (over its
  cells' item sets, eval/itemsets.py: equal values, equal items).

Which rows come in (today's item set, declared experiments) is the caller's choice: see the
``leaderboard`` asset and :func:`giant_assets.eval.itemsets.split_current`; experiments of an agent that
answers no benchmark question (``UNSCORED_AGENTS``: the path review) are left out
(:func:`without_experiments`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pandas as pd

from giant_assets.benchmarks.declaration import name_problem
from giant_assets.benchmarks.registry import BUILT_IN_NAMES, ordered
from giant_assets.eval.itemsets import ITEM_SET, combined_fingerprint
from giant_assets.eval.paper import paper_models, paper_results

OURS, PAPER = "ours", "paper"
# agents whose runs answer with a review JSON, not an option: their benchmark_metrics (near zero: no
# option is extracted) are no result, so they get no leaderboard row and no paired comparison
UNSCORED_AGENTS = frozenset({"path_review"})
REQUIRED_COLUMNS = (
    "experiment",
    "benchmark_name",
    "n_items",
    "n_slide_readable",
    "boot_mean_pct",
    "boot_std_pct",
    "cost_usd",
)
LONG_COLUMNS = ("experiment", "source", "benchmark_name", "mean", "std", ITEM_SET)
# what the provider billed (every paid call) and, of it, what runs that do not count cost (scoring.py)
BILLED_COLUMNS = ("cost_usd_billed", "cost_usd_not_counted")
COUNT_COLUMNS = ("n_benchmarks", "n_items", "n_slide_readable", "n_answered")


def wide_columns(benchmarks: tuple[str, ...] = BUILT_IN_NAMES) -> tuple[str, ...]:
    """The wide table's columns: a column per benchmark between the model and the counts."""
    return (
        "experiment",
        "source",
        "agent",
        "model",
        *benchmarks,
        *COUNT_COLUMNS,
        "coverage",
        "cost_usd",
        *BILLED_COLUMNS,
        ITEM_SET,
    )


WIDE_COLUMNS = wide_columns()  # with the built-in benchmarks only


def benchmark_columns(table: pd.DataFrame) -> list[str]:
    """The benchmark columns of a wide table (those between ``model`` and the counts)."""
    columns = list(table.columns)
    return columns[columns.index("model") + 1 : columns.index(COUNT_COLUMNS[0])]


def unscored_experiments(agents: Mapping[str, str]) -> set[str]:
    """Of the experiments given as name -> agent, those of an agent in ``UNSCORED_AGENTS``."""
    return {name for name, agent in agents.items() if agent in UNSCORED_AGENTS}


def without_experiments(frame: pd.DataFrame, names: Collection[str]) -> pd.DataFrame:
    """``frame`` (rows with an ``experiment`` column) without the rows of ``names``."""
    if not names or "experiment" not in frame.columns:
        return frame
    return frame[~frame["experiment"].astype(str).isin(set(names))]


def _checked(benchmark_metrics: pd.DataFrame) -> pd.DataFrame:
    """The metrics rows, validated: required columns, benchmark names, one row per cell.

    A frame with no rows at all (no experiment has run yet) needs no columns.
    """
    if benchmark_metrics.empty and not len(benchmark_metrics.columns):
        benchmark_metrics = pd.DataFrame(columns=list(REQUIRED_COLUMNS))
    missing = [c for c in REQUIRED_COLUMNS if c not in benchmark_metrics.columns]
    if missing:
        raise ValueError(
            f"benchmark_metrics: missing column(s) {missing}; it has {list(benchmark_metrics.columns)}"
        )
    metrics = benchmark_metrics.assign(experiment=benchmark_metrics["experiment"].astype(str))
    bad = sorted({str(b) for b in metrics["benchmark_name"] if b not in BUILT_IN_NAMES and name_problem(b)})
    if bad:
        raise ValueError(f"benchmark_metrics: {name_problem(bad[0])}")
    repeated = metrics.duplicated(["experiment", "benchmark_name"], keep=False)
    if repeated.any():
        cells = metrics.loc[repeated, ["experiment", "benchmark_name"]].drop_duplicates()
        raise ValueError(
            f"benchmark_metrics: more than one row for (experiment, benchmark) "
            f"{list(cells.itertuples(index=False, name=None))[:5]}"
        )
    return metrics


def _benchmark_order(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame[column].map({name: i for i, name in enumerate(ordered(frame[column]))})


def _paper(paper: pd.DataFrame | None) -> pd.DataFrame:
    return paper_results() if paper is None else paper


def leaderboard_long(benchmark_metrics: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (experiment, benchmark) cell: ours (bootstrap mean/std, %) then the paper's."""
    metrics = _checked(benchmark_metrics)
    paper = _paper(paper)
    ours = pd.DataFrame(
        {
            "experiment": metrics["experiment"],
            "source": OURS,
            "benchmark_name": metrics["benchmark_name"],
            "mean": metrics["boot_mean_pct"].astype(float),
            "std": metrics["boot_std_pct"].astype(float),
            ITEM_SET: metrics.get(ITEM_SET),
        }
    )
    ours = ours.assign(order=_benchmark_order(ours, "benchmark_name")).sort_values(["experiment", "order"])
    theirs = pd.DataFrame(
        {
            "experiment": paper["model"],
            "source": PAPER,
            "benchmark_name": paper["benchmark"],
            "mean": paper["mean"].astype(float),
            "std": paper["std"].astype(float),
            ITEM_SET: None,
        }
    )
    model_rank = {name: i for i, name in enumerate(paper_models(paper))}
    theirs = theirs.assign(
        rank=theirs["experiment"].map(model_rank), order=_benchmark_order(theirs, "benchmark_name")
    )
    theirs = theirs.sort_values(["rank", "order"])
    return pd.concat([ours, theirs], ignore_index=True)[list(LONG_COLUMNS)]


def _cell(mean: float, std: float) -> str:
    """``"53.7 ± 3.4"``; empty when the mean is unknown (never a zero)."""
    if pd.isna(mean):
        return ""
    return f"{mean:.1f} ± {std:.1f}" if pd.notna(std) else f"{mean:.1f}"


def _joined(values: pd.Series) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values.dropna() if str(v)))


def _our_facts(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per experiment: agent, model, benchmarks run, items, items scored / answered, coverage, cost."""
    answered = metrics["n_answered"] if "n_answered" in metrics else pd.Series(pd.NA, index=metrics.index)
    frame = metrics.assign(n_answered=answered)
    for column in ("agent", "model"):
        frame[column] = frame[column] if column in metrics else ""
    grouped = frame.groupby("experiment", sort=True)
    facts = pd.DataFrame(
        {
            "agent": grouped["agent"].agg(_joined),
            "model": grouped["model"].agg(_joined),
            "n_benchmarks": grouped.size(),
            "n_items": grouped["n_items"].sum(),
            "n_slide_readable": grouped["n_slide_readable"].sum(),
            "n_answered": grouped["n_answered"].sum(min_count=1),
            # a cell of unknown cost (a model without a price) makes the experiment's unknown, not less
            "cost_usd": grouped["cost_usd"].agg(lambda cells: cells.astype(float).sum(skipna=False)),
            **_billed(frame, grouped),
        }
    )
    fingerprints = frame[ITEM_SET] if ITEM_SET in frame else pd.Series(None, index=frame.index)
    facts[ITEM_SET] = [
        combined_fingerprint(dict(zip(group["benchmark_name"], fingerprints[group.index], strict=True)))
        for _, group in grouped
    ]
    facts["coverage"] = [
        f"readable {row.n_slide_readable}/{row.n_items}"
        + ("" if pd.isna(row.n_answered) else f", answered {int(row.n_answered)}/{row.n_items}")
        for row in facts.itertuples()
    ]
    return facts.assign(source=OURS).set_index("source", append=True)


def _billed(frame: pd.DataFrame, grouped) -> dict[str, pd.Series]:
    """Per experiment, the sum of its cells' billed columns; NaN when a cell's bill is unknown (metrics
    rows from before these columns, or a cell without a journal), never an undercount."""
    return {
        column: grouped[column].agg(lambda cells: cells.astype(float).sum(skipna=False))
        if column in frame
        else pd.Series(float("nan"), index=grouped.size().index)
        for column in BILLED_COLUMNS
    }


def _paper_facts(models: list[str]) -> pd.DataFrame:
    """The paper's rows: the model name as the model; no counts, coverage or cost."""
    index = pd.MultiIndex.from_tuples([(m, PAPER) for m in models], names=["experiment", "source"])
    return pd.DataFrame(
        {"agent": "", "model": models, "coverage": "", "cost_usd": float("nan"), ITEM_SET: None}
        | dict.fromkeys(BILLED_COLUMNS, float("nan")),
        index=index,
    )


def leaderboard_table(benchmark_metrics: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per experiment (``source`` "ours") plus the paper's rows (``source`` "paper").

    Benchmark columns (the five built-ins, then every other benchmark with results) hold ``"mean ± std"``
    (percent, one decimal; empty where unknown). ``n_items`` sums
    the items of the benchmarks the experiment ran, ``n_slide_readable`` those with a readable slide,
    ``n_answered`` those with an answer (NA when the metrics rows lack ``n_answered``); ``coverage``
    says the same in words; ``item_set_fingerprint`` combines its cells' item sets. The paper's rows have
    no counts, cost or fingerprint.
    """
    metrics = _checked(benchmark_metrics)
    paper = _paper(paper)
    long = leaderboard_long(metrics, paper)
    long["cell"] = [_cell(m, s) for m, s in zip(long["mean"], long["std"], strict=True)]
    cells = long.pivot(index=["experiment", "source"], columns="benchmark_name", values="cell")
    facts = pd.concat([_our_facts(metrics), _paper_facts(paper_models(paper))])
    benchmarks = tuple(ordered([*BUILT_IN_NAMES, *metrics["benchmark_name"].astype(str)]))
    wide = facts.join(cells.reindex(columns=list(benchmarks)), how="left").reset_index()
    for column in benchmarks:
        wide[column] = wide[column].fillna("")
    for column in COUNT_COLUMNS:
        wide[column] = wide[column].astype("Int64")
    for column in ("cost_usd", *BILLED_COLUMNS):
        wide[column] = wide[column].astype(float)
    return wide[list(wide_columns(benchmarks))]


def leaderboard_markdown(table: pd.DataFrame) -> str:
    """The wide table as a Markdown pipe table (for asset metadata): benchmarks, coverage, cost."""
    shown = pd.DataFrame({"experiment": table["experiment"], "source": table["source"]})
    for name in benchmark_columns(table):
        shown[name] = table[name]
    shown["coverage"] = table["coverage"].fillna("")
    shown["cost"] = [f"${cost:,.2f}" if pd.notna(cost) else "" for cost in table["cost_usd"]]
    nan = pd.Series(float("nan"), index=table.index)  # a table written before these columns
    billed, lost = (table.get(column, nan) for column in BILLED_COLUMNS)
    shown["billed"] = [
        f"${b:,.2f} (${n:,.2f} not counted)" if pd.notna(b) else "" for b, n in zip(billed, lost, strict=True)
    ]
    header = "| " + " | ".join(shown.columns) + " |"
    rule = "|" + "|".join("---" for _ in shown.columns) + "|"
    lines = [header, rule]
    for row in shown.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)
