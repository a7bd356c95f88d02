"""Shared fixtures: the generated sample slides, a temp data dir, Dagster resources over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.multipathqa.sample import ensure_sample_slides


@pytest.fixture(autouse=True)
def own_rate_limits(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and the processes it starts) its own machine-wide rate-limit files: the buckets of
    one test, or of an earlier run of the suite, never throttle another."""
    monkeypatch.setenv("GIANT_RATE_LIMIT_DIR", str(tmp_path_factory.mktemp("ratelimits")))


@pytest.fixture(scope="session")
def sample_wsi_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's slides, generated once per test worker (real pyramidal TIFF/SVS)."""
    return ensure_sample_slides(tmp_path_factory.mktemp("sample_wsi"))


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    monkeypatch.setenv("GIANT_DATA_DIR", str(path))
    return path
