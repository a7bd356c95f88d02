"""Asset checks: data quality of the resolved item table; results over today's items."""

import numpy as np
import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, AssetKey, MetadataValue, asset_check

from giant_assets.benchmarks.declaration import MAX_GRADE
from giant_assets.eval.itemsets import REMOVED, STALE, set_aside_markdown
from giant_assets.multipathqa.benchmarks import PANDA_GRADES
from giant_assets.multipathqa.errata import ERRATA_MODE_COLUMN, ERRATUM_COLUMN, load_errata, match_errata
from giant_assets.multipathqa.prompts import missing_options
from giant_assets.platform.assets.ingest import benchmark_items

MIN_READABLE_SHARE = 1.0


@asset_check(asset=benchmark_items, description="(benchmark_name, benchmark_id) identifies one item")
def items_unique_ids(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    dupes = benchmark_items[benchmark_items.duplicated(["benchmark_name", "benchmark_id"], keep=False)]
    return AssetCheckResult(
        passed=dupes.empty,
        metadata={
            "duplicates": len(dupes),
            "examples": MetadataValue.md(
                dupes[["benchmark_name", "benchmark_id", "row_number"]].head(20).to_markdown(index=False)
                if len(dupes)
                else "none"
            ),
        },
    )


def truth_out_of_range(items: pd.DataFrame) -> pd.DataFrame:
    """Rows whose truth label is not a valid option index (or ISUP grade for panda, or a grade 0..1000 for
    a declared grade benchmark: one without options)."""
    truth = items["truth_label"].to_numpy()
    is_panda = (items["benchmark_name"] == "panda").to_numpy()
    n_opts = items["n_options"].to_numpy()
    grade_ok = np.where(is_panda, np.isin(truth, PANDA_GRADES), (truth >= 0) & (truth <= MAX_GRADE))
    ok = np.where(is_panda | (n_opts == 0), grade_ok, (truth >= 1) & (truth <= n_opts))
    return items.loc[~ok]


@asset_check(asset=benchmark_items, description="every truth label is in range for its benchmark")
def items_truth_in_range(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    bad = truth_out_of_range(benchmark_items)
    return AssetCheckResult(passed=bad.empty, metadata={"out_of_range": len(bad)})


@asset_check(asset=benchmark_items, description="share of items whose slide was found and opened")
def items_slides_readable(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    readable = benchmark_items["wsi_status"].eq("ok")
    per = (
        benchmark_items.assign(readable=readable)
        .groupby("benchmark_name")["readable"]
        .agg(readable="sum", total="count")
    )
    share = float(readable.mean()) if len(readable) else 0.0
    return AssetCheckResult(
        passed=share >= MIN_READABLE_SHARE,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "readable_share": share,
            "readable": int(readable.sum()),
            "total": len(readable),
            "per_benchmark": MetadataValue.md(per.to_markdown()),
        },
    )


def prompts_missing_options(items: pd.DataFrame) -> pd.DataFrame:
    """Items with options whose rendered prompt does not show every option as ``N. text``."""
    missing = [missing_options(p, o) for p, o in zip(items["prompt"], items["options"], strict=True)]
    out = items.assign(missing_options=missing)
    return out.loc[out["missing_options"].map(len) > 0]


@asset_check(asset=benchmark_items, description="every item with options shows all of them in its prompt")
def items_prompts_show_options(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    bad = prompts_missing_options(benchmark_items)
    shown = bad[["benchmark_name", "benchmark_id", "missing_options"]].head(20)
    return AssetCheckResult(
        passed=bad.empty,
        metadata={
            "items_missing_options": len(bad),
            "examples": MetadataValue.md(shown.to_markdown(index=False) if len(bad) else "none"),
        },
    )


def errata_mismatches(items: pd.DataFrame) -> pd.DataFrame:
    """Items whose errata marking disagrees with a fresh match against the errata table: a known erratum
    asked as released but not flagged, a flagged item that is no erratum, or an applied item still
    asking the released question."""
    released = match_errata(items, load_errata()) >= 0 if len(items) else pd.Series([], dtype=bool)
    flagged = items[ERRATUM_COLUMN].eq("flagged")
    applied = items[ERRATUM_COLUMN].eq("applied")
    return items.loc[(released != flagged) | (applied & released)]


@asset_check(
    asset=benchmark_items,
    description="the released CSV's known errata (reference/multipathqa_errata.csv): named, and each one "
    "applied, flagged or excluded as the dataset's errata mode says",
)
def items_errata(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    marked = benchmark_items.loc[
        benchmark_items[ERRATUM_COLUMN] != "",
        ["benchmark_name", "benchmark_id", ERRATUM_COLUMN, "prompt_template"],
    ].rename(columns={"prompt_template": "question_asked"})
    bad = errata_mismatches(benchmark_items)
    modes = sorted(benchmark_items[ERRATA_MODE_COLUMN].unique()) if len(benchmark_items) else []
    return AssetCheckResult(
        passed=bad.empty,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "errata_mode": ", ".join(modes) or "n/a",
            "errata_items": len(marked),
            "named": ", ".join(f"{n} {i} ({e})" for n, i, e in marked.iloc[:, :3].itertuples(index=False))
            or "none",
            "items": MetadataValue.md(marked.to_markdown(index=False) if len(marked) else "none"),
            "inconsistent": len(bad),
        },
    )


ITEM_CHECKS = [
    items_unique_ids,
    items_truth_in_range,
    items_slides_readable,
    items_prompts_show_options,
    items_errata,
]


@asset_check(
    asset=AssetKey("leaderboard_stale"),
    description="every stored result is over today's items, of a declared experiment (else: what to re-run)",
)
def results_over_todays_items(leaderboard_stale: pd.DataFrame) -> AssetCheckResult:
    """WARN while results are set aside from the leaderboard; its metadata says what re-runs them."""
    return AssetCheckResult(
        passed=leaderboard_stale.empty,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "stale": int((leaderboard_stale["status"] == STALE).sum()) if len(leaderboard_stale) else 0,
            "removed": int((leaderboard_stale["status"] == REMOVED).sum()) if len(leaderboard_stale) else 0,
            "what_to_rerun": MetadataValue.md(set_aside_markdown(leaderboard_stale)),
        },
    )


RESULT_CHECKS = [results_over_todays_items]
