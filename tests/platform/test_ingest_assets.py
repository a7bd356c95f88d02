"""Real materializations of the ingest assets and their checks into a temp DuckDB/Parquet store."""

from __future__ import annotations

import csv

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from giant_assets.multipathqa.fingerprint import item_set_fingerprint
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.checks import ITEM_CHECKS
from tests.support.dagster_env import resources_for
from tests.support.hf_server import HubServer

INGEST = [multipathqa_csv, benchmark_items, *ITEM_CHECKS]


def test_sample_materializes_to_duckdb_with_missing_slides_reported(data_dir, sample_wsi_root):
    result = materialize(
        INGEST,
        resources=resources_for(data_dir, wsi_root=str(sample_wsi_root)),
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    con = duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True)
    counts = dict(con.sql("select benchmark_name, count(*) from benchmark_items group by 1").fetchall())
    assert counts == {"gtex": 3, "tcga": 3, "panda": 3, "tcga_slidebench": 3, "tcga_expert_vqa": 2}
    status = dict(con.sql("select wsi_status, count(*) from benchmark_items group by 1").fetchall())
    assert status == {"ok": 11, "missing": 2, "unreadable": 1}
    meta = result.asset_materializations_for_node("benchmark_items")[0].metadata
    assert meta["slides_found"].value == 11 and meta["items"].value == 14
    items = result.output_for_node("benchmark_items")
    assert (
        items["item_fingerprint"].str.fullmatch("[0-9a-f]{64}").all() and items["item_fingerprint"].is_unique
    )
    assert meta["item_set_fingerprint"].value == item_set_fingerprint(items)
    stored = con.sql("select count(distinct item_fingerprint) from benchmark_items").fetchone()
    assert stored == (14,)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "items_unique_ids": True,
        "items_truth_in_range": True,
        "items_slides_readable": False,
        "items_prompts_show_options": True,
        "items_errata": True,  # the sample's ids 0..2 are no errata: matched by content, nothing touched
    }
    assert set(con.sql("select erratum from benchmark_items").fetchall()) == {("",)}
    csv_meta = result.asset_materializations_for_node("multipathqa_csv")[0].metadata
    assert csv_meta["rows"].value == 14 and len(csv_meta["sha256"].value) == 64


def test_malformed_local_csv_fails_listing_every_bad_row(data_dir, sample_wsi_root, tmp_path):
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    rows[0]["answer"], rows[3]["answer"] = "Appendix", "99"
    bad = tmp_path / "MultiPathQA.csv"
    with open(bad, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = resources_for(data_dir, source="local", csv_path=str(bad), wsi_root=str(sample_wsi_root))
    result = materialize(
        INGEST[:2], resources=res, instance=DagsterInstance.ephemeral(), raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    text = str(failure.event_specific_data.error)
    assert "2 malformed row field(s)" in text
    assert f"{bad}: row 2 (benchmark_id='GTEX-1117F-0126'), field 'answer'" in text
    assert f"{bad}: row 5 (benchmark_id='0'), field 'answer': option index 99 out of range 1..30" in text


def test_skip_mode_keeps_the_good_rows(data_dir, sample_wsi_root, tmp_path):
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    rows[0]["benchmark_name"] = "unknown"
    bad = tmp_path / "x.csv"
    with open(bad, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = resources_for(data_dir, source="local", csv_path=str(bad), wsi_root=str(sample_wsi_root))
    result = materialize(
        INGEST[:2],
        resources=res,
        instance=DagsterInstance.ephemeral(),
        run_config={"ops": {"benchmark_items": {"config": {"on_invalid_rows": "skip"}}}},
    )
    meta = result.asset_materializations_for_node("benchmark_items")[0].metadata
    assert meta["items"].value == 13 and meta["skipped_malformed_rows"].value == 1


def test_huggingface_source_through_loopback_hub(data_dir, sample_wsi_root):
    body = sample_csv_path().read_bytes()
    with HubServer({("tbuckley/MultiPathQA", "MultiPathQA.csv"): body}) as (endpoint, hub):
        res = resources_for(
            data_dir, source="huggingface", hf_endpoint=endpoint, wsi_root=str(sample_wsi_root)
        )
        result = materialize(INGEST[:2], resources=res, instance=DagsterInstance.ephemeral())
    assert result.success and len(hub.gets) == 1
    meta = result.asset_materializations_for_node("multipathqa_csv")[0].metadata
    assert meta["source"].value == "huggingface tbuckley/MultiPathQA@main"
    assert "hf_cache" in meta["path"].value


def test_missing_wsi_root_is_a_clear_error(data_dir, tmp_path):
    res = resources_for(
        data_dir, source="local", csv_path=str(sample_csv_path()), wsi_root=str(tmp_path / "nope")
    )
    with pytest.raises(FileNotFoundError, match="nope is not a directory"):
        materialize(INGEST[:2], resources=res, instance=DagsterInstance.ephemeral())


def test_real_format_question_only_prompts_show_their_options_and_the_check_catches_a_hidden_list(
    data_dir, sample_wsi_root, tmp_path
):
    """Real CSV quirks: VQA prompts are bare questions (options only in the options column, here the
    Gleason-pattern options '2'..'5' whose texts are themselves numbers); a template whose placeholder
    is escaped (``{{options}}``) renders no options at all, and the asset check must say so."""
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    vqa = [r for r in rows if r["benchmark_name"] in ("tcga_slidebench", "tcga_expert_vqa")]
    assert vqa and all("{options}" not in r["prompt"] and "1." not in r["prompt"] for r in vqa)
    rows[0]["prompt"] = rows[0]["prompt"].replace("{options}", "{{options}}")
    path = tmp_path / "MultiPathQA.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = resources_for(data_dir, source="local", csv_path=str(path), wsi_root=str(sample_wsi_root))
    result = materialize(INGEST, resources=res, instance=DagsterInstance.ephemeral())
    con = duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True)
    gleason = con.sql(
        "select prompt from benchmark_items where benchmark_name = 'tcga_expert_vqa' and benchmark_id = '0'"
    ).fetchone()[0]
    assert gleason.startswith("What is the secondary Gleason pattern")
    assert "\n1. 2\n2. 3\n3. 4\n4. 5\n" in gleason and '{"answer": N}' in gleason
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    failed = checks["items_prompts_show_options"]
    assert not failed.passed and failed.metadata["items_missing_options"].value == 1
    assert "GTEX-1117F-0126" in failed.metadata["examples"].value
