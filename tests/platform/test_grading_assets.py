"""The graded_submissions asset (real materializations on an ephemeral instance) and its sensor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dagster import (
    DagsterInstance,
    SensorResult,
    SkipReason,
    SourceAsset,
    build_sensor_context,
    materialize,
)
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.core.storage import ParquetStore
from giant_assets.grading.submissions import partition_key_for, submission_files
from giant_assets.platform.assets.grading import (
    GRADING_ASSETS,
    graded_submissions,
    make_submissions_sensor,
    submission_partitions,
)
from giant_assets.platform.resources import StorageResource
from tests.grading.conftest import make_items, write_submission
from tests.support.dagster_env import resources_for

# the upstream table is loaded by the IO manager from the Parquet file the fixture writes
ITEMS_SOURCE = SourceAsset(key="benchmark_items")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    ParquetStore(root).write("benchmark_items", make_items(n_per=25, seed=9))
    (root / "submissions").mkdir()
    return root


def grade_partitions(root: Path, keys: list[str]):
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(submission_partitions.name, keys)
    return [
        materialize(
            [ITEMS_SOURCE, graded_submissions],
            selection=[graded_submissions],
            partition_key=k,
            instance=instance,
            resources=resources_for(root),
        )
        for k in keys
    ]


def test_exports() -> None:
    assert [graded_submissions] == GRADING_ASSETS and make_submissions_sensor().name == "submissions_sensor"
    assert submission_partitions.name == "submissions"


def test_materialize_two_submissions(root: Path) -> None:
    items = ParquetStore(root).read("benchmark_items")
    gtex = items[items["benchmark_name"] == "gtex"]
    preds = np.where(np.arange(len(gtex)) % 3 == 0, gtex["truth_label"], 1)
    write_submission(root / "submissions" / "gtex__my run.csv", gtex["benchmark_id"], preds)
    vqa = items[items["benchmark_name"] == "tcga_expert_vqa"]
    (root / "submissions" / "multi.jsonl").write_text(
        "".join(
            json.dumps({"task_id": "tcga_expert_vqa", "benchmark_id": b, "prediction": int(t)}) + "\n"
            for b, t in zip(vqa["benchmark_id"], vqa["truth_label"], strict=True)
        )
        + json.dumps({"task_id": "panda", "benchmark_id": "0", "prediction": 9})
        + "\n"
    )
    keys = sorted(submission_files(root / "submissions"))
    assert keys == [
        "gtex__my_run.csv-" + partition_key_for("gtex__my run.csv").rsplit("-", 1)[1],
        "multi.jsonl",
    ]
    results = grade_partitions(root, keys)
    assert all(r.success for r in results)
    table = ParquetStore(root).query("SELECT * FROM graded_submissions ORDER BY partition_key, task_id")
    assert table["partition_key"].tolist() == [keys[0], keys[1], keys[1]]
    gtex_row = table.iloc[0]
    assert gtex_row["task_id"] == "gtex" and gtex_row["submission_file"] == "gtex__my run.csv"
    assert gtex_row["score"] == pytest.approx(balanced_accuracy_score(gtex["truth_label"], preds))
    assert bool(gtex_row["valid_submission"]) and gtex_row["leaderboard_size"] == 4
    panda, vqa_row = table.iloc[1], table.iloc[2]
    assert panda["task_id"] == "panda" and not panda["valid_submission"]
    assert "prediction '9' is out of range; allowed: an integer 0..5" in panda["error"]
    assert vqa_row["score"] == accuracy_score(vqa["truth_label"], vqa["truth_label"]) == 1.0
    assert vqa_row["medal"] == "gold" and vqa_row["rank"] == 1
    meta = results[0].asset_materializations_for_node("graded_submissions")[0].metadata
    assert meta["score"].value == pytest.approx(gtex_row["score"])
    assert meta["medal"].value == "none" and meta["valid"].value is True
    assert "| gtex " in meta["report"].value
    meta_multi = results[1].asset_materializations_for_node("graded_submissions")[0].metadata
    assert meta_multi["valid"].value is False and json.loads(meta_multi["medal"].value)["gold"] == 1


def test_user_task_files_in_data_dir(root: Path) -> None:
    (root / "tasks").mkdir()
    pd.DataFrame({"benchmark_id": ["a", "b", "c"], "truth_label": [1.0, 2.0, 4.0]}).to_csv(
        root / "tasks" / "answers.csv", index=False
    )
    (root / "tasks" / "toy.yaml").write_text("id: toy\nanswers: answers.csv\nmetric: rmse\n")
    (root / "tasks" / "broken.yaml").write_text("id: [\n")
    write_submission(root / "submissions" / "toy__1.csv", ["a", "b", "c"], [1.0, 2.0, 2.0])
    (result,) = grade_partitions(root, ["toy__1.csv"])
    assert result.success
    row = ParquetStore(root).read("graded_submissions").iloc[0]
    assert row["task_id"] == "toy" and row["score"] == pytest.approx(np.sqrt(4 / 3))
    assert row["is_lower_better"]


def test_missing_file_fails_the_run(root: Path) -> None:
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(submission_partitions.name, ["gone.csv"])
    result = materialize(
        [ITEMS_SOURCE, graded_submissions],
        selection=[graded_submissions],
        partition_key="gone.csv",
        instance=instance,
        resources=resources_for(root),
        raise_on_error=False,
    )
    assert not result.success


def test_sensor_adds_partitions_and_requests_runs(root: Path) -> None:
    sub = root / "submissions"
    instance = DagsterInstance.ephemeral()
    storage = StorageResource(data_dir=str(root))

    def tick(cursor: str | None):
        ctx = build_sensor_context(instance=instance, cursor=cursor, resources={"storage": storage})
        return make_submissions_sensor()(ctx)

    assert isinstance(tick(None), SkipReason)
    write_submission(sub / "gtex__a.csv", ["x"], [1])
    write_submission(sub / "weird name (2).csv", ["x"], [1])
    (sub / ".hidden.csv").write_text("x")
    (sub / "notes.txt").write_text("x")
    first = tick(None)
    assert isinstance(first, SensorResult)
    weird_key = partition_key_for("weird name (2).csv")
    assert weird_key.startswith("weird_name_2_.csv-") and len(weird_key.rsplit("-", 1)[1]) == 10
    assert sorted(r.partition_key for r in first.run_requests) == sorted(["gtex__a.csv", weird_key])
    (add,) = first.dynamic_partitions_requests
    assert sorted(add.partition_keys) == sorted(["gtex__a.csv", weird_key])
    instance.add_dynamic_partitions(submission_partitions.name, list(add.partition_keys))
    assert isinstance(tick(first.cursor), SkipReason)  # nothing new
    path = sub / "gtex__a.csv"
    write_submission(path, ["x", "y"], [1, 2])  # rewritten: graded again, no new partition
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    again = tick(first.cursor)
    assert [r.partition_key for r in again.run_requests] == ["gtex__a.csv"]
    assert not again.dynamic_partitions_requests
    assert again.run_requests[0].run_key != first.run_requests[0].run_key


@pytest.mark.parametrize(
    "name", ["a.csv", "run-1.2_x.jsonl", "..x.csv", "a b.csv", "é.csv", "x" * 300 + ".csv", "$(rm).csv"]
)
def test_partition_keys_are_store_safe_and_distinct(tmp_path: Path, name: str) -> None:
    key = partition_key_for(name)
    ParquetStore(tmp_path).partition_path("t", key)  # raises on an unsafe name
    assert len(key) <= 200 and not key.startswith(".")
    assert (key == name) == (name in ("a.csv", "run-1.2_x.jsonl"))
    assert partition_key_for(name + "x") != key
