"""Inventory of a WSI root against the sample CSV (real MultiPathQA format), every layout, real slides."""

from __future__ import annotations

import os

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from giant_assets.multipathqa.inventory import check_csv
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.inventory import slide_inventory
from tests.support.dagster_env import resources_for
from tests.support.wsi_layouts import AMBIGUOUS, CORRUPT_TILES, DIRECTORY, build_mixed_root

COUNT_COLUMNS = ["questions", "slides", "found", "missing", "unreadable", "ambiguous", "unsafe_path"]
# Worked out by hand from tests/support/wsi_layouts.py and the sample CSV's 14 rows.
EXPECTED_COUNTS = {
    "gtex": [3, 3, 2, 1, 0, 0, 0],
    "panda": [3, 3, 1, 0, 2, 0, 0],
    "tcga": [3, 3, 2, 1, 0, 0, 0],
    "tcga_expert_vqa": [2, 2, 1, 0, 0, 1, 0],  # TCGA-EA-A3HT (shared tcga/) found, TCGA-D8-A1XK ambiguous
    "tcga_slidebench": [3, 2, 2, 0, 0, 0, 0],  # TCGA-EA-A3HT asked twice
    "all": [14, 12, 7, 2, 2, 1, 0],  # TCGA-EA-A3HT counted once over both VQA benchmarks
}
FOUND_PER_BENCHMARK = {
    "gtex": ["GTEX-1117F-0126.tiff", "GTEX-111CU-1826.tiff"],
    "panda": ["0005f7aaab2800f6170c399693a96917.tiff"],
    "tcga": ["TCGA-05-4244-01Z-00-DX1.svs", "TCGA-A1-A0SK-01Z-00-DX1.svs"],
    "tcga_expert_vqa": ["TCGA-EA-A3HT-01Z-00-DX1.svs"],
    "tcga_slidebench": ["TCGA-EA-A3HT-01Z-00-DX1.svs", "TCGA-BH-A0BZ-01Z-00-DX1.svs"],
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return build_mixed_root(tmp_path_factory.mktemp("mixed_wsi"))


def test_summary_counts_bytes_vendors_levels_and_mpp(mixed):
    inventory, row_errors = check_csv(sample_csv_path(), mixed.root)
    assert row_errors == [] and not inventory.complete
    summary = inventory.summary.set_index("benchmark_name")
    assert {b: summary.loc[b, COUNT_COLUMNS].tolist() for b in summary.index} == EXPECTED_COUNTS
    for bench, names in FOUND_PER_BENCHMARK.items():
        assert summary.loc[bench, "total_bytes"] == sum(os.path.getsize(mixed.slides[n]) for n in names)
    assert summary.loc["all", "total_bytes"] == sum(os.path.getsize(p) for p in mixed.slides.values())
    assert summary.loc["gtex", "vendors"] == "generic-tiff" and summary.loc["tcga", "vendors"] == "aperio"
    assert summary.loc["all", "vendors"] == "aperio, generic-tiff"
    slidebench = summary.loc["tcga_slidebench"]
    assert (slidebench["levels_min"], slidebench["levels_max"]) == (2, 3)
    assert summary.loc["gtex", "mpp_min"] == pytest.approx(0.25) and summary.loc["gtex", "mpp_max"] == 0.5
    assert summary.loc["all", "mpp_min"] == pytest.approx(0.25)
    assert summary.loc["panda", "mpp_max"] == pytest.approx(0.48)
    assert summary.loc["tcga", "mpp_min"] == pytest.approx(0.2527)


def test_problem_rows_name_the_question_and_the_reason(mixed):
    inventory, _ = check_csv(sample_csv_path(), mixed.root)
    problems = inventory.problems.set_index(["benchmark_name", "benchmark_id"])
    assert sorted(problems.index) == [
        ("gtex", "GTEX-OIZH-0626"),
        ("panda", "1"),
        ("panda", "2"),
        ("tcga", "2"),
        ("tcga_expert_vqa", "1"),
    ]
    assert problems.loc[("gtex", "GTEX-OIZH-0626"), "status"] == "missing"
    assert "slide not found; tried" in problems.loc[("gtex", "GTEX-OIZH-0626"), "reason"]
    missing_tcga = problems.loc[("tcga", "2")]
    assert missing_tcga["file_id"] == "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e03"
    assert (
        str(mixed.root / "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e03" / "TCGA-ZZ-0000-01Z-00-DX1.svs")
        in (missing_tcga["reason"])
    )
    corrupt = problems.loc[("panda", "1")]
    assert corrupt["status"] == "unreadable" and CORRUPT_TILES in corrupt["reason"]
    assert "ZIPDecode" in corrupt["reason"]
    directory = problems.loc[("panda", "2")]
    assert directory["status"] == "unreadable" and f"{DIRECTORY} is a directory" in directory["reason"]
    ambiguous = problems.loc[("tcga_expert_vqa", "1")]
    assert ambiguous["status"] == "ambiguous"
    assert all(str(mixed.root / relpath) in ambiguous["reason"] for relpath in AMBIGUOUS)


def test_slide_inventory_asset_stores_the_same_summary(mixed, data_dir):
    result = materialize(
        [multipathqa_csv, benchmark_items, slide_inventory],
        resources=resources_for(
            data_dir, source="local", csv_path=str(sample_csv_path()), wsi_root=str(mixed.root)
        ),
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    with duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True) as con:
        stored = con.sql("select * from slide_inventory order by benchmark_name").df()
    expected, _ = check_csv(sample_csv_path(), mixed.root)
    stored = stored.set_index("benchmark_name")
    assert {b: stored.loc[b, COUNT_COLUMNS].tolist() for b in stored.index} == EXPECTED_COUNTS
    assert (
        stored["total_bytes"].tolist()
        == expected.summary.set_index("benchmark_name").loc[stored.index, "total_bytes"].tolist()
    )
    meta = result.asset_materializations_for_node("slide_inventory")[0].metadata
    assert meta["complete"].value is False and meta["questions_without_slide"].value == 5
    assert "TCGA-D8-A1XK-01Z-00-DX1.svs" in meta["problems"].value
