"""Every malformed-submission case gets its own message naming the row/field, value and rule."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from sklearn.metrics import accuracy_score

from giant_assets.grading.grade import grade_csv
from giant_assets.grading.validate import load_submission, validate_submission
from tests.grading.conftest import option_names, write_submission


def truth_rows(task) -> tuple[list[str], list[int]]:
    return task.answers["benchmark_id"].tolist(), task.answers["truth_label"].tolist()


def check_invalid(path: Path, task, *fragments: str) -> str:
    ok, message = validate_submission(path, task)
    assert not ok
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    report = grade_csv(path, task)  # grading never raises on bad input
    assert not report.valid_submission and report.score is None and report.error == message
    return message


def test_valid_submission(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga"])
    write_submission(tmp_path / "s.csv", ids, truth)
    ok, message = validate_submission(tmp_path / "s.csv", tasks["tcga"])
    assert ok and "40 predictions" in message


def test_missing_columns_lists_required_and_found(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["gtex"])
    write_submission(tmp_path / "s.csv", ids, truth, header=("id", "answer"))
    check_invalid(
        tmp_path / "s.csv",
        tasks["gtex"],
        "missing required column(s) ['benchmark_id', 'prediction']",
        "required: ['benchmark_id', 'prediction']",
        "found: ['id', 'answer']",
    )


def test_unknown_ids_named_with_rows(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["gtex"])
    write_submission(tmp_path / "s.csv", [*ids, "GTEX-NOPE"], [*truth, 1])
    check_invalid(
        tmp_path / "s.csv",
        tasks["gtex"],
        "1 benchmark_id value(s) not in task 'gtex'",
        "'GTEX-NOPE' (row 42)",
    )


def test_duplicate_ids_named_with_rows(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["gtex"])
    write_submission(tmp_path / "s.csv", [*ids, ids[3]], [*truth, 2])
    check_invalid(
        tmp_path / "s.csv", tasks["gtex"], "1 duplicate benchmark_id value(s)", f"'{ids[3]}' (row 5, row 42)"
    )


def test_missing_ids_count_and_first_few(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga"])
    write_submission(tmp_path / "s.csv", ids[7:], truth[7:])
    message = check_invalid(
        tmp_path / "s.csv",
        tasks["tcga"],
        "7 of 40 benchmark_id(s) of task 'tcga' have no prediction",
        "'tcga-000'",
    )
    assert "'tcga-004'" in message and "… and 2 more" in message and "'tcga-005'" not in message


def test_non_numeric_label_names_row_value_and_range(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga_slidebench"])
    preds = [str(t) for t in truth]
    preds[2] = "B"
    write_submission(tmp_path / "s.csv", ids, preds)
    check_invalid(
        tmp_path / "s.csv",
        tasks["tcga_slidebench"],
        f"row 4 (benchmark_id='{ids[2]}'): prediction 'B' is not a number; allowed: an option index 1..4",
    )


def test_out_of_range_label_names_row_value_and_range(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga_expert_vqa"])
    truth[5], truth[9] = 5, 0
    write_submission(tmp_path / "s.csv", ids, truth)
    message = check_invalid(
        tmp_path / "s.csv",
        tasks["tcga_expert_vqa"],
        "2 invalid prediction(s)",
        f"row 7 (benchmark_id='{ids[5]}'): prediction '5' is out of range; allowed: an option index 1..4",
        f"row 11 (benchmark_id='{ids[9]}'): prediction '0' is out of range",
    )
    assert message.index("row 7") < message.index("row 11")


def test_panda_grades_0_to_5_and_non_integer(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["panda"])
    preds = [str(t) for t in truth]
    preds[0], preds[1], preds[2] = "6", "-1", "2.5"
    write_submission(tmp_path / "s.csv", ids, preds)
    check_invalid(
        tmp_path / "s.csv",
        tasks["panda"],
        "row 2 (benchmark_id='0'): prediction '6' is out of range; allowed: an integer 0..5",
        "row 3 (benchmark_id='1'): prediction '-1' is out of range",
        "row 4 (benchmark_id='2'): prediction '2.5' is not an integer label",
    )


def test_empty_id_is_invalid(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga_slidebench"])
    write_submission(tmp_path / "s.csv", [*ids, ""], [*truth, 1])
    check_invalid(tmp_path / "s.csv", tasks["tcga_slidebench"], "empty benchmark_id in row 42")


def test_empty_prediction_is_an_abstention_scored_wrong(tmp_path: Path, tasks) -> None:
    task = tasks["tcga_slidebench"]
    ids, truth = truth_rows(task)
    preds: list[object] = list(truth)
    preds[0], preds[3] = "", ""
    write_submission(tmp_path / "s.csv", ids, preds)
    ok, message = validate_submission(tmp_path / "s.csv", task)
    assert ok, message
    frame = load_submission(tmp_path / "s.csv", task)
    assert frame["prediction"].tolist()[:4] == [-1, truth[1], truth[2], -1]
    report = grade_csv(tmp_path / "s.csv", task)
    expected = accuracy_score(truth, [-1 if p == "" else p for p in preds])
    assert report.valid_submission and report.score == pytest.approx(expected) and report.score < 1.0


def test_gtex_accepts_option_text_case_insensitively(tmp_path: Path, tasks) -> None:
    task = tasks["gtex"]
    ids, truth = truth_rows(task)
    names = option_names("gtex")
    preds: list[object] = [names[t - 1].upper() if i % 2 else names[t - 1] for i, t in enumerate(truth)]
    preds[1] = str(truth[1])  # indexes still work
    write_submission(tmp_path / "s.csv", ids, preds)
    frame = load_submission(tmp_path / "s.csv", task)
    assert frame["prediction"].tolist() == truth
    preds[4] = "Brain stem"
    write_submission(tmp_path / "s.csv", ids, preds)
    check_invalid(
        tmp_path / "s.csv", task, "prediction 'Brain stem' is not a number nor an option of this item"
    )


def test_option_text_is_not_accepted_for_index_tasks(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga"])
    preds: list[object] = list(truth)
    preds[0] = option_names("tcga")[truth[0] - 1]
    write_submission(tmp_path / "s.csv", ids, preds)
    check_invalid(tmp_path / "s.csv", tasks["tcga"], "is not a number; allowed: an option index 1..30")


def test_empty_file(tmp_path: Path, tasks) -> None:
    (tmp_path / "s.csv").write_bytes(b"")
    check_invalid(tmp_path / "s.csv", tasks["gtex"], "s.csv: the file is empty")
    (tmp_path / "blank.csv").write_text("\n\n  \n")
    check_invalid(tmp_path / "blank.csv", tasks["gtex"], "blank.csv: the file is empty")


def test_header_only(tmp_path: Path, tasks) -> None:
    (tmp_path / "s.csv").write_text("benchmark_id,prediction\n")
    check_invalid(tmp_path / "s.csv", tasks["gtex"], "no submission rows for task 'gtex' (it has 40 items)")


def test_wrong_encoding(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["gtex"])
    text = "benchmark_id,prediction,note\n" + "".join(
        f"{i},{t},café\n" for i, t in zip(ids, truth, strict=True)
    )
    (tmp_path / "s.csv").write_bytes(text.encode("latin-1"))
    offset = text.encode("latin-1").index(b"\xe9")
    check_invalid(
        tmp_path / "s.csv",
        tasks["gtex"],
        "s.csv: not UTF-8 text",
        f"byte 0xe9 at offset {offset}",
        "save the file as UTF-8",
    )


def test_utf8_bom_blank_lines_whitespace_and_extra_columns_are_fine(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga"])
    body = "".join(f" {i} , {t} ,x\n\n" for i, t in zip(ids, truth, strict=True))
    (tmp_path / "s.csv").write_bytes(("benchmark_id , prediction,comment\n" + body).encode("utf-8-sig"))
    assert load_submission(tmp_path / "s.csv", tasks["tcga"])["prediction"].tolist() == truth


def test_unsupported_extension_and_missing_file(tmp_path: Path, tasks) -> None:
    (tmp_path / "s.xlsx").write_bytes(b"PK\x03\x04")
    check_invalid(
        tmp_path / "s.xlsx", tasks["gtex"], "s.xlsx: unsupported file extension '.xlsx'", "['.csv', '.jsonl']"
    )
    check_invalid(tmp_path / "nope.csv", tasks["gtex"], "nope.csv: submission file not found")


def test_malformed_csv(tmp_path: Path, tasks) -> None:
    (tmp_path / "s.csv").write_text('benchmark_id,prediction\n"gtex-000,1\n')
    check_invalid(tmp_path / "s.csv", tasks["gtex"], "s.csv: malformed CSV")


def test_first_data_row_with_an_extra_field_is_a_message(tmp_path: Path, tasks) -> None:
    """Fault 6: pandas read the extra field as an index column (a traceback or a silent misread)."""
    ids, truth = truth_rows(tasks["gtex"])
    body = f"{ids[0]},{truth[0]},extra\n" + "".join(
        f"{i},{t}\n" for i, t in zip(ids[1:], truth[1:], strict=True)
    )
    (tmp_path / "s.csv").write_text("benchmark_id,prediction\n" + body)
    check_invalid(
        tmp_path / "s.csv",
        tasks["gtex"],
        "s.csv: row 2 (line 2) has 3 field(s) but the header has 2 (benchmark_id, prediction): "
        "wrong number of fields",
    )


def test_deep_jsonl_line_is_a_message(tmp_path: Path, tasks) -> None:
    """Fault 6: a 100k-deep JSONL line was a RecursionError traceback."""
    (tmp_path / "s.jsonl").write_text(
        '{"benchmark_id": "gtex-000", "prediction": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n"
    )
    check_invalid(
        tmp_path / "s.jsonl", tasks["gtex"], "line 2: JSON nested 100000 levels deep; the limit is 64"
    )


def test_jsonl_line_problems(tmp_path: Path, tasks) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"task_id": "gtex", "benchmark_id": "gtex-000", "prediction": 1}\n{oops\n[1, 2]\n')
    check_invalid(
        path,
        tasks["gtex"],
        "malformed JSONL",
        "line 2: not valid JSON",
        "line 3: expected a JSON object, got list",
    )
    path.write_text('{"task_id": "gtex", "benchmark_id": "gtex-000"}\n')
    check_invalid(path, tasks["gtex"], "missing required field(s) ['prediction']")
    path.write_text(
        '{"task_id": "gtex", "benchmark_id": "gtex-000", "prediction": 1}\n'
        '{"task_id": "gtex", "benchmark_id": "gtex-001"}\n'
    )
    assert validate_submission(path, tasks["gtex"])[0] is False  # gtex-002.. have no row at all
    path.write_text('{"task_id": "panda", "benchmark_id": "0", "prediction": null}\n')
    check_invalid(path, tasks["panda"], "have no prediction")  # a null is an abstention, absent ids are not


def test_many_bad_rows_are_capped(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["tcga"])
    write_submission(tmp_path / "s.csv", ids, [99] * len(ids))
    message = check_invalid(
        tmp_path / "s.csv", tasks["tcga"], "40 invalid prediction(s)", "… and 35 more bad prediction(s)"
    )
    assert message.count("is out of range") == 5


def test_submission_frame_types(tmp_path: Path, tasks) -> None:
    ids, truth = truth_rows(tasks["panda"])
    write_submission(tmp_path / "s.csv", ids, [float(t) for t in truth])  # "3.0" is the integer 3
    frame = load_submission(tmp_path / "s.csv", tasks["panda"])
    assert frame["prediction"].dtype == "int64" and frame["prediction"].tolist() == truth
    assert pd.api.types.is_string_dtype(frame["benchmark_id"]) or frame["benchmark_id"].dtype == object


def test_a_duplicate_in_a_later_chunk_is_reported_and_never_replaces_the_first(tasks) -> None:
    """Files are read in chunks (``reader.CHUNK_ROWS``): an id repeated in a later chunk is a duplicate like
    one in the same chunk (mutation: each chunk's first occurrence taken as new silently overwrites it)."""
    from giant_assets.grading.reader import LINE_COLUMN
    from giant_assets.grading.validate import TaskChecker

    task = tasks["gtex"]
    ids, truth = truth_rows(task)
    checker = TaskChecker(task, "row", "s.csv", ["benchmark_id", "prediction"])
    first = pd.DataFrame({"benchmark_id": ids, "prediction": [str(t) for t in truth]})
    checker.add(first.assign(**{LINE_COLUMN: range(2, len(ids) + 2)}))
    again = pd.DataFrame({"benchmark_id": [ids[3]], "prediction": ["1"], LINE_COLUMN: [len(ids) + 2]})
    checker.add(again)
    frame, problems = checker.finish()
    assert frame is None
    assert problems == [f"s.csv: 1 duplicate benchmark_id value(s): '{ids[3]}' (row 5, row {len(ids) + 2})"]
