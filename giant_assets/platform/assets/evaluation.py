"""Assets: agent predictions per benchmark partition, voted item answers, metrics and the summary."""

import asyncio
import os
from typing import Literal

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, asset
from pydantic import Field

from giant_assets.agents.registry import make_agent, save_settings
from giant_assets.batch.journal import Journal
from giant_assets.batch.ratelimit import LocalRateLimiter
from giant_assets.batch.runner import BatchSettings, run_batch
from giant_assets.eval.export import write_submission
from giant_assets.eval.roi import reference_regions_path
from giant_assets.eval.scoring import (
    PREDICTION_DTYPES,
    benchmark_metrics_row,
    summary_table,
    trajectory_steps,
    vote_items,
    write_results_json,
)
from giant_assets.experiments.spec import Experiment
from giant_assets.geometry.roi import load_reference_regions
from giant_assets.platform.partitions import benchmark_partitions
from giant_assets.platform.resources import MultiPathQAResource, StorageResource
from giant_assets.report.charts import bar_chart_png
from giant_assets.report.trajectory_images import preview_markdown, run_crops, write_trajectory_images


class PredictionConfig(Config):
    """Which agent answers, how often, and how fast. Defaults come from GIANT_* env vars."""

    agent: Literal["random", "majority", "replay", "giant"] = Field(
        default=os.environ.get("GIANT_AGENT", "random"), description="random | majority | replay | giant"
    )
    model: str = Field(default=os.environ.get("GIANT_MODEL", ""), description="model name (giant agent)")
    provider: Literal["openai", "anthropic"] = Field(default=os.environ.get("GIANT_PROVIDER", "openai"))
    base_url: str = Field(
        default=os.environ.get("GIANT_BASE_URL", ""),
        description="API base URL; empty = the provider's default",
    )
    api_key_env: str = Field(
        default="",
        description="NAME of the env var holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)",
    )
    runs_per_item: int = Field(default=1, ge=1, description="runs per item, majority-voted (GIANT x5 = 5)")
    concurrency: int = Field(default=4, ge=1, description="items in flight at once")
    requests_per_minute: float = Field(default=60.0, gt=0, description="model requests per minute, shared")
    budget_usd: float = Field(
        default=0.0, ge=0, description="stop launching new runs past this cost; 0 = no cap"
    )
    max_steps: int = Field(default=20, ge=1, description="crop requests before a forced answer (giant)")
    seed: int = Field(default=0, description="seed of the random agent")
    replay_path: str = Field(default="", description="recorded predictions file (replay agent)")
    retry_failed: bool = Field(
        default=True, description="re-run runs that ended in an agent error or timeout"
    )
    item_timeout_s: float = Field(default=900.0, gt=0)

    def agent_settings(self) -> Experiment:
        return Experiment(
            name=f"adhoc-{self.agent}",
            runs_per_item=self.runs_per_item,
            agent=self.agent,
            model=self.model,
            provider=self.provider,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            max_steps=self.max_steps,
            seed=self.seed,
            replay_path=self.replay_path,
        )


@asset(partitions_def=benchmark_partitions, group_name="evaluate", compute_kind="agent")
def predictions(
    context: AssetExecutionContext,
    config: PredictionConfig,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    dataset: MultiPathQAResource,
) -> pd.DataFrame:
    """One row per (item, run): answer text, extracted label, error, tokens, cost and trajectory.

    Runs that viewed regions also get pictures under ``<data_dir>/trajectories/<config_hash>/``: an
    overview (thumbnail, numbered viewed boxes in blue, reference regions in green) and each crop.
    """
    benchmark = context.partition_key
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    settings = config.agent_settings()
    config_hash = settings.config_hash()
    limiter = LocalRateLimiter(config.requests_per_minute)
    agent = make_agent(settings, benchmark_items[["benchmark_name", "truth_label"]], limiter)
    journal = Journal(storage.root / "journals" / config_hash / f"{benchmark}.jsonl")
    save_settings(settings, journal.path.parent / "settings.json")
    batch = BatchSettings(
        runs_per_item=config.runs_per_item,
        concurrency=config.concurrency,
        budget_usd=config.budget_usd,
        item_timeout_s=config.item_timeout_s,
        retry_failed=config.retry_failed,
    )

    async def go():
        try:
            return await run_batch(
                agent,
                items.to_dict("records"),
                config_hash=config_hash,
                journal=journal,
                settings=batch,
                log=context.log.info,
            )
        finally:
            await agent.aclose()

    outcome = asyncio.run(go())
    rows = pd.DataFrame.from_records(outcome.rows, columns=list(PREDICTION_DTYPES)).astype(PREDICTION_DTYPES)
    storage.store().write("trajectory_steps", trajectory_steps(rows), benchmark)
    regions_path = reference_regions_path("", dataset.source)
    regions = load_reference_regions(regions_path) if regions_path else None
    pictures_dir = storage.root / "trajectories" / config_hash
    overviews = write_trajectory_images(rows, items, pictures_dir, regions)
    pictures = {}
    if overviews:
        crops = run_crops(overviews[0])
        pictures = {
            "trajectory_images": MetadataValue.path(str(pictures_dir / benchmark)),
            "pictures_written": len(overviews),
            "first_overview": MetadataValue.path(str(overviews[0])),
            **({"first_crop": MetadataValue.path(str(crops[0]))} if crops else {}),
            "preview": MetadataValue.md(preview_markdown(overviews[0], crops)),
        }
    errors = rows["error_kind"].value_counts().to_dict()
    context.add_output_metadata(
        {
            "agent": settings.agent,
            "model": settings.model or "-",
            "config_hash": config_hash,
            "journal": str(journal.path),
            "runs": len(rows),
            "executed_now": outcome.executed,
            "reused_from_journal": outcome.reused,
            "errors_by_kind": MetadataValue.json({str(k): int(v) for k, v in errors.items()}),
            "cost_usd_now": round(outcome.cost_usd_new, 6),
            "cost_usd_total": round(float(rows["cost_usd"].sum()), 6),
            "budget_stopped": outcome.budget_stopped,
            "runs_not_started": outcome.not_started,
            **pictures,
        }
    )
    return rows


@asset(partitions_def=benchmark_partitions, group_name="evaluate", compute_kind="pandas")
def item_predictions(
    context: AssetExecutionContext,
    predictions: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
) -> pd.DataFrame:
    """One row per item: the majority-voted label over runs, agreement, truth and correctness.

    Also exported as a grading submission, ``<data_dir>/exports/<config_hash>/<benchmark>.csv``.
    """
    benchmark = context.partition_key
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    voted = vote_items(predictions, items)
    config_hash = voted["config_hash"].iloc[0] if len(voted) else "none"
    export = write_submission(voted, storage.root / "exports" / str(config_hash) / f"{benchmark}.csv")
    context.add_output_metadata(
        {
            "submission_export": MetadataValue.path(str(export)),
            "items": len(voted),
            "scored_items": int(voted["slide_available"].sum()),
            "correct": int(voted["correct"].sum()),
            "no_label": int((voted["slide_available"] & voted["predicted_label"].isna()).sum()),
        }
    )
    return voted


@asset(partitions_def=benchmark_partitions, group_name="evaluate", compute_kind="numpy")
def benchmark_metrics(
    context: AssetExecutionContext, item_predictions: pd.DataFrame, predictions: pd.DataFrame
) -> pd.DataFrame:
    """Accuracy or balanced accuracy of the partition with 1000-replicate bootstrap mean ± std and 95% CI."""
    row = benchmark_metrics_row(context.partition_key, item_predictions, predictions)
    context.add_output_metadata(
        {
            "metric": row["metric_type"],
            "value_pct": MetadataValue.float(row["value_pct"]) if row["n_scored"] else "n/a",
            "paper_format": row["paper_format"],
            "n_scored": row["n_scored"],
            "cost_usd": row["cost_usd"],
        }
    )
    return pd.DataFrame([row])


@asset(group_name="evaluate", compute_kind="pandas")
def metrics_summary(
    context: AssetExecutionContext,
    benchmark_metrics: pd.DataFrame,
    multipathqa_csv: pd.DataFrame,
    storage: StorageResource,
) -> pd.DataFrame:
    """One row per benchmark with the paper's Table 1 numbers beside ours; writes results JSON + chart."""
    table = summary_table(benchmark_metrics)
    out_dir = storage.root / "results"
    json_paths = write_results_json(table, multipathqa_csv, out_dir, storage.root / "journals")
    chart = bar_chart_png(table, out_dir / "summary.png")
    shown = table[
        ["benchmark_name", "agent", "model", "n_scored", "metric_type", "paper_format", "paper_giant"]
    ]
    context.add_output_metadata(
        {
            "summary": MetadataValue.md(shown.to_markdown(index=False)),
            "results_json": MetadataValue.json([str(p) for p in json_paths]),
            "chart": MetadataValue.path(str(chart)),
            "chart_md": MetadataValue.md(f"![scores per benchmark]({chart})"),
        }
    )
    return table
