"""The released CSV's errata, handled by real materializations of ``benchmark_items`` in each mode.

The fixture CSV is in the released format: one known erratum (tcga_slidebench id 102 of the released
MultiPathQA.csv, its question belonging to another row), one sound slidebench row, and two decoys that
share an id or the question with the erratum but not its content (they must never be touched).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance, SourceAsset, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.multipathqa.errata import load_errata
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.leaderboard import leaderboard
from giant_assets.platform.checks import ITEM_CHECKS
from tests.support.dagster_env import resources_for

INGEST = [multipathqa_csv, benchmark_items, *ITEM_CHECKS]
HEADER = [
    "benchmark_name",
    "benchmark_id",
    "image_path",
    "answer",
    "options",
    "image_exists",
    "patch_exists",
    "is_valid",
    "metric_type",
    "file_id",
    "prompt",
]
RELEASED_102 = "What percent of benign lymph node is remaining?"
OFFICIAL_102 = (
    "Which of the following best describes the overall tissue architecture observed in the attached "
    "histological slide image of the bladder with invasive carcinoma?"
)
ARCHITECTURE = [
    "Uniform epithelial tissue with minimal stromal interaction",
    "Disorganized epithelial tissue with dense stromal invasion",
    "Homogeneous stromal tissue with scattered epithelial cells",
    "Smooth muscle bundles with interspersed glandular structures",
]
GLEASON = "What is the secondary Gleason pattern observed in this case of prostate adenocarcinoma?"


def _row(name: str, bid: str, slide: str, answer: str, options: list[str], question: str) -> dict:
    return dict(
        zip(
            HEADER,
            [
                name,
                bid,
                slide,
                answer,
                repr(options),
                "True",
                "True",
                "True",
                "accuracy",
                f"uuid-{bid}",
                question,
            ],
            strict=True,
        )
    )


ROWS = [
    _row("tcga_slidebench", "102", "TCGA-K4-A5RH-01Z-00-DX1.svs", "2", ARCHITECTURE, RELEASED_102),
    _row("tcga_slidebench", "2270", "TCGA-HC-7080-01Z-00-DX1.svs", "3", ["2", "3", "4", "5"], GLEASON),
    # same id as a known erratum, another question about another slide: a CSV with other rows
    _row("tcga_slidebench", "17", "TCGA-HC-7080-01Z-00-DX1.svs", "2", ["2", "3", "4", "5"], GLEASON),
    # the erratum's released question where it belongs (the other VQA benchmark, its own options)
    _row(
        "tcga_expert_vqa",
        "102",
        "TCGA-GN-A4U7-06Z-00-DX1.svs",
        "1",
        ["0%", "25%", "50%", "75%"],
        RELEASED_102,
    ),
]


@pytest.fixture
def released_format(tmp_path: Path, sample_wsi_root: Path) -> tuple[Path, Path]:
    """(csv, wsi_root): the four rows above, each slide a copy of a real sample SVS."""
    path = tmp_path / "MultiPathQA.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=HEADER)
        writer.writeheader()
        writer.writerows(ROWS)
    root = tmp_path / "wsi"
    root.mkdir()
    for slide in {r["image_path"] for r in ROWS}:
        shutil.copy(sample_wsi_root / "TCGA-A1-A0SK-01Z-00-DX1.svs", root / slide)
    return path, root


def _materialize(data_dir: Path, released_format: tuple[Path, Path], **dataset: str):
    path, root = released_format
    res = resources_for(data_dir, source="local", csv_path=str(path), wsi_root=str(root), **dataset)
    result = materialize(INGEST, resources=res, instance=DagsterInstance.ephemeral())
    assert result.success
    con = duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True)
    items = con.sql(
        "select benchmark_name, benchmark_id, prompt_template, prompt, erratum, errata_mode, wsi_status "
        "from benchmark_items"
    ).df()
    con.close()
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    meta = result.asset_materializations_for_node("benchmark_items")[0].metadata
    return items.set_index(["benchmark_name", "benchmark_id"]), checks["items_errata"], meta


def _untouched(items) -> None:
    """The sound row and the decoys keep the released text and no erratum mark."""
    for key, question in [
        (("tcga_slidebench", "2270"), GLEASON),
        (("tcga_slidebench", "17"), GLEASON),
        (("tcga_expert_vqa", "102"), RELEASED_102),
    ]:
        assert items.loc[key, "prompt_template"] == question and items.loc[key, "erratum"] == ""
        assert items.loc[key, "prompt"].startswith(question + "\n")


def test_apply_is_the_default_and_asks_the_official_question(data_dir, released_format):
    items, check, meta = _materialize(data_dir, released_format)
    fixed = items.loc[("tcga_slidebench", "102")]
    assert fixed["erratum"] == "applied" and fixed["prompt_template"] == OFFICIAL_102
    listing = "".join(f"\n{i}. {o}" for i, o in enumerate(ARCHITECTURE, start=1))
    assert fixed["prompt"].startswith(OFFICIAL_102 + "\n") and listing in fixed["prompt"]
    assert RELEASED_102 not in fixed["prompt"] and fixed["wsi_status"] == "ok"
    _untouched(items)
    assert set(items["errata_mode"]) == {"apply"} and len(items) == 4
    assert check.passed and check.metadata["named"].value == "tcga_slidebench 102 (applied)"
    assert meta["errata_mode"].value == "apply" and meta["errata_found"].value == 1
    assert RELEASED_102 in meta["errata"].value and OFFICIAL_102 in meta["errata"].value


def test_flag_asks_the_released_text_and_marks_the_row(data_dir, released_format):
    items, check, meta = _materialize(data_dir, released_format, errata="flag")
    flagged = items.loc[("tcga_slidebench", "102")]
    assert flagged["erratum"] == "flagged" and flagged["prompt_template"] == RELEASED_102
    assert flagged["prompt"].startswith(RELEASED_102 + "\n") and OFFICIAL_102 not in flagged["prompt"]
    _untouched(items)
    assert set(items["errata_mode"]) == {"flag"}
    assert check.passed and check.metadata["named"].value == "tcga_slidebench 102 (flagged)"
    assert check.metadata["errata_mode"].value == "flag"


def test_exclude_drops_the_row_from_the_environment(data_dir, released_format, monkeypatch):
    monkeypatch.setenv("GIANT_ERRATA", "exclude")
    items, check, meta = _materialize(data_dir, released_format)
    assert ("tcga_slidebench", "102") not in items.index and len(items) == 3
    _untouched(items)
    assert set(items["errata_mode"]) == {"exclude"} and check.passed
    assert meta["errata_found"].value == 1 and "excluded" in meta["errata"].value


def test_unknown_errata_mode_is_one_clear_error(data_dir, released_format, monkeypatch):
    monkeypatch.setenv("GIANT_ERRATA", "fix")
    path, root = released_format
    res = resources_for(data_dir, source="local", csv_path=str(path), wsi_root=str(root))
    with pytest.raises(ValueError, match=r"GIANT_ERRATA='fix': expected one of apply, flag, exclude"):
        materialize(INGEST[:2], resources=res, instance=DagsterInstance.ephemeral())


def test_bundled_errata_are_the_ten_slidebench_rows_each_with_its_evidence():
    errata = load_errata()
    assert errata["benchmark_name"].eq("tcga_slidebench").all()
    assert sorted(errata["benchmark_id"].astype(int)) == [17, 44, 45, 51, 52, 63, 70, 76, 102, 120]
    assert (errata["released_question"] != errata["official_question"]).all()
    assert errata["source"].str.contains("benchmarks/slidebench_small.csv").all()
    assert errata["evidence"].str.len().gt(0).all()
    assert errata[["image_path", "released_question"]].drop_duplicates().shape[0] == 10


def test_leaderboard_and_results_json_say_which_errata_mode_was_used(data_dir, released_format):
    _materialize(data_dir, released_format, errata="flag")
    metrics = pd.DataFrame(
        [
            {
                "experiment": "x",
                "benchmark_name": "tcga_slidebench",
                "n_items": 4,
                "n_slide_readable": 4,
                "n_answered": 4,
                "boot_mean_pct": 50.0,
                "boot_std_pct": 25.0,
                "cost_usd": 0.0,
            }
        ]
    )
    ParquetStore(data_dir).write("benchmark_metrics", metrics)
    upstream = [SourceAsset(key=k) for k in ("benchmark_metrics", "multipathqa_csv", "benchmark_items")]
    result = materialize(
        [*upstream, leaderboard],
        selection=[leaderboard],
        resources=resources_for(data_dir),
        instance=DagsterInstance.ephemeral(),
    )
    meta = result.asset_materializations_for_node("leaderboard")[0].metadata
    assert meta["errata"].value == "flag: tcga_slidebench 102 (released text asked, flagged)"
    doc = json.loads((data_dir / "results" / "x" / "results.json").read_text())
    assert doc["provenance"]["errata"] == {"mode": "flag", "items": {"tcga_slidebench": ["102"]}}
