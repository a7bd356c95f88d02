"""The code location for a cluster: the platform's definitions, with every step run by Celery workers.

    dagster-daemon run -m giant_assets.cluster.definitions
    dagster job backfill -m giant_assets.cluster.definitions -j evaluate --all --noprompt

``evaluate`` is the per-result-cell part of the graph (predictions, voted items, metrics); each run is
tagged ``giant/provider`` with its experiment's provider (``platform.definitions.cell_tags``), so that
the run queue bounds how many run at once per provider.
"""

from dagster import AssetSelection, define_asset_job

from giant_assets.cluster.celery_app import executor
from giant_assets.platform import definitions as platform
from giant_assets.platform.partitions import results_partitions

PROVIDER_TAG = platform.PROVIDER_TAG
EVALUATE_ASSETS = ("predictions", "item_predictions", "benchmark_metrics")

evaluate = define_asset_job(
    "evaluate",
    selection=AssetSelection.assets(*EVALUATE_ASSETS),
    partitions_def=results_partitions,
    config=platform.cell_config({}),
)

defs = platform.build_definitions(executor=executor, jobs=(evaluate,))
