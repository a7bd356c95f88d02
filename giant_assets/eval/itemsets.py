"""Which results were computed over today's items, and which are set aside with what to re-run.

Every per-cell result (``item_predictions``, ``benchmark_metrics``) carries ``item_set_fingerprint``: the
fingerprint (multipathqa/fingerprint.py) of the benchmark's items it was scored over. A benchmark's
CURRENT item set is that of today's ``benchmark_items``. Tables across experiments (the leaderboard, its
long form, the comparisons) keep only cells that are current and whose experiment is still declared;
every other cell is set aside, one row per (experiment, benchmark), with its status and what to do:

- ``stale``: computed over another item set (another CSV, a changed question, slide or label) or before
  item sets were fingerprinted (no fingerprint): re-run the cell (``rerun`` is the command);
- ``removed``: the experiment, or the declared benchmark, is no longer declared in the experiments file:
  declare it again to show and re-score it, or ``giant-experiments prune`` to drop its partitions (its
  files stay).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

import pandas as pd

from giant_assets.core.settings import SUPERSEDED_WARNING_FILTER
from giant_assets.multipathqa.fingerprint import item_set_fingerprint

ITEM_SET = "item_set_fingerprint"
CURRENT, STALE, REMOVED = "current", "stale", "removed"
CELL_ASSETS = "predictions,trajectory_steps,item_predictions,benchmark_metrics"
DEFINITIONS = "giant_assets.platform.definitions"
SET_ASIDE_COLUMNS = (
    "experiment",
    "benchmark_name",
    "status",  # stale | removed
    ITEM_SET,  # the item set the stored result was computed over (None: before fingerprints)
    "current_item_set_fingerprint",  # today's item set of the benchmark (None: no such items today)
    "n_items",  # items the stored result covers
    "n_items_now",  # items of the benchmark today
    "partition",  # the Dagster partition key of the cell, "<benchmark>|<experiment>"
    "reason",
    "rerun",  # what to run to bring the cell back
)


def current_item_sets(benchmark_items: pd.DataFrame) -> dict[str, str]:
    """benchmark name -> fingerprint of its items in ``benchmark_items`` (today's item set)."""
    if "item_fingerprint" not in benchmark_items.columns:
        raise ValueError(
            "benchmark_items has no item_fingerprint column (written by an older version): "
            "materialize benchmark_items again"
        )
    return {
        str(name): item_set_fingerprint(group)
        for name, group in benchmark_items.groupby("benchmark_name", sort=True)
    }


def combined_fingerprint(cells: Mapping[str, str | None]) -> str | None:
    """sha256 hex over sorted (benchmark, item set) pairs: one value for a row spanning benchmarks."""
    pairs = sorted((str(b), str(fp)) for b, fp in cells.items() if isinstance(fp, str) and fp)
    if not pairs:
        return None
    return hashlib.sha256(json.dumps(["item_sets", pairs]).encode("utf-8")).hexdigest()


def _fingerprints(frame: pd.DataFrame) -> pd.Series:
    if ITEM_SET not in frame.columns:
        return pd.Series(None, index=frame.index, dtype=object)
    return frame[ITEM_SET].map(lambda v: v if isinstance(v, str) and v else None).astype(object)


def cell_status(
    frame: pd.DataFrame,
    current: Mapping[str, str],
    declared: Collection[str] | None,
    benchmarks: Collection[str] | None = None,
) -> pd.Series:
    """Per row of ``frame`` (experiment, benchmark_name, item_set_fingerprint): current, stale or removed.

    ``declared`` None: every experiment counts as declared; ``benchmarks`` (the registry's names) None:
    every benchmark does, else a row of another benchmark (a removed declaration) is removed.
    """
    fps = _fingerprints(frame)
    wanted = frame["benchmark_name"].astype(str).map(current)
    stale = fps.isna() | wanted.isna() | (fps != wanted)
    status = pd.Series(CURRENT, index=frame.index, dtype=object).mask(stale, STALE)
    if benchmarks is not None:
        status = status.mask(~frame["benchmark_name"].astype(str).isin(set(benchmarks)), REMOVED)
    if declared is not None:
        status = status.mask(~frame["experiment"].astype(str).isin(set(declared)), REMOVED)
    return status


def dagster_executable() -> str:
    """This environment's ``dagster``, runnable from any shell (the venv need not be on PATH): its absolute
    path beside the interpreter, else ``python -m dagster`` with this interpreter's absolute path."""
    beside = Path(sys.executable).parent / "dagster"
    if beside.is_file():
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m dagster"


def rerun_command(experiment: str, benchmark: str) -> str:
    """The shell command that recomputes one cell of the results grid over today's items; it sets the
    warnings filter itself, so that pasted into any shell it prints no SupersessionWarning."""
    return (
        f"PYTHONWARNINGS={shlex.quote(SUPERSEDED_WARNING_FILTER)} "
        f"{dagster_executable()} asset materialize -m {DEFINITIONS} --select {CELL_ASSETS} "
        f'--partition "{benchmark}|{experiment}"'
    )


def _reason(
    status: str, fp: str | None, now: str | None, benchmark: str, n: int, m: int, file: str, gone: bool
) -> str:
    """``gone``: the cell's experiment is still declared, so what was removed is its benchmark."""
    if status == REMOVED and gone:
        return f"benchmark {benchmark!r} no longer declared in {file or 'the experiments file'}"
    if status == REMOVED:
        return f"experiment no longer declared in {file or 'the experiments file'}"
    if now is None:
        return f"today's items have no {benchmark} items"
    if fp is None:
        return "computed before item sets were fingerprinted"
    return f"computed over another item set ({n} items, {fp[:12]}); today's has {m} items ({now[:12]})"


def _rerun(status: str, experiment: str, benchmark: str, now: str | None, file: str, gone: bool) -> str:
    if status == REMOVED and gone:
        return (
            f"declare benchmark {benchmark!r} again in {file or 'the experiments file'} (then materialize "
            "benchmark_items) to show it, or `giant-experiments prune` to drop its partitions (files stay)"
        )
    if status == REMOVED:
        return (
            f"declare {experiment!r} again in {file or 'the experiments file'} (its settings: "
            f"data/experiments/{experiment}.json) to show and re-score it, or `giant-experiments prune` "
            "to drop its partitions (its files stay)"
        )
    if now is None:
        return "nothing to re-run: the benchmark is not in today's items"
    return rerun_command(experiment, benchmark)


def split_current(
    frame: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    declared: Collection[str] | None,
    experiments_file: str = "",
    benchmarks: Collection[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows of current cells of declared experiments and benchmarks, one set-aside row per other cell).

    ``frame``: ``benchmark_metrics`` rows (one per cell, with ``n_items``) or ``item_predictions`` rows
    (one per item); ``benchmarks``: the benchmarks declared now (None: every one counts as declared). The
    set-aside rows have SET_ASIDE_COLUMNS, ordered by experiment and benchmark.
    """
    current = current_item_sets(benchmark_items)
    counts = benchmark_items["benchmark_name"].astype(str).value_counts().to_dict()
    if frame.empty:
        return frame, pd.DataFrame(columns=list(SET_ASIDE_COLUMNS))
    status = cell_status(frame, current, declared, benchmarks)
    kept = frame[status == CURRENT].reset_index(drop=True)
    aside = frame.assign(_status=status, _fp=_fingerprints(frame))[status != CURRENT]
    rows = []
    for (experiment, benchmark), group in aside.groupby(["experiment", "benchmark_name"], sort=True):
        experiment, benchmark = str(experiment), str(benchmark)
        state, fp, now = group["_status"].iloc[0], group["_fp"].iloc[0], current.get(benchmark)
        fp = fp if isinstance(fp, str) else None
        gone = benchmarks is not None and benchmark not in benchmarks
        gone = gone and (declared is None or experiment in declared)
        n = int(group["n_items"].iloc[0]) if "n_items" in group else len(group)
        m = int(counts.get(benchmark, 0))
        rows.append(
            {
                "experiment": experiment,
                "benchmark_name": benchmark,
                "status": state,
                ITEM_SET: fp,
                "current_item_set_fingerprint": now,
                "n_items": n,
                "n_items_now": m,
                "partition": f"{benchmark}|{experiment}",
                "reason": _reason(state, fp, now, benchmark, n, m, experiments_file, gone),
                "rerun": _rerun(state, experiment, benchmark, now, experiments_file, gone),
            }
        )
    return kept, pd.DataFrame(rows, columns=list(SET_ASIDE_COLUMNS))


def _differs(merged: pd.DataFrame, column: str) -> pd.Series:
    """Rows where both sides record ``column`` and the values differ (all False without the column)."""
    if column not in merged.columns:
        return pd.Series(False, index=merged.index)
    then, now = merged[column], merged[f"{column}_now"]
    return then.notna() & now.notna() & (then != now)


def foreign_runs(predictions: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Runs of ``predictions`` that answer an item other than today's, with ``why``: an id no longer in
    ``items``, another truth label, another question, or another slide (fingerprints compared where both
    record one; a run kept while its slide could not be read, ``slide_verified`` False, is not compared
    by slide). Columns: benchmark_id, why."""
    keys = ["benchmark_name", "benchmark_id"]
    prints = [c for c in ("question_fingerprint", "item_fingerprint") if c in predictions and c in items]
    verified = ["slide_verified"] if "slide_verified" in predictions.columns else []
    runs = predictions[[*keys, "truth_label", *prints, *verified]].astype({"benchmark_id": str})
    today = items[[*keys, "truth_label", *prints]].astype({"benchmark_id": str})
    merged = runs.merge(today, on=keys, how="left", suffixes=("", "_now"), indicator=True)
    gone = merged["_merge"] == "left_only"
    relabelled = ~gone & (merged["truth_label"] != merged["truth_label_now"])
    asked, slide = _differs(merged, "question_fingerprint"), _differs(merged, "item_fingerprint")
    if verified:
        slide &= merged["slide_verified"].fillna(True).astype(bool)
    why = pd.Series(None, index=merged.index, dtype=object)
    why[slide] = "another slide"
    why[asked] = "another question"
    for i in merged.index[relabelled]:
        why[i] = f"truth label {merged.at[i, 'truth_label']} then, {int(merged.at[i, 'truth_label_now'])} now"
    why[gone] = "not in today's items"
    foreign = why.notna()
    return pd.DataFrame(
        {"benchmark_id": merged.loc[foreign, "benchmark_id"], "why": why[foreign]}
    ).reset_index(drop=True)


def foreign_runs_error(experiment: str, benchmark: str, foreign: pd.DataFrame, n_runs: int) -> str:
    """One line: the cell's stored runs answer other items than today's, and the command to re-run it."""
    first = foreign.iloc[0]
    return (
        f"predictions of {experiment}/{benchmark}: {len(foreign)} of {n_runs} stored runs answer items that "
        f"are not today's (item {first['benchmark_id']!r}: {first['why']}); they were computed over another "
        "item set, so they cannot be re-scored against it. Re-run the cell: "
        + rerun_command(experiment, benchmark)
    )


STALE_LISTED_PER_CELL = 3
"""Up to this many stale cells are listed one by one; more (a switch from the sample CSV to the real
one leaves every demo cell stale) are listed once, with what to do about all of them."""


def _backfill(partitions: Collection[str]) -> str:
    return (
        f"dagster job backfill -m {DEFINITIONS} -j evaluate_cell --noprompt "
        f'--partitions "{",".join(partitions)}"'
    )


def _stale_at_once(stale: pd.DataFrame) -> str:
    """One line for many stale cells: how many, of which experiments, and the two ways out."""
    experiments = sorted(set(stale["experiment"]))
    rerunnable = stale[stale["current_item_set_fingerprint"].notna()]
    rerun = (
        f"re-run them over today's items, all at once (a backfill, needs the daemon): "
        f"{_backfill(rerunnable['partition'])}"
        if len(rerunnable)
        else "nothing to re-run (their benchmarks are not in today's items)"
    )
    return (
        f"- {len(stale)} cells of {len(experiments)} experiment(s) ({', '.join(experiments)}) were computed "
        "over other items than today's (e.g. the bundled sample, before a switch to the real CSV); each "
        'with its reason: `giant-sql "select partition, reason, rerun from leaderboard_stale"`. Either '
        f"{rerun}; or, if they are not wanted (demo experiments), remove those experiments from the "
        "experiments file and run `giant-experiments prune` (drops their partitions; their files stay)"
    )


def set_aside_markdown(set_aside: pd.DataFrame) -> str:
    """The set-aside cells as a Markdown list: each removed cell and up to STALE_LISTED_PER_CELL stale
    cells one per line with a backfill of each experiment's stale partitions; more stale cells at once."""
    if set_aside.empty:
        return "none: every result is over today's items"
    stale = set_aside[set_aside["status"] == STALE]
    one_by_one = set_aside if len(stale) <= STALE_LISTED_PER_CELL else set_aside[set_aside["status"] != STALE]
    lines = [f"- `{r.partition}` {r.status}: {r.reason}; re-run: {r.rerun}" for r in one_by_one.itertuples()]
    if len(stale) > STALE_LISTED_PER_CELL:
        return "\n".join([_stale_at_once(stale), *lines])
    for experiment, group in stale.groupby("experiment", sort=True):
        lines.append(
            f"- all of `{experiment}` at once (a backfill, needs the daemon): {_backfill(group['partition'])}"
        )
    return "\n".join(lines)
