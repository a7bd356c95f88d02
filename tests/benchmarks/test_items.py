"""A declared benchmark's items file (CSV, TSV, Parquet) read into the canonical items frame, its bad rows
named by file, row, id and column, and ``giant-experiments check`` over it (real slides on disk)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from giant_assets.benchmarks.declaration import Declaration
from giant_assets.benchmarks.items import load_declared_items
from giant_assets.multipathqa.loading import CsvFormatError
from giant_assets.platform.experiments_cli import main
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

COLUMNS = {"id": "case", "slide": "wsi", "question": "q", "options": "opts", "answer": "truth"}
LUNG = "['LUAD', 'LUSC', 'Normal']"
ROWS = [
    {"case": "a", "wsi": "s1.tiff", "q": "Tumour type?", "opts": LUNG, "truth": "lusc"},
    {"case": "b", "wsi": "s2.tiff", "q": "Tumour type?", "opts": LUNG, "truth": "Normal"},
]


def _declared(path: Path, answer: str = "label", **extra) -> Declaration:
    return Declaration("lung", path, answer, "accuracy", columns=COLUMNS, **extra)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_each_format_gives_the_same_items(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"items{suffix}"
    frame = pd.DataFrame(ROWS)
    if suffix == ".parquet":
        frame.assign(opts=[["LUAD", "LUSC", "Normal"]] * 2).to_parquet(path)  # a real list column
    else:
        frame.to_csv(path, index=False, sep="\t" if suffix == ".tsv" else ",")
    items, errors = load_declared_items(_declared(path))
    assert errors == []
    assert items["benchmark_id"].tolist() == ["a", "b"]
    assert items["truth_label"].tolist() == [2, 3]  # "lusc" is option 2 (case folded), "Normal" option 3
    assert items["image_path"].tolist() == ["s1.tiff", "s2.tiff"]
    assert items["options"].iloc[0] == ["LUAD", "LUSC", "Normal"] and (items["n_options"] == 3).all()
    assert set(items["benchmark_name"]) == {"lung"} and set(items["metric_type"]) == {"accuracy"}
    prompt = items["prompt"].iloc[0]
    assert prompt.startswith("Tumour type?\n\nOptions:\n1. LUAD\n2. LUSC\n3. Normal\n\n")
    assert prompt.endswith('{"answer": 2} if the second option is correct.')


def test_a_declared_template_and_grade_answers(tmp_path: Path) -> None:
    path = tmp_path / "grades.csv"
    pd.DataFrame(
        [{"case": "a", "wsi": "s.tiff", "q": "Grade?", "truth": "3"}, {"case": "b", "wsi": "s.tiff", "q": "G",
                                                                        "truth": "+0"}]
    ).to_csv(path, index=False)  # fmt: skip
    declared = Declaration(
        "grades", path, "grade", "quadratic_kappa", columns=COLUMNS, question_template="Q: {question} {{x}}"
    )
    items, errors = load_declared_items(declared)
    assert errors == [] and items["truth_label"].tolist() == [3, 0]
    assert items["prompt"].tolist() == ["Q: Grade? {x}", "Q: G {x}"] and items["options"].isna().all()


def test_bad_rows_are_named_by_row_id_and_column(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    deep = "[" * 100_000 + "]" * 100_000
    rows = [
        {"case": "a", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "3"},  # index out of range
        {"case": "b", "wsi": "", "q": "Q", "opts": "['x', 'y']", "truth": "1"},  # no slide
        {"case": "c", "wsi": "s.tiff", "q": "Q", "opts": deep[:90_000], "truth": "1"},  # 45,000-deep list
        {"case": "d", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "9" * 5000},  # huge integer
        {"case": "e", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "2"},
        {"case": "e", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "1"},  # duplicate id
        {"case": "f", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "nan"},
        {"case": "g", "wsi": "s.tiff", "q": "Q", "opts": "['x', 'y']", "truth": "1"},  # the one good row
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    items, errors = load_declared_items(_declared(path, answer="index"))
    assert items["benchmark_id"].tolist() == ["g"] and items["truth_label"].tolist() == [1]
    found = {(e.row, e.benchmark_id, e.field) for e in errors}
    assert found == {(2, "a", "truth"), (3, "b", "wsi"), (4, "c", "opts"), (5, "d", "truth"),
                     (6, "e", "case"), (7, "e", "case"), (8, "f", "truth")}  # fmt: skip
    text = "\n".join(map(str, errors))
    assert f"{path}: row 2 (benchmark_id='a'), field 'truth': option number 3 out of range 1..2" in text
    assert "row 5 (benchmark_id='d'), field 'truth': expected a 1-based option number, got '9999" in text
    assert "field 'case': duplicate id: rows 6, 7 all use it" in text


def test_file_level_problems_are_clear(tmp_path: Path) -> None:
    with pytest.raises(CsvFormatError, match=r"nope\.csv: items file of benchmark 'lung' not found"):
        load_declared_items(_declared(tmp_path / "nope.csv"))
    path = tmp_path / "items.csv"
    pd.DataFrame([{"case": "a", "wsi": "s", "question": "Q", "opts": "['x']", "truth": "x"}]).to_csv(path)
    with pytest.raises(CsvFormatError, match=r"missing required column\(s\) \['q'\]"):
        load_declared_items(_declared(path))
    bad = tmp_path / "items.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(CsvFormatError, match=r"items\.parquet: not a readable Parquet file"):
        load_declared_items(_declared(bad))


def test_check_counts_and_names_missing_slides(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_pyramidal_slide(tmp_path / "wsi" / "s1.tiff", ONE_LESION_DESIGN, levels=3)
    pd.DataFrame(ROWS).to_csv(tmp_path / "items.csv", index=False)
    path = tmp_path / "experiments.yaml"
    columns = "{id: case, slide: wsi, question: q, options: opts, answer: truth}"
    path.write_text(
        "experiments: {r: {agent: random}}\nbenchmarks:\n"
        f"  lung: {{items: items.csv, answer: label, metric: accuracy, wsi_root: wsi, columns: {columns}}}\n"
    )
    assert main(["--file", str(path), "check"]) == 1
    out, err = capsys.readouterr()
    assert f"{path}: benchmark 'lung': 2 row(s), 2 valid item(s), 1 slide(s) found" in out
    assert (
        f"error: {path}: benchmark 'lung': {tmp_path / 'items.csv'}: row 3 (case='b'), column 'wsi': " in err
    )
    assert "slide not found" in err and "all valid" not in out
    write_pyramidal_slide(tmp_path / "wsi" / "s2.tiff", ONE_LESION_DESIGN, levels=3)
    assert main(["--file", str(path), "check"]) == 0
    out, _ = capsys.readouterr()
    assert "2 slide(s) found" in out and "1 experiment(s), 1 declared benchmark(s), all valid" in out
