"""Assets: labels re-extracted from stored answers and voted per item, then the benchmark's metric."""

import pandas as pd
from dagster import AssetExecutionContext, Failure, MetadataValue, asset

from giant_assets.eval.export import submission_path, write_submission
from giant_assets.eval.itemsets import ITEM_SET, current_item_sets, foreign_runs, foreign_runs_error
from giant_assets.eval.scoring import EXTRACTOR_VERSION, benchmark_metrics_row, rescore, vote_items
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, StorageResource


def cost_per_item(experiment, benchmark: str, predictions: pd.DataFrame) -> dict[str, float]:
    """Actual USD per item run (all its runs) and the estimate's prior range for one item."""
    from giant_assets.agents.estimate import estimate
    from giant_assets.agents.pricing import experiment_prices

    ran = predictions[predictions["error_kind"].fillna("") != "slide_unavailable"]
    items = int(ran["benchmark_id"].nunique())
    prior = estimate(experiment, benchmark, items=1, prices=experiment_prices(experiment))
    if experiment.batch:
        prior.usd = prior.usd_batch
    return {
        "usd_per_item": float(ran["cost_usd"].sum(skipna=False)) / items if items else 0.0,  # NaN: no price
        "est_usd_per_item_low": prior.usd.low,
        "est_usd_per_item_high": prior.usd.high,
    }


def refuse_foreign_runs(
    experiment: str, benchmark: str, predictions: pd.DataFrame, items: pd.DataFrame
) -> None:
    """Fail (one line, with the command that re-runs the cell) when stored runs answer other items."""
    foreign = foreign_runs(predictions, items)
    if len(foreign):
        raise Failure(foreign_runs_error(experiment, benchmark, foreign, len(predictions)))


@asset(
    partitions_def=results_partitions, group_name="evaluate", kinds={"pandas"}, code_version=EXTRACTOR_VERSION
)
def item_predictions(
    context: AssetExecutionContext,
    predictions: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """One row per item of the benchmark: labels re-extracted from the stored answers, majority-voted.

    Each row carries ``item_fingerprint`` and the ``item_set_fingerprint`` of the benchmark's items it
    was scored over (eval/itemsets.py), so a result over another item set is never taken for current.
    Stored runs that answer other items than today's (another CSV) fail it, naming the cell to re-run.

    Re-materializing re-scores from what is stored, with no model call. Also exported as a grading
    submission, ``<data_dir>/exports/<experiment>/<benchmark>.csv``.
    """
    name, benchmark = cell(context)
    null_grade = experiments.get(name).panda_null_grade  # a removed experiment fails here, saying so
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    refuse_foreign_runs(name, benchmark, predictions, items)
    runs = rescore(predictions, items, null_grade)
    voted = vote_items(runs, items)
    voted.insert(0, "experiment", name)
    voted[ITEM_SET] = current_item_sets(items).get(benchmark)
    export = write_submission(voted, submission_path(storage.root, name, benchmark))
    changed = int((runs["predicted_label"].fillna(-1) != predictions["predicted_label"].fillna(-1)).sum())
    context.add_output_metadata(
        {
            "submission_export": MetadataValue.path(str(export)),
            "items": len(voted),
            "slide_readable": int(voted["slide_available"].sum()),
            "answered": int(voted["predicted_label"].notna().sum()),
            "correct": int(voted["correct"].sum()),
            "extractor_version": EXTRACTOR_VERSION,
            ITEM_SET: str(voted[ITEM_SET].iloc[0]) if len(voted) else "-",
            "run_labels_changed_by_rescoring": changed,
        }
    )
    return voted


@asset(
    partitions_def=results_partitions, group_name="evaluate", kinds={"numpy"}, code_version=EXTRACTOR_VERSION
)
def benchmark_metrics(
    context: AssetExecutionContext,
    item_predictions: pd.DataFrame,
    predictions: pd.DataFrame,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """The benchmark's metric over ALL its items (missing slides and failed runs count wrong), with
    1000-replicate bootstrap mean ± std and 95% interval, coverage beside it, the cost per item beside
    what the estimate predicted for it before any run, and what the provider billed for the cell
    (``cost_usd_billed``, read from the ledger of ``journals/<config_hash>/``) with what of it was spent
    on runs that do not count (``cost_usd_not_counted``)."""
    name, benchmark = cell(context)
    experiment = experiments.get(name)
    journal = storage.root / "journals" / experiment.config_hash() / f"{benchmark}.jsonl"
    row = {"experiment": name} | benchmark_metrics_row(benchmark, item_predictions, predictions, journal)
    row |= cost_per_item(experiment, benchmark, predictions)
    context.add_output_metadata(
        {
            "metric": row["metric_type"],
            "value_pct": MetadataValue.float(row["value_pct"]) if row["n_items"] else "n/a",
            "paper_format": row["paper_format"],
            "items": row["n_items"],
            ITEM_SET: row[ITEM_SET] or "-",
            "slide_readable": row["n_slide_readable"],
            "answered": row["n_answered"],
            "value_readable_pct": MetadataValue.float(row["value_readable_pct"])
            if row["n_slide_readable"]
            else "n/a",
            "null_grades": row["n_null_grades"],
            "untagged_responses": row["n_untagged_responses"],
            "cost_usd": row["cost_usd"],
            "cost_usd_billed": MetadataValue.float(row["cost_usd_billed"]),
            "cost_usd_not_counted": MetadataValue.float(row["cost_usd_not_counted"]),
            "usd_per_item": row["usd_per_item"],
            "estimated_usd_per_item": f"{row['est_usd_per_item_low']:.4f}-{row['est_usd_per_item_high']:.4f}",
        }
    )
    return pd.DataFrame([row])
