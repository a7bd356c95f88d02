"""CSV parsing and validation: canonical truth labels, and one clear error per bad field."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from giant_assets.multipathqa.loading import CsvFormatError, parse_items, read_csv_strings
from giant_assets.multipathqa.sample import sample_csv_path

GTEX_OPTIONS = ["Adipose Tissue", "Esophagus", "Lung", "Liver"]


def sample_rows() -> list[dict[str, str]]:
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def load(path: Path):
    return parse_items(read_csv_strings(path), str(path))


def test_sample_parses_with_canonical_truth_labels():
    items, errors = load(sample_csv_path())
    assert errors == []
    by_id = items.set_index(["benchmark_name", "benchmark_id"])
    # gtex answers are label text: index in options, 1-based (Lung is option 12 of the 20 organs)
    gtex = by_id.loc[("gtex", "GTEX-1117F-0126")]
    assert gtex.truth_label == list(gtex.options).index("Lung") + 1 == 12
    assert by_id.loc[("tcga", "0")].truth_label == 15
    assert by_id.loc[("panda", "1")].truth_label == 3
    assert by_id.loc[("panda", "1")].options is None
    assert by_id.loc[("tcga_slidebench", "0")].truth_label == 2
    assert "1. Adipose Tissue" in gtex.prompt and "{options}" not in gtex.prompt
    assert '{"answer": YOUR_ANSWER}' in gtex.prompt
    assert sorted(items["benchmark_name"].unique()) == sorted(
        ["gtex", "tcga", "panda", "tcga_slidebench", "tcga_expert_vqa"]
    )


def _bad(tmp_path: Path, row_index: int, **changes: str) -> tuple[Path, list]:
    rows = sample_rows()
    rows[row_index].update(changes)
    path = write_csv(tmp_path / "bad.csv", rows)
    _, errors = load(path)
    return path, errors


@pytest.mark.parametrize(
    ("row_index", "changes", "field", "fragment"),
    [
        (0, {"benchmark_name": "camelyon"}, "benchmark_name", "unknown benchmark 'camelyon'"),
        (3, {"answer": "three"}, "answer", "expected a 1-based option index, got 'three'"),
        (3, {"answer": "31"}, "answer", "option index 31 out of range 1..30"),
        (3, {"answer": "0"}, "answer", "option index 0 out of range 1..30"),
        (0, {"answer": "Appendix"}, "answer", "label 'Appendix' is not one of the 20 options"),
        (6, {"answer": "6"}, "answer", "ISUP grade must be an integer 0..5, got '6'"),
        (3, {"options": "['Lung', 'Liver'"}, "options", "not a Python list literal"),
        (3, {"options": "__import__('os').system('echo pwned')"}, "options", "not a Python list literal"),
        (3, {"options": "{'a': 1}"}, "options", "expected a list of strings"),
        (9, {"options": ""}, "answer", "needs options"),
        (0, {"metric_type": "f1"}, "metric_type", "expected one of"),
        (0, {"is_valid": "maybe"}, "is_valid", "expected True or False"),
        (0, {"image_path": ""}, "image_path", "empty"),
    ],
)
def test_each_bad_field_gets_an_error_naming_file_row_and_field(
    tmp_path, row_index, changes, field, fragment
):
    path, errors = _bad(tmp_path, row_index, **changes)
    assert len(errors) == 1, errors
    error = errors[0]
    assert (error.row, error.field) == (row_index + 2, field)  # header is row 1
    text = str(error)
    assert str(path) in text and f"row {row_index + 2}" in text and f"field '{field}'" in text
    assert fragment in text


def test_every_bad_row_is_reported_not_just_the_first(tmp_path):
    rows = sample_rows()
    rows[0]["answer"] = "Appendix"
    rows[4]["answer"] = "x"
    rows[7]["answer"] = "9"
    _, errors = load(write_csv(tmp_path / "bad.csv", rows))
    assert [(e.row, e.field) for e in errors] == [(2, "answer"), (6, "answer"), (9, "answer")]


def test_gtex_label_matching_is_case_insensitive_fallback(tmp_path):
    path, errors = _bad(tmp_path, 0, answer="lung")
    assert errors == []
    items, _ = load(path)
    assert items.iloc[0].truth_label == 12


def test_is_valid_false_rows_are_kept_flagged_for_filtering(tmp_path):
    path, errors = _bad(tmp_path, 0, is_valid="False")
    items, _ = load(path)
    assert errors == [] and items.loc[0, "is_valid"] == False  # noqa: E712


def test_missing_required_column_lists_missing_and_present(tmp_path):
    rows = [{k: v for k, v in r.items() if k not in ("answer", "prompt")} for r in sample_rows()]
    path = write_csv(tmp_path / "nocols.csv", rows)
    with pytest.raises(CsvFormatError) as info:
        read_csv_strings(path)
    message = str(info.value)
    assert str(path) in message
    assert "missing required column(s) ['answer', 'prompt']" in message
    assert "'benchmark_name'" in message and "'options'" in message  # what is there


def test_not_utf8_empty_and_absent_files(tmp_path):
    latin = tmp_path / "latin1.csv"
    latin.write_bytes("benchmark_name,answer\ngtex,Hüfte\n".encode("latin-1"))
    with pytest.raises(CsvFormatError, match=r"latin1\.csv: not UTF-8"):
        read_csv_strings(latin)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(CsvFormatError, match=r"empty\.csv: the file is empty"):
        read_csv_strings(empty)
    with pytest.raises(CsvFormatError, match=r"nope\.csv: MultiPathQA CSV not found"):
        read_csv_strings(tmp_path / "nope.csv")
