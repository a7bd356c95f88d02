"""The Celery side of the Dagster Celery executor: what ``celery -A giant_assets.cluster.celery_app
worker`` runs, and the executor's configuration, both read from the same two environment variables.

Steps of a run become Celery tasks on the ``dagster`` queue; a worker on any machine with the package,
the instance config, the slides and GIANT_DATA_DIR executes them and writes their events to PostgreSQL.
"""

from __future__ import annotations

import os

from dagster._core.execution.retries import RetryMode
from dagster_celery import celery_executor
from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from giant_assets.cluster.instance import BACKEND_ENV, BROKER_ENV

# a step is acknowledged when a worker takes it: a worker lost mid-step loses that step (its run is then
# cancelled and re-run, resuming from the journal) rather than having it run twice at once elsewhere;
# and a busy worker reserves no further step (a lost worker would strand it until Redis' visibility
# timeout, an hour)
CELERY_SETTINGS = {
    "worker_disable_prefetch": True,
    "broker_connection_retry_on_startup": True,
    "worker_hijack_root_logger": False,
}

executor = celery_executor.configured(
    {"broker": {"env": BROKER_ENV}, "backend": {"env": BACKEND_ENV}, "config_source": CELERY_SETTINGS},
    name="giant_celery",
)


def worker_app():
    """The Celery app of a worker: the executor's app arguments, built the executor's own way."""
    missing = [name for name in (BROKER_ENV, BACKEND_ENV) if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"a Celery worker needs {' and '.join(missing)} (the Redis URLs of the cluster)")
    settings = CeleryExecutor(
        retries=RetryMode(RetryMode.DISABLED),
        broker=os.environ[BROKER_ENV],
        backend=os.environ[BACKEND_ENV],
        config_source=CELERY_SETTINGS,
    )
    return make_app(settings.app_args())


app = worker_app() if os.environ.get(BROKER_ENV) else None
execute_plan = create_task(app) if app is not None else None
