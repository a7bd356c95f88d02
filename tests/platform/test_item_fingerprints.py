"""An answer belongs to one question about one slide: real materializations over one data dir whose CSV
and WSI root change under it, GIANT against a loopback model that counts every request.

1. bundled sample -> a CSV in the real format where tcga_expert_vqa ids 0 and 1 are other questions on
   other slides: nothing is reused, and every stored truth label agrees with benchmark_items;
2. the same CSV at a new path and the WSI root moved (copied, the old one removed): everything is
   reused, zero model requests;
3. the WSI root unmounted (an empty mount point): the finished answers are kept (slide_verified false),
   nothing is asked, the score is unchanged;
4. a journal written before fingerprints (legacy rows): a row that matches its item is reused and
   rewritten with the fingerprint, one that does not is set aside, counted and left in the file.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import serve_demo_model
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.runs.replies import replies_path
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

KEY_ENV = "GIANT_TEST_FINGERPRINT_KEY"
BENCH = "tcga_expert_vqa"
EXPERIMENT = "fp"
CELL = AssetSelection.assets("predictions", "item_predictions", "benchmark_metrics")
INGEST = AssetSelection.assets("multipathqa_csv", "benchmark_items")
NEW_FIELDS = ("item_fingerprint", "question_fingerprint", "slide_verified")


def sample_rows() -> list[dict[str, str]]:
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def swapped_expert_rows() -> list[dict[str, str]]:
    """The sample with tcga_expert_vqa ids 0 and 1 trading question, slide and answer (as ids of the
    real MultiPathQA.csv name other questions than the sample's)."""
    rows = sample_rows()
    expert = [r for r in rows if r["benchmark_name"] == BENCH]
    assert [r["benchmark_id"] for r in expert] == ["0", "1"]
    expert[0]["benchmark_id"], expert[1]["benchmark_id"] = "1", "0"
    return rows


class Platform:
    """One data dir and one Dagster instance; CSV and WSI root are swapped between materializations."""

    def __init__(self, tmp_path: Path, server_url: str) -> None:
        self.data = tmp_path / "data"
        self.instance = DagsterInstance.ephemeral()
        self.declared = write_experiments(
            tmp_path / "experiments.yaml",
            {
                EXPERIMENT: {
                    "agent": "giant",
                    "model": "scripted-fingerprint",
                    "base_url": server_url,
                    "api_key_env": KEY_ENV,
                    "max_steps": 3,
                }
            },
        )
        add_experiments(self.instance, EXPERIMENT)
        self.store = ParquetStore(self.data)

    def materialize(self, wsi_root: Path, **dataset: str):
        resources = resources_for(self.data, self.declared, wsi_root=str(wsi_root), **dataset)
        ingest = materialize(ALL_ASSETS, selection=INGEST, resources=resources, instance=self.instance)
        assert ingest.success
        result = materialize(
            ALL_ASSETS,
            selection=CELL,
            partition_key=result_key(EXPERIMENT, BENCH),
            resources=resources,
            instance=self.instance,
        )
        assert result.success
        meta = result.asset_materializations_for_node("predictions")[0].metadata
        return {k: v.value for k, v in meta.items()}, result

    def predictions(self):
        return self.store.read("predictions", [f"{EXPERIMENT}/{BENCH}"]).sort_values("benchmark_id")

    def items(self):
        items = self.store.read("benchmark_items")
        return items[items["benchmark_name"] == BENCH].sort_values("benchmark_id")

    def metric(self) -> float:
        return float(self.store.read("benchmark_metrics", [f"{EXPERIMENT}/{BENCH}"]).iloc[0]["value_pct"])

    def journal(self) -> Path:
        (path,) = (self.data / "journals").glob(f"*/{BENCH}.jsonl")
        return path


@pytest.fixture
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, "sk-fingerprint-test")
    monkeypatch.setenv("GIANT_DATA_DIR", str(tmp_path / "data"))
    server = serve_demo_model()
    try:
        yield Platform(tmp_path, server.openai_base_url), server
    finally:
        server.stop()


def test_switching_csv_moving_the_root_and_unmounting_it(platform, sample_wsi_root: Path, tmp_path: Path):
    plat, server = platform
    root = tmp_path / "share_a"
    shutil.copytree(sample_wsi_root, root)

    # the bundled sample
    meta, _ = plat.materialize(root)
    assert meta["executed_now"] == 2 and meta["reused_from_journal"] == 0
    asked_sample = len(server.requests)
    assert asked_sample > 0
    sample_answers = plat.predictions()

    # the real format, ids 0 and 1 now other questions about other slides: nothing reused
    real = write_csv(tmp_path / "downloads" / "MultiPathQA.csv", swapped_expert_rows())
    meta, _ = plat.materialize(root, source="local", csv_path=str(real))
    assert meta["reused_from_journal"] == 0 and meta["executed_now"] == 2
    asked_real = len(server.requests)
    assert asked_real > asked_sample
    runs, items = plat.predictions(), plat.items()
    assert runs["truth_label"].tolist() == items["truth_label"].tolist() == [2, 3]
    assert runs["item_fingerprint"].tolist() == items["item_fingerprint"].tolist()
    before = sample_answers["item_fingerprint"].tolist()
    assert all(a != b for a, b in zip(runs["item_fingerprint"], before, strict=True))
    assert runs["slide_verified"].all()
    score = plat.metric()

    # the same CSV at a new path, the WSI root moved: every answer reused, zero requests
    moved_csv = write_csv(tmp_path / "elsewhere" / "questions.csv", swapped_expert_rows())
    real.unlink()
    moved_root = tmp_path / "share_b"
    shutil.copytree(root, moved_root)
    shutil.rmtree(root)
    meta, _ = plat.materialize(moved_root, source="local", csv_path=str(moved_csv))
    assert meta["reused_from_journal"] == 2 and meta["executed_now"] == 0
    assert len(server.requests) == asked_real
    again = plat.predictions()
    assert again["answer_text"].tolist() == runs["answer_text"].tolist()
    assert plat.metric() == score

    # the share unmounted: the mount point is there, empty; the answers stay, unverified
    moved_root.rename(tmp_path / "share_b_offline")
    moved_root.mkdir()
    meta, _ = plat.materialize(moved_root, source="local", csv_path=str(moved_csv))
    assert (plat.items()["wsi_status"] == "missing").all()
    assert meta["slide_unverified"] == 2 and meta["executed_now"] == 0
    assert meta["errors_by_kind"] == {}
    assert len(server.requests) == asked_real
    kept = plat.predictions()
    assert kept["error_kind"].isna().all() and not kept["slide_verified"].any()
    assert kept["answer_text"].tolist() == runs["answer_text"].tolist()
    assert kept["truth_label"].tolist() == [2, 3]
    assert plat.metric() == score


def strip_to_legacy(journal: Path) -> list[dict]:
    """Rewrite the journal as the code before fingerprints wrote it (schema 2, no fingerprint fields);
    that code kept no reply store either."""
    replies_path(journal).unlink()
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    legacy = [{k: v for k, v in r.items() if k not in NEW_FIELDS} | {"schema_version": 2} for r in rows]
    journal.write_text("".join(json.dumps(r) + "\n" for r in legacy))
    return legacy


def test_legacy_journal_rows_are_adopted_when_they_match_and_set_aside_when_not(
    platform, sample_wsi_root: Path, tmp_path: Path
):
    plat, server = platform
    meta, _ = plat.materialize(sample_wsi_root)
    assert meta["executed_now"] == 2
    legacy = strip_to_legacy(plat.journal())
    asked = len(server.requests)

    # the CSV corrects the answer of id 1: its legacy row no longer matches; id 0's still does
    rows = sample_rows()
    changed = next(r for r in rows if r["benchmark_name"] == BENCH and r["benchmark_id"] == "1")
    changed["answer"] = "1"
    corrected = write_csv(tmp_path / "corrected.csv", rows)
    meta, result = plat.materialize(sample_wsi_root, source="local", csv_path=str(corrected))
    assert meta["reused_from_journal"] == 1 and meta["legacy_rows_rewritten"] == 1
    assert meta["set_aside_from_journal"] == 1 and meta["executed_now"] == 1
    asked_id1 = len(server.requests) - asked
    assert asked_id1 > 0  # only id 1 went to the model: one conversation
    assert sum(r.assistant_turns == 0 for r in server.requests[asked:]) == 1
    logs = [e.user_message for e in plat.instance.all_logs(result.run_id)]
    assert any("1 run(s) journalled before item fingerprints do not match" in m for m in logs)

    lines = [json.loads(x) for x in plat.journal().read_text().splitlines()]
    assert lines[: len(legacy)] == legacy  # nothing deleted or edited in place
    items = plat.items().set_index("benchmark_id")
    appended = {r["benchmark_id"]: r for r in lines[len(legacy) :]}
    assert appended["0"]["item_fingerprint"] == items.loc["0", "item_fingerprint"]
    legacy_0 = next(r for r in legacy if r["benchmark_id"] == "0")
    assert appended["0"]["answer_text"] == legacy_0["answer_text"]
    assert appended["0"]["finished_at"] == legacy_0["finished_at"]
    assert appended["1"]["item_fingerprint"] == items.loc["1", "item_fingerprint"]
    runs = plat.predictions()
    assert runs["truth_label"].tolist() == [3, 1]

    # again: both now carry fingerprints, the set-aside legacy row is still counted, nothing is asked
    asked = len(server.requests)
    meta, _ = plat.materialize(sample_wsi_root, source="local", csv_path=str(corrected))
    assert meta["reused_from_journal"] == 2 and meta["executed_now"] == 0
    assert meta["legacy_rows_rewritten"] == 0 and meta["set_aside_from_journal"] == 1
    assert len(server.requests) == asked
