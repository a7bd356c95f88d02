"""The experiments file's ``benchmarks:`` section: every field validated as hostile input, each problem
naming the file, the benchmark and the field (with the closest valid name for a misspelt one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.benchmarks.registry import benchmark, benchmark_names, ordered
from giant_assets.experiments.declared import ExperimentsFileError, load_benchmarks, load_experiments

GOOD = {"items": "cohort.csv", "answer": "label", "metric": "balanced_accuracy"}


def _file(tmp_path: Path, benchmarks: str) -> Path:
    path = tmp_path / "experiments.yaml"
    path.write_text("experiments:\n  r: {agent: random}\nbenchmarks:\n" + benchmarks)
    return path


def _error(tmp_path: Path, benchmarks: str) -> str:
    path = _file(tmp_path, benchmarks)
    with pytest.raises(ExperimentsFileError) as err:
        load_benchmarks(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert "Traceback" not in message and "pydantic" not in message and "Input should" not in message
    return message


def test_a_declaration_with_defaults_and_relative_paths(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "  c16:\n    items: cohorts/c16.tsv\n    columns: {id: case_id, answer: label}\n    answer: label\n"
        '    metric: f1_macro\n    question_template: "{question}\\nOptions:\\n{options}"\n'
        "    wsi_root: slides\n",
    )
    (d,) = load_benchmarks(path).values()
    assert d.name == "c16" and d.items == tmp_path / "cohorts" / "c16.tsv"
    assert d.wsi_root == tmp_path / "slides"
    assert d.columns == {"id": "case_id", "slide": "image_path", "question": "prompt", "options": "options",
                         "answer": "label"}  # fmt: skip
    assert d.question_template == "{question}\nOptions:\n{options}"
    assert list(load_experiments(path)) == ["r"]  # the experiments are read as before
    declared = load_benchmarks(path)
    assert benchmark_names(declared) == ("tcga", "gtex", "panda", "tcga_slidebench", "tcga_expert_vqa", "c16")
    assert benchmark("c16", declared).metric_type == "f1_macro"
    assert benchmark("panda", declared).answer_kind == "grade"
    with pytest.raises(KeyError, match="no benchmark 'c17'"):
        benchmark("c17", declared)
    assert ordered(["zz", "c16", "panda", "tcga"]) == ["tcga", "panda", "c16", "zz"]


def test_absolute_items_path_and_no_section(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "items.parquet"
    path = _file(tmp_path, f"  b: {{items: {other}, answer: index, metric: accuracy}}\n")
    assert load_benchmarks(path)["b"].items == other
    plain = tmp_path / "plain.yaml"
    plain.write_text("experiments: {r: {agent: random}}\n")
    assert load_benchmarks(plain) == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  c16: {items: c.csv, answer: label, metrc: accuracy}\n",
         "benchmark 'c16': field 'metrc': unknown (did you mean 'metric'?)"),
        ("  c16: {items: c.csv, answer: label, metric: f1}\n",
         "benchmark 'c16': field 'metric': 'f1' is not one of accuracy, balanced_accuracy, f1_macro, "
         "quadratic_kappa (did you mean 'f1_macro'?)"),
        ("  c16: {items: c.csv, answer: labels, metric: accuracy}\n",
         "field 'answer': 'labels' is not one of index, label, grade (did you mean 'label'?)"),
        ("  c16: {items: c.csv, answer: label, metric: quadratic_kappa}\n",
         "field 'metric': quadratic_kappa weighs how far an answer is from the truth, so it needs ordinal "
         "answers (answer: grade), not answer: label"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, columns: {slid: path}}\n",
         "field 'columns': unknown role 'slid' (did you mean 'slide'?)"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, columns: {id: x, slide: x}}\n",
         "field 'columns': column(s) ['x'] given to two roles"),
        ("  c16: {answer: label, metric: accuracy}\n", "benchmark 'c16': field 'items': required"),
        ("  c16: {items: c.exe, answer: label, metric: accuracy}\n",
         "field 'items': 'c.exe' is not a .csv, .tsv, .parquet file"),
        ("  c16: {items: .nan, answer: label, metric: accuracy}\n",
         "field 'items': expected text, got float"),
        (f"  c16: {{items: {'9' * 5000}, answer: label, metric: accuracy}}\n",
         "a number in the file is too long to read (Exceeds the limit (4300 digits)"),
        (f"  c16: {{items: c.csv, answer: label, metric: accuracy, wsi_root: {'9' * 40}}}\n",
         "field 'wsi_root': expected text, got int"),
        ("  c16: {items: \"a\\0b.csv\", answer: label, metric: accuracy}\n",
         "field 'items': contains a control character"),
        ("  c16: {items: c.csv, answer: 1.0e+308, metric: accuracy}\n",
         "field 'answer': 1e+308 is not one of"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, "
         "question_template: 'Q: {question.__class__}'}\n",
         "field 'question_template': unknown placeholder(s) ['question.__class__']"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, "
         "question_template: '{question:>999999999}'}\n",
         "field 'question_template': placeholders take no format spec or conversion"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, question_template: 'Pick {options}'}\n",
         "field 'question_template': must contain {question}"),
        ("  c16: {items: c.csv, answer: label, metric: accuracy, question_template: 'Q {question'}\n",
         "field 'question_template': expected '}' before end of string"),
        ("  Bad|Name: {items: c.csv, answer: label, metric: accuracy}\n",
         "field 'name': 'Bad|Name' is not a benchmark name"),
        ("  ../up: {items: c.csv, answer: label, metric: accuracy}\n",
         "field 'name': '../up' is not a benchmark"),
        ("  12345: {items: c.csv, answer: label, metric: accuracy}\n",
         "field 'name': 12345 is not a benchmark"),
        ("  tcga: {items: c.csv, answer: label, metric: accuracy}\n",
         "benchmark 'tcga', field 'name': a built-in MultiPathQA benchmark has that name"),
        ("  all: {items: c.csv, answer: label, metric: accuracy}\n", "field 'name': 'all' is reserved"),
        ("  c16: [items, answer]\n", "benchmark 'c16': field '(benchmark)': expected a mapping"),
        ("  - c16\n", "'benchmarks' must be a mapping"),
    ],
)  # fmt: skip
def test_bad_declarations_name_file_benchmark_and_field(tmp_path: Path, body: str, expected: str) -> None:
    assert expected in _error(tmp_path, body)


def test_an_unknown_top_level_key_lists_benchmarks(tmp_path: Path) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text("experiments: {r: {}}\nbenchmark: {}\n")
    with pytest.raises(ExperimentsFileError, match="use 'defaults', 'experiments', 'benchmarks'"):
        load_experiments(path)


def test_benchmark_options_of_the_clis_take_declared_names_but_no_path() -> None:
    from giant_assets.eval.qupath_cli import main as qupath

    with pytest.raises(SystemExit):
        qupath(["export", "--experiment", "e", "--benchmark", "../../etc"])
    from giant_assets.benchmarks.registry import benchmark_arg

    assert (
        benchmark_arg("tcga") == "tcga" and benchmark_arg("camelyon16-metastasis") == "camelyon16-metastasis"
    )
    for bad in ("../x", "a/b", "Big", ""):
        with pytest.raises(Exception, match="not a benchmark name"):
            benchmark_arg(bad)


def test_deeply_nested_yaml_is_a_clear_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    message = _error(tmp_path, f"  b: {{items: c.csv, answer: label, metric: accuracy, columns: {deep}}}\n")
    assert "not valid YAML: nested too deeply" in message
