"""The code location for a cluster: the platform's definitions, with every step run by Celery workers.

    dagster-daemon run -m giant_assets.cluster.definitions
    dagster job backfill -m giant_assets.cluster.definitions -j evaluate --all --noprompt \
        --tags '{"giant/provider": "openai"}'

``evaluate`` is the per-result-cell part of the graph (predictions, voted items, metrics); runs carry
``giant/provider`` so that the run queue bounds how many run at once per provider.
"""

from dagster import AssetSelection, Definitions, define_asset_job

from giant_assets.cluster.celery_app import executor
from giant_assets.platform import definitions as platform

PROVIDER_TAG = "giant/provider"
EVALUATE_ASSETS = ("predictions", "item_predictions", "benchmark_metrics")

evaluate = define_asset_job("evaluate", selection=AssetSelection.assets(*EVALUATE_ASSETS))

defs = Definitions.merge(platform.defs, Definitions(jobs=[evaluate], executor=executor))
