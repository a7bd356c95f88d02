"""CSV parsing and validation: canonical truth labels, and one clear error per bad field."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from giant_assets.multipathqa.loading import CsvFormatError, canonical_truth, parse_items, read_csv_strings
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


# --- hostile input: duplicates, contradictions, non-ASCII digits, control characters, shape -----------


def test_duplicate_ids_within_a_benchmark_are_errors_on_every_row_naming_them_all(tmp_path):
    rows = sample_rows()
    rows[4]["benchmark_id"] = " 0 "  # tcga "0" again, after whitespace stripping
    rows[10]["benchmark_id"] = "0"  # slidebench "0" again
    items, errors = load(write_csv(tmp_path / "dup.csv", rows))
    assert [(e.row, e.field) for e in errors] == [
        (5, "benchmark_id"),
        (6, "benchmark_id"),
        (11, "benchmark_id"),
        (12, "benchmark_id"),
    ]
    assert "duplicate id in benchmark 'tcga': rows 5, 6 all use it" in str(errors[0])
    assert str(tmp_path / "dup.csv") in str(errors[0]) and "row 6" in str(errors[1])
    assert "rows 11, 12" in str(errors[3])
    # neither copy survives (which truth is right is unknown); the same id in other benchmarks is fine
    kept = set(zip(items["benchmark_name"], items["benchmark_id"], strict=True))
    assert ("tcga", "0") not in kept and ("tcga_slidebench", "0") not in kept and ("panda", "0") in kept
    assert len(items) == len(rows) - 4


@pytest.mark.parametrize(
    ("row_index", "metric"), [(3, "accuracy"), (9, "balanced_accuracy"), (6, "accuracy")]
)
def test_a_metric_type_contradicting_the_benchmark_is_a_row_error(tmp_path, row_index, metric):
    _, errors = _bad(tmp_path, row_index, metric_type=metric)
    assert [(e.row, e.field) for e in errors] == [(row_index + 2, "metric_type")]
    assert f"'{metric}' contradicts benchmark" in str(errors[0])


@pytest.mark.parametrize(
    ("row_index", "answer"),
    [(3, "١٥"), (7, "٣"), (9, "²"), (7, "３"), (9, "৩")],  # Arabic-Indic, superscript, full-width, Bengali
)
def test_non_ascii_digits_are_not_read_as_answers(tmp_path, row_index, answer):
    _, errors = _bad(tmp_path, row_index, answer=answer)
    assert [(e.row, e.field) for e in errors] == [(row_index + 2, "answer")]


@pytest.mark.parametrize("bad_id", ["a\x00b", "tab\there", "two\nlines", "c\rr"])
def test_ids_with_control_characters_are_refused(tmp_path, bad_id):
    _, errors = _bad(tmp_path, 3, benchmark_id=bad_id)
    assert [(e.row, e.field) for e in errors] == [(5, "benchmark_id")]
    assert "control character" in str(errors[0])


@pytest.mark.parametrize("odd_id", ["../../etc", "/abs/path", "a\\b", ".."])
def test_ids_with_separators_are_kept_as_they_are(tmp_path, odd_id):
    path, errors = _bad(tmp_path, 3, benchmark_id=odd_id)
    items, _ = load(path)
    assert errors == [] and odd_id in set(items["benchmark_id"])


def test_header_only_csv_says_so(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text(",".join(sample_rows()[0]) + "\n\n")
    with pytest.raises(CsvFormatError, match=r"header\.csv: the file has a header but no data rows"):
        read_csv_strings(path)


def test_latin1_csv_names_the_row_field_and_byte_offset(tmp_path):
    rows = sample_rows()
    rows[2]["prompt"] = "Which organ? Hüfte"
    path = write_csv(tmp_path / "latin1.csv", rows)
    path.write_bytes(path.read_text(encoding="utf-8").encode("latin-1"))
    offset = path.read_bytes().index("ü".encode("latin-1"))
    with pytest.raises(CsvFormatError) as info:
        read_csv_strings(path)
    assert f"latin1.csv: not UTF-8 text: row 4, field 'prompt', byte offset {offset} (byte 0xfc" in str(
        info.value
    )


def _write_records(path: Path, records: list[list[str]], prefix: bytes = b"") -> Path:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(records)
    path.write_bytes(prefix + buffer.getvalue().encode("utf-8"))
    return path


def _records() -> list[list[str]]:
    rows = sample_rows()
    return [list(rows[0]), *([*r.values()] for r in rows)]


def test_a_bom_is_allowed_and_blank_lines_keep_spreadsheet_row_numbers(tmp_path):
    records = _records()
    path = _write_records(tmp_path / "bom.csv", records[:3] + [[]] + records[3:], prefix=b"\xef\xbb\xbf")
    rows_read = read_csv_strings(path)
    assert list(rows_read.columns[:2]) == ["benchmark_name", "benchmark_id"]
    assert rows_read["csv_row"].tolist()[:3] == [2, 3, 5]
    items, errors = load(path)
    assert errors == [] and len(items) == len(records) - 1
    assert items["row_number"].tolist()[:3] == [2, 3, 5]


@pytest.mark.parametrize("where", [0, 5])
def test_ragged_rows_are_reported_as_wrong_field_counts(tmp_path, where):
    records = _records()
    records[1 + where].append("extra")
    records[3 + where] = records[3 + where][:1]
    with pytest.raises(CsvFormatError) as info:
        read_csv_strings(_write_records(tmp_path / "ragged.csv", records))
    message = str(info.value)
    assert f"row {2 + where} has 12 fields, the header has 11" in message
    assert f"row {4 + where} has 1 fields, the header has 11" in message
    assert "unknown benchmark" not in message


def test_a_directory_is_not_reported_as_missing(tmp_path):
    with pytest.raises(CsvFormatError, match="not found \\(a directory\\)"):
        read_csv_strings(tmp_path)


# --- the ingest assets, materialized ------------------------------------------------------------------


def _materialize_items(tmp_path: Path, csv_path: Path, on_invalid_rows: str):
    from dagster import materialize

    from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
    from tests.support.dagster_env import resources_for

    return materialize(
        [multipathqa_csv, benchmark_items],
        resources=resources_for(
            tmp_path / "data", source="local", csv_path=str(csv_path), wsi_root=str(tmp_path)
        ),
        run_config={"ops": {"benchmark_items": {"config": {"on_invalid_rows": on_invalid_rows}}}},
        raise_on_error=False,
    )


def _failure_text(result) -> str:
    return "\n".join(
        str(e.event_specific_data.error.message) + str(e.event_specific_data.error.cause or "")
        for e in result.all_events
        if e.is_step_failure
    )


def test_ingest_gives_messages_not_tracebacks_for_header_only_and_all_bad_rows(tmp_path):
    header_only = tmp_path / "header_only.csv"
    header_only.write_text(",".join(sample_rows()[0]) + "\n")
    result = _materialize_items(tmp_path, header_only, "skip")
    assert not result.success
    text = _failure_text(result)
    assert "header_only.csv: the file has a header but no data rows" in text and "KeyError" not in text

    rows = sample_rows()
    for row in rows:
        row["answer"] = "not a label"
    all_bad = write_csv(tmp_path / "all_bad.csv", rows)
    result = _materialize_items(tmp_path, all_bad, "skip")
    assert not result.success
    text = _failure_text(result)
    assert f"every row of {all_bad} is malformed ({len(rows)} error(s)); nothing to evaluate" in text
    assert "row 2 (benchmark_id='GTEX-1117F-0126'), field 'answer'" in text


@pytest.mark.parametrize("benchmark", ["tcga", "tcga_slidebench", "tcga_expert_vqa"])
def test_option_index_truth_covers_exactly_one_to_n(benchmark: str) -> None:
    """Index answers are 1-based: the first and the LAST option are labels 1 and n, 0 and n + 1 are
    errors (mutations: ``index < len(options)`` loses the last option, ``0 <= index`` admits 0)."""
    options = ["A tissue", "B tissue", "C tissue", "D tissue"]
    assert canonical_truth(benchmark, "1", options) == 1
    assert canonical_truth(benchmark, " 4 ", options) == 4
    for bad in ("0", "5"):
        with pytest.raises(ValueError, match=f"option index {bad} out of range 1..4"):
            canonical_truth(benchmark, bad, options)
