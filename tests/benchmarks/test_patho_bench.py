"""`giant-benchmarks import-patho-bench`: a task folder in Patho-Bench's layout (config.yaml, k=all.tsv)
becomes a declaration the experiments loader and `giant-experiments check` accept, over generated slides;
the random agent runs on it through real materializations; hostile task folders get clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetSelection, DagsterInstance, materialize
from sklearn.metrics import balanced_accuracy_score

from giant_assets.benchmarks.cli import main
from giant_assets.benchmarks.patho_bench import PathoBenchError, read_task
from giant_assets.core.storage import ParquetStore
from giant_assets.experiments.declared import load_benchmarks
from giant_assets.platform import experiments_cli
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.partitions import result_key
from giant_assets.slides.synthetic import TISSUE, Blob, SlideDesign
from tests.support.dagster_env import add_experiments, resources_for
from tests.support.slides import write_pyramidal_slide

FIXTURES = Path(__file__).parent / "fixtures" / "patho_bench"
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
# bcnb/er, fold_0's test rows: slide id -> class (row 7 has no label and is skipped, as Patho-Bench does)
ER_TEST = {"2": "negative", "3": "positive", "4": "negative"}


def _slide(path: Path) -> None:
    write_pyramidal_slide(path, SlideDesign(1024, 768, (Blob(512, 384, 300, 200, TISSUE),), ()), levels=2)


def _copy(tmp_path: Path, task: str = "bcnb/er") -> Path:
    folder = tmp_path / "tasks" / task
    shutil.copytree(FIXTURES / task, folder)
    return folder


def test_a_task_imports_checks_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    wsi = tmp_path / "wsi"
    _slide(wsi / "2.tiff")
    _slide(wsi / "batch1" / "3.svs")  # any extension OpenSlide opens, in a sub-folder
    _slide(wsi / "4.tif")
    _slide(wsi / "1.tiff")  # a training slide: not an item
    (wsi / "4.txt").write_text("not a slide")  # same id, not a slide extension: ignored
    out = tmp_path / "er.yaml"
    assert (
        main(["import-patho-bench", str(FIXTURES / "bcnb" / "er"), "--out", str(out), "--wsi-root", str(wsi)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "benchmark 'bcnb-er', answer label (balanced_accuracy), 3 item(s)" in printed
    assert "1 test row(s) without a label skipped" in printed and "3 of 3 slide(s) found" in printed

    items = pd.read_csv(tmp_path / "er.csv", dtype=str)
    assert items["slide_id"].tolist() == list(ER_TEST)
    assert items["slide"].tolist() == ["2.tiff", "batch1/3.svs", "4.tif"]
    assert items["answer"].tolist() == list(ER_TEST.values())
    assert set(items["options"]) == {"['negative', 'positive']"}
    assert set(items["question"]) == {
        "What is the er of this bcnb whole-slide image? Choose one of the options."
    }

    declared = load_benchmarks(out)["bcnb-er"]  # the platform's own loader
    assert (declared.answer, declared.metric, declared.wsi_root) == ("label", "balanced_accuracy", wsi)
    assert declared.items == tmp_path / "er.csv"
    assert experiments_cli.main(["--file", str(out), "check"]) == 0
    assert "3 row(s), 3 valid item(s), 3 slide(s) found" in capsys.readouterr().out

    data, instance = tmp_path / "data", DagsterInstance.ephemeral()
    resources = resources_for(data, experiments_file=out)
    add_experiments(instance, "random")
    for selection, key in [
        (AssetSelection.assets("multipathqa_csv", "benchmark_items"), None),
        (CELL, result_key("random", "bcnb-er")),
    ]:
        result = materialize(
            ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
        )
        assert result.success
    store = ParquetStore(data)
    voted = store.read("item_predictions", ["random/bcnb-er"]).set_index("benchmark_id")
    truth = [1 if ER_TEST[i] == "negative" else 2 for i in voted.index]  # options: negative, positive
    expected = balanced_accuracy_score(truth, voted["predicted_label"].astype(int))
    row = store.read("benchmark_metrics").set_index("experiment").loc["random"]
    assert row["metric_type"] == "balanced_accuracy" and row["n_items"] == 3
    assert row["value_pct"] == pytest.approx(100 * expected)


def test_an_ordinal_task_is_a_grade_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GIANT_WSI_ROOT", raising=False)
    out = tmp_path / "isup.yaml"
    assert main(["import-patho-bench", str(FIXTURES / "panda" / "isup_grade"), "--out", str(out)]) == 0
    assert (
        "benchmark 'panda-isup_grade', answer grade (quadratic_kappa), 4 item(s)" in capsys.readouterr().out
    )
    items = pd.read_csv(tmp_path / "isup.csv", dtype=str)
    assert items["answer"].tolist() == ["0", "2", "2", "3"] and "options" not in items
    assert items["slide"].tolist() == ["p01.svs", "p02.svs", "p03.svs", "p04.svs"]  # no --wsi-root
    assert (
        '{"answer": N}, N the grade from 0 to 5' in items["question"][0]
        and "3 = ISUP 3" in items["question"][0]
    )
    declared = load_benchmarks(out)["panda-isup_grade"]
    assert (declared.answer, declared.metric, declared.wsi_root) == ("grade", "quadratic_kappa", None)
    assert "wsi_root: /path/to/slides" in out.read_text()  # the comment says how to point it at slides
    wsi = tmp_path / "wsi"
    for n in (1, 2, 3, 4):
        _slide(wsi / f"p0{n}.svs")
    assert experiments_cli.main(["--file", str(out), "check"]) == 0
    assert "4 valid item(s), slides not checked" in capsys.readouterr().out  # no root known yet
    text = out.read_text().replace("    description:", f"    wsi_root: {wsi}\n    description:")
    out.write_text(text)
    assert experiments_cli.main(["--file", str(out), "check"]) == 0
    assert "4 row(s), 4 valid item(s), 4 slide(s) found" in capsys.readouterr().out
    # --nominal overrides the detection
    assert (
        main(
            [
                "import-patho-bench",
                str(FIXTURES / "panda" / "isup_grade"),
                "--out",
                str(out),
                "--force",
                "--nominal",
            ]
        )
        == 0
    )
    assert load_benchmarks(out)["panda-isup_grade"].answer == "label"


def _broken(tmp_path: Path, config: str | None = None, split: str | None = None) -> Path:
    folder = _copy(tmp_path)
    if config is not None:
        (folder / "config.yaml").write_text(config)
    if split is not None:
        (folder / "k=all.tsv").write_text(split)
    return folder


HEAD = "case_id\tslide_id\ter\tfold_0\n"
CONFIG = (FIXTURES / "bcnb" / "er" / "config.yaml").read_text()


@pytest.mark.parametrize(
    ("config", "split", "message"),
    [
        (
            None,
            HEAD + "1\t1\t0\ttest\n2\t2\t7\ttest\n",
            r"k=all\.tsv: row 3, column 'er': label '7' is not in label_dict \(0, 1\)",
        ),
        (None, HEAD + "1\t1\t0\ttest\n2\t1\t1\ttest\n", r"row 3, column 'slide_id': '1' repeats row 2"),
        (
            None,
            HEAD + "1\t1\t0\ttrain\n2\t2\t1\ttrain\n",
            r"column 'fold_0': no test row with a label \(no test split\)",
        ),
        (None, HEAD + "1\t../etc/x\t0\ttest\n", r"row 2, column 'slide_id': '\.\./etc/x' is not a file name"),
        (
            None,
            HEAD + "1\t1\t0\tholdout\n",
            r"row 2, column 'fold_0': 'holdout' is not one of train, val, test",
        ),
        (None, "case_id\tslide_id\ter\n1\t1\t0\n", r"missing required column\(s\) \['fold_0'\]"),
        (None, HEAD + "1\t1\t" + "9" * 5000 + "\ttest\n", r"row 2, column 'er': label '9999"),
        (CONFIG.replace("classification", "survival"), None, r"field 'task_type': 'survival'"),
        (
            CONFIG.replace("1: positive", "1: negative"),
            None,
            r"field 'label_dict': class name\(s\) \['negative'\]",
        ),
        (
            CONFIG.replace("1: positive", "x: positive"),
            None,
            r"field 'label_dict': label 'x' is not an integer",
        ),
        (CONFIG.replace("task_col: er", "task_col: [er]"), None, r"field 'task_col': expected a column name"),
        (CONFIG + "big: " + "9" * 5000 + "\n", None, r"config\.yaml: a value cannot be read"),
        ("[" * 100_000 + "]" * 100_000, None, r"config\.yaml: (not valid YAML|a value cannot be read)"),
        ("- a list\n", None, r"config\.yaml: expected a mapping"),
    ],
)
def test_hostile_task_folders_are_named(
    tmp_path: Path, config: str | None, split: str | None, message: str
) -> None:
    folder = _broken(tmp_path, config, split)
    with pytest.raises(PathoBenchError, match=message):
        read_task(folder)


def test_missing_files_and_existing_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = _copy(tmp_path)
    (folder / "k=all.tsv").unlink()
    assert main(["import-patho-bench", str(folder), "--out", str(tmp_path / "x.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder}: the split k=all.tsv not found") and "Traceback" not in err
    (folder / "config.yaml").unlink()
    assert main(["import-patho-bench", str(folder), "--out", str(tmp_path / "x.yaml")]) == 1
    assert "config.yaml: the task's config.yaml not found" in capsys.readouterr().err
    out = tmp_path / "er.yaml"
    out.write_text("my work")
    assert main(["import-patho-bench", str(FIXTURES / "bcnb" / "er"), "--out", str(out)]) == 1
    assert f"{out}: exists; give --force" in capsys.readouterr().err and out.read_text() == "my work"
    assert not (tmp_path / "er.csv").exists()
    assert (
        main(["import-patho-bench", str(FIXTURES / "bcnb" / "er"), "--out", str(out), "--name", "panda"]) == 1
    )
    assert "--name: 'panda' is a built-in benchmark" in capsys.readouterr().err


def test_a_hostile_folder_name_cannot_inject_yaml(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "bcnb/er")
    hostile = folder.with_name("er\nexperiments: {}\n#")
    folder.rename(hostile)
    out = tmp_path / "er.yaml"
    assert main(["import-patho-bench", str(hostile), "--out", str(out)]) == 0
    declared = load_benchmarks(out)  # the folder's line breaks stayed inside the comment
    assert list(declared) == ["bcnb-er-experiments"] and "random" in out.read_text()


def test_slides_missing_or_found_twice_under_the_root(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    wsi, out, task = tmp_path / "wsi", tmp_path / "er.yaml", str(FIXTURES / "bcnb" / "er")
    _slide(wsi / "2.ndpi")
    assert main(["import-patho-bench", task, "--out", str(out), "--wsi-root", str(wsi)]) == 0
    captured = capsys.readouterr()
    assert "1 of 3 slide(s) found" in captured.out
    assert "warning: slide '3' not found" in captured.err and "warning: slide '4' not found" in captured.err
    assert pd.read_csv(tmp_path / "er.csv", dtype=str)["slide"].tolist() == ["2.ndpi", "3.svs", "4.svs"]
    _slide(wsi / "a" / "2.tiff")
    assert main(["import-patho-bench", task, "--out", str(out), "--wsi-root", str(wsi), "--force"]) == 1
    err = capsys.readouterr().err
    assert f"slide '2' found twice under {wsi}: 2.ndpi, a/2.tiff" in err
    assert (
        pd.read_csv(tmp_path / "er.csv", dtype=str)["slide"].tolist()[0] == "2.ndpi"
    )  # the earlier file kept
