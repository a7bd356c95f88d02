"""Dagster resources: where data lives. Plain Python objects behind thin ConfigurableResources."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import pandas as pd
from dagster import ConfigurableResource

from giant_assets.benchmarks.registry import BUILT_IN_NAMES
from giant_assets.core.settings import (
    CSV_PATH_ENV,
    CSV_SOURCE_ENV,
    ERRATA_ENV,
    HF_ENDPOINT_ENV,
    WSI_ROOT_ENV,
    data_dir,
    env,
)
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.roi import reference_regions_path
from giant_assets.experiments.declared import DeclaredExperiments
from giant_assets.geometry.roi import load_reference_regions
from giant_assets.multipathqa.download import MULTIPATHQA_REPO, download_multipathqa
from giant_assets.multipathqa.errata import DEFAULT_ERRATA_MODE, ERRATA_MODES
from giant_assets.multipathqa.sample import ensure_sample_slides, sample_csv_path


class StorageResource(ConfigurableResource):
    """The data directory (Parquet + giant.duckdb). Empty means GIANT_DATA_DIR or ./data."""

    data_dir: str = ""

    @property
    def root(self) -> Path:
        root = Path(self.data_dir).expanduser().resolve() if self.data_dir else data_dir()
        root.mkdir(parents=True, exist_ok=True)
        return root

    def store(self, log: Callable[[str], None] | None = None) -> ParquetStore:
        """The Parquet/DuckDB store; ``log`` receives waits for the DuckDB lock and deferred views."""
        return ParquetStore(self.root, log=log) if log else ParquetStore(self.root)


class MultiPathQAResource(ConfigurableResource):
    """Where the MultiPathQA CSV and its slides come from.

    ``source``: ``sample`` (bundled, no network), ``local`` (``csv_path``) or ``huggingface``
    (``hf_repo_id``, cached under ``<data_dir>/hf_cache``; ``HF_TOKEN``/``HF_ENDPOINT`` honoured);
    empty means ``GIANT_CSV_SOURCE``, else ``sample``. Empty ``csv_path`` means ``GIANT_CSV_PATH``.
    Environment variables are read when the resource is used, never at import.
    ``wsi_root``: the folder holding the slides; empty means ``GIANT_WSI_ROOT``, or for the sample
    the generated sample slides under ``<data_dir>/sample_wsi``.
    ``regions_path``: reference regions (level-0 boxes/polygons per item) for ROI scores and pictures;
    empty means ``GIANT_REGIONS_PATH``, or for the sample its bundled regions.
    ``errata``: what ``benchmark_items`` does with the released CSV's known errata
    (``reference/multipathqa_errata.csv``): ``apply`` asks the question the official runs asked,
    ``flag`` asks the released text and marks the rows, ``exclude`` drops them; empty means
    ``GIANT_ERRATA``, else ``apply``.
    """

    source: Literal["", "sample", "local", "huggingface"] = ""
    csv_path: str = ""
    regions_path: str = ""
    hf_repo_id: str = MULTIPATHQA_REPO
    hf_revision: str = ""
    hf_endpoint: str = ""
    wsi_root: str = ""
    errata: Literal["", "apply", "flag", "exclude"] = ""

    @property
    def errata_mode(self) -> str:
        """The errata mode in use: the configured one, else ``GIANT_ERRATA``, else ``apply``."""
        mode = self.errata or env(ERRATA_ENV).strip() or DEFAULT_ERRATA_MODE
        if mode not in ERRATA_MODES:
            raise ValueError(f"{ERRATA_ENV}={mode!r}: expected one of {', '.join(ERRATA_MODES)}")
        return mode

    @property
    def kind(self) -> str:
        """The CSV source in use: the configured one, else ``GIANT_CSV_SOURCE``, else ``sample``."""
        kind = self.source or env(CSV_SOURCE_ENV) or "sample"
        if kind not in ("sample", "local", "huggingface"):
            raise ValueError(f"{CSV_SOURCE_ENV}={kind!r}: expected sample, local or huggingface")
        return kind

    def fetch_csv(self, data_dir: Path) -> tuple[Path, str]:
        """Return the CSV's local path and a human-readable description of its source."""
        if self.kind == "sample":
            return sample_csv_path(), "bundled sample"
        if self.kind == "local":
            csv_path = self.csv_path or env(CSV_PATH_ENV)
            if not csv_path:
                raise ValueError(
                    f"source 'local' needs csv_path (or {CSV_PATH_ENV}): the MultiPathQA CSV file to load"
                )
            path = Path(csv_path).expanduser().resolve()
            return path, f"local file {path}"
        path = download_multipathqa(
            data_dir / "hf_cache",
            repo_id=self.hf_repo_id,
            revision=self.hf_revision or None,
            endpoint=self.hf_endpoint or env(HF_ENDPOINT_ENV) or None,
        )
        return path, f"huggingface {self.hf_repo_id}@{self.hf_revision or 'main'}"

    def wsi_root_path(self, data_dir: Path) -> Path:
        """The WSI root to resolve ``image_path`` under (generating the sample slides if that is it)."""
        configured = self.wsi_root or env(WSI_ROOT_ENV)
        if configured:
            root = Path(configured).expanduser().resolve()
            if not root.is_dir():
                raise FileNotFoundError(
                    f"WSI root {root} is not a directory (set wsi_root or {WSI_ROOT_ENV})"
                )
            return root
        if self.kind == "sample":
            return ensure_sample_slides(data_dir / "sample_wsi").resolve()
        raise ValueError(f"no WSI root: set the dataset resource's wsi_root or the {WSI_ROOT_ENV} env var")

    def reference_regions(
        self, benchmarks: Iterable[str] = BUILT_IN_NAMES
    ) -> tuple[str, pd.DataFrame | None]:
        """(path, regions) of the reference regions in use; ("", None) when there are none. A row may
        name any of ``benchmarks`` (pass ``ExperimentsResource.benchmark_names()`` for the declared)."""
        path = reference_regions_path(self.regions_path, self.kind)
        return (path, load_reference_regions(path, benchmarks)) if path else ("", None)


class ExperimentsResource(ConfigurableResource, DeclaredExperiments):
    """The declared experiments: ``path`` (empty means ``GIANT_EXPERIMENTS``, else ./experiments.yaml)."""

    path: str = ""
