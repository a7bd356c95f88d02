"""The shared Dagster instance and the environment every cluster process gets.

One PostgreSQL database holds runs, event logs and schedules (``dagster_home/postgres/dagster.yaml``);
one Redis serves three jobs on three databases: the Celery broker (0), Celery's results (1) and the
shared rate limit (2). A process on any machine joins the cluster with this environment.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from giant_assets.core.settings import CELERY_BACKEND_ENV as BACKEND_ENV
from giant_assets.core.settings import CELERY_BROKER_ENV as BROKER_ENV
from giant_assets.core.settings import POSTGRES_URL_ENV
from giant_assets.core.settings import RATE_LIMIT_REDIS_URL_ENV as REDIS_URL_ENV

INSTANCE_YAML = Path(__file__).resolve().parents[2] / "dagster_home" / "postgres" / "dagster.yaml"


@dataclass(frozen=True)
class Cluster:
    """Where the shared state lives: Dagster home, data folder, PostgreSQL and Redis."""

    dagster_home: Path
    data_dir: Path
    postgres_url: str  # postgresql://user@host:port/db
    redis_url: str  # redis://host:port (no database: each role picks its own)

    def env(self) -> dict[str, str]:
        """The variables a webserver, daemon, run process or worker of this cluster needs."""
        redis = self.redis_url.rstrip("/")
        return {
            "DAGSTER_HOME": str(self.dagster_home),
            "GIANT_DATA_DIR": str(self.data_dir),
            # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; dagster-postgres ships psycopg2
            POSTGRES_URL_ENV: self.postgres_url.replace("postgresql://", "postgresql+psycopg2://", 1),
            BROKER_ENV: f"{redis}/0",
            BACKEND_ENV: f"{redis}/1",
            REDIS_URL_ENV: f"{redis}/2",
        }

    def prepare(self) -> Cluster:
        """Create the folders and put the PostgreSQL instance config into the Dagster home."""
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(INSTANCE_YAML, self.dagster_home / "dagster.yaml")
        return self
