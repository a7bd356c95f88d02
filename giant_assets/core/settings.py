"""Environment-driven locations and limits. Every env var the project reads is named here."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "GIANT_DATA_DIR"  # where Parquet files and giant.duckdb live (default ./data)
WSI_ROOT_ENV = "GIANT_WSI_ROOT"  # default WSI root for the items asset
CSV_SOURCE_ENV = "GIANT_CSV_SOURCE"  # sample | local | huggingface (default sample)
CSV_PATH_ENV = "GIANT_CSV_PATH"  # the CSV for source local
ERRATA_ENV = "GIANT_ERRATA"  # the released CSV's known errata: apply | flag | exclude (default apply)
EXPERIMENTS_ENV = "GIANT_EXPERIMENTS"  # the experiments file (default ./experiments.yaml)
PRICES_ENV = "GIANT_PRICES"  # optional JSON/YAML file overriding the USD price table
REGIONS_ENV = "GIANT_REGIONS_PATH"  # reference regions for ROI scores and trajectory pictures
HF_ENDPOINT_ENV = "HF_ENDPOINT"  # HuggingFace mirror/endpoint (HF_TOKEN is read by huggingface_hub)
DAGSTER_HOME_ENV = "DAGSTER_HOME"  # the Dagster instance (the Makefile sets ./dagster_home)
# Dagster 1.13 warns on every `dagster asset materialize` that `dg launch` (dagster-dg-cli, not used here)
# supersedes it; the Makefile, the docs and every materialize command the platform prints set this filter
SUPERSEDED_WARNING_FILTER = "ignore:Function `asset_materialize_command` is superseded:FutureWarning"
DEMO_KEY_ENV = "GIANT_DEMO_API_KEY"  # the throwaway key the demo sends its loopback model
RATE_LIMIT_REDIS_URL_ENV = "GIANT_RATE_LIMIT_REDIS_URL"  # share the provider rate limit through Redis
RATE_LIMIT_WINDOW_ENV = "GIANT_RATE_LIMIT_WINDOW_S"  # the shared limits' window in seconds (default 60)
RATE_LIMIT_SCOPE_ENV = "GIANT_RATE_LIMIT_SCOPE"  # machine (default) | process: who shares a limit
RATE_LIMIT_DIR_ENV = "GIANT_RATE_LIMIT_DIR"  # the machine-wide limits' files (default <data dir>/ratelimits)
POSTGRES_URL_ENV = "GIANT_DAGSTER_POSTGRES_URL"  # the Dagster instance on PostgreSQL (scale-out)
CELERY_BROKER_ENV = "GIANT_CELERY_BROKER_URL"  # Celery broker of the workers (scale-out)
CELERY_BACKEND_ENV = "GIANT_CELERY_BACKEND_URL"  # Celery result backend (scale-out)
CLUSTER_DIR_ENV = "GIANT_CLUSTER_DIR"  # where `make cluster-demo` keeps its servers (default data/cluster)
VIEWER_URL_ENV = "GIANT_VIEWER_URL"  # where data/viewer is served, for the UI's links (default below)
DEFAULT_VIEWER_URL = "http://127.0.0.1:8765/"  # what `make view` serves
# the official SDKs' variables for a provider's API root (a gateway or proxy), honoured as the SDKs do
# when an experiment sets neither base_url nor server; the effective root is hashed like base_url
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
ANTHROPIC_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
# the CA bundle (file or folder) for HTTPS to the providers, as the SDKs' HTTP library reads them
CA_FILE_ENV, CA_DIR_ENV = "SSL_CERT_FILE", "SSL_CERT_DIR"
# provider keys are read from the variable an experiment names in api_key_env
# (default OPENAI_API_KEY / ANTHROPIC_API_KEY), only when a request is made, and never stored


def env(name: str, default: str = "") -> str:
    """The value of one of the variables named above (read at call time, never at import)."""
    return os.environ.get(name, default)


VIEW_WAIT_ENV = "GIANT_VIEW_WAIT_S"  # seconds a new DuckDB view waits for the file's lock (default 10)
JOURNAL_LOCK_WAIT_ENV = "GIANT_JOURNAL_LOCK_WAIT_S"  # seconds a run waits for a busy journal (default 30)
ORPHAN_WATCHDOG_ENV = "GIANT_STOP_WHEN_ORPHANED"  # "0" keeps a batch running after its parent dies
SENSOR_INTERVAL_ENV = "GIANT_SENSOR_INTERVAL_S"  # seconds between a sensor's ticks (default each sensor's)
DUCKDB_NAME = "giant.duckdb"


def data_dir() -> Path:
    """The data directory, absolute, created on first use."""
    path = Path(os.environ.get(DATA_DIR_ENV) or "data").expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def env_seconds(name: str, default: float) -> float:
    """A non-negative number of seconds from the environment; a clear error when it is not one."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number of seconds") from None
    if not value >= 0:
        raise ValueError(f"{name}={text!r}: expected a number of seconds >= 0")
    return value


def env_flag(name: str, default: bool) -> bool:
    """A boolean from the environment: 1/true/yes/on or 0/false/no/off."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={text!r}: expected 1/true/yes/on or 0/false/no/off")


MAX_SENSOR_INTERVAL_S = 86_400


def sensor_interval(default: int) -> int:
    """A sensor's ``minimum_interval_seconds``: ``GIANT_SENSOR_INTERVAL_S`` when set (read as the code
    location loads its definitions; at least 1, at most a day), else ``default``. Tests shorten it to
    wait less."""
    seconds = env_seconds(SENSOR_INTERVAL_ENV, default)
    if not seconds <= MAX_SENSOR_INTERVAL_S:  # inf, 1e308: no sensor that never ticks
        raise ValueError(
            f"{SENSOR_INTERVAL_ENV}={os.environ.get(SENSOR_INTERVAL_ENV)!r}: expected at most "
            f"{MAX_SENSOR_INTERVAL_S} seconds (a day)"
        )
    return max(1, round(seconds))
