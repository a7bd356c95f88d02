"""The predictions' own export, graded as a submission, gives benchmark_metrics' number (issue 5).

Real materializations in a temp data dir: ingest the sample, run an agent over two benchmarks, one of
each metric (votes over 3 runs; panda's corrupt slide gives an empty prediction), then drop each
``exports/<experiment>/<benchmark>.csv`` into ``submissions/`` as ``<task>__<anything>.csv`` and
materialize its ``graded_submissions`` partition.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dagster import AssetSelection, DagsterInstance, materialize
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.core.storage import ParquetStore
from giant_assets.eval.export import SUBMISSION_COLUMNS, submission_frame
from giant_assets.grading.submissions import partition_key_for
from giant_assets.platform.assets.grading import SUBMISSIONS_DIR, graded_submissions, submission_partitions
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.predictions import predictions
from giant_assets.platform.assets.scores import benchmark_metrics, item_predictions
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

ASSETS = [
    multipathqa_csv,
    benchmark_items,
    predictions,
    item_predictions,
    benchmark_metrics,
    graded_submissions,
]
EXPERIMENT = "random-seed7"
pytestmark = pytest.mark.xdist_group("export_grading")  # one worker builds the module's fixture once
SETTINGS = {"agent": "random", "seed": 7, "runs_per_item": 3}
# balanced accuracy with an unreadable slide, plain accuracy; the demo test grades tcga (a missing slide)
BENCHMARKS = ["panda", "tcga_slidebench"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path):
    data = tmp_path_factory.mktemp("export") / "data"
    instance = DagsterInstance.ephemeral()
    declared = write_experiments(data.parent / "experiments.yaml", {EXPERIMENT: SETTINGS})
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    add_experiments(instance, EXPERIMENT)

    def run(selection, **kwargs):
        result = materialize(ASSETS, selection=selection, resources=resources, instance=instance, **kwargs)
        assert result.success
        return result

    run([multipathqa_csv, benchmark_items])
    exports, keys = {}, {}
    per_benchmark = AssetSelection.assets(predictions, item_predictions, benchmark_metrics)
    for benchmark in BENCHMARKS:
        result = run(per_benchmark, partition_key=result_key(EXPERIMENT, benchmark))
        meta = result.asset_materializations_for_node("item_predictions")[0].metadata
        exports[benchmark] = Path(meta["submission_export"].value)
        submission = data / SUBMISSIONS_DIR / f"{benchmark}__random-seed7.csv"
        submission.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(exports[benchmark], submission)
        keys[benchmark] = partition_key_for(submission.name)
    instance.add_dynamic_partitions(submission_partitions.name, list(keys.values()))
    for key in keys.values():
        run([graded_submissions], partition_key=key)
    return ParquetStore(data), exports


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_graded_export_equals_benchmark_metrics(graded, benchmark: str) -> None:
    store, exports = graded
    report = store.read("graded_submissions", [partition_key_for(f"{benchmark}__random-seed7.csv")])
    assert len(report) == 1 and report.at[0, "task_id"] == benchmark
    assert bool(report.at[0, "valid_submission"]), report.at[0, "error"]
    metrics = store.read("benchmark_metrics", [f"{EXPERIMENT}/{benchmark}"]).iloc[0]
    assert 100 * report.at[0, "score"] == pytest.approx(metrics["value_pct"], abs=1e-9)

    # a third path: sklearn over the export file itself (an empty prediction is an abstention: wrong)
    export = pd.read_csv(exports[benchmark], dtype=str, keep_default_na=False)
    items = store.read("benchmark_items")
    truth = items[items.benchmark_name == benchmark].set_index("benchmark_id")["truth_label"]
    assert list(export.columns) == SUBMISSION_COLUMNS and sorted(export.benchmark_id) == sorted(truth.index)
    y_pred = np.array([int(p) if p else -1 for p in export.prediction])
    y_true = truth.loc[export.benchmark_id].to_numpy(dtype=np.int64)
    score = balanced_accuracy_score if metrics["metric_type"] == "balanced_accuracy" else accuracy_score
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn notes that -1 (abstention) is not a true class
        expected = score(y_true, y_pred)
    assert report.at[0, "score"] == pytest.approx(expected, abs=1e-12)


def test_items_without_a_slide_are_exported_as_empty_predictions(graded) -> None:
    store, exports = graded
    voted = store.read("item_predictions")
    unavailable = voted[~voted.slide_available]
    assert list(unavailable.benchmark_name) == ["panda"]  # its corrupt slide
    for row in unavailable.itertuples():
        export = pd.read_csv(exports[row.benchmark_name], dtype=str, keep_default_na=False)
        assert export.set_index("benchmark_id").at[row.benchmark_id, "prediction"] == ""
    for benchmark in BENCHMARKS:
        frame = submission_frame(voted[voted.benchmark_name == benchmark])
        assert frame.equals(pd.read_csv(exports[benchmark], dtype=str, keep_default_na=False))
