"""`giant-experiments estimate` says which questions it priced (the bundled sample, the ingested CSV, or a
CSV read alone with ``--csv``), and ``--csv`` prices a MultiPathQA CSV with no slide at all: its calls
and runs scale with the CSV's per-benchmark counts (checked by hand below)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from giant_assets.core.storage import ParquetStore
from giant_assets.experiments.declared import load_experiments
from giant_assets.multipathqa.errata import load_errata
from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.platform.experiments_cli import main
from giant_assets.runs.journal import Journal

SHIPPED = Path(__file__).resolve().parents[2] / "experiments.yaml"
COUNTS = {"tcga": 7, "gtex": 4, "panda": 5, "tcga_slidebench": 1}  # no tcga_expert_vqa question
SAMPLE_COUNTS = "gtex 3, panda 3, tcga 3, tcga_expert_vqa 2, tcga_slidebench 3"


def _generated_csv(path: Path, counts: dict[str, int], invalid: int = 2, erratum: bool = False) -> Path:
    """A MultiPathQA CSV of ``counts`` questions per benchmark (the sample's rows under new ids), plus
    ``invalid`` gtex rows marked is_valid=False and, with ``erratum``, one released-CSV erratum row."""
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    first = {r["benchmark_name"]: r for r in reversed(rows)}
    out = []
    for name, n in counts.items():
        out += [first[name] | {"benchmark_id": f"{name}-{i}"} for i in range(n)]
    out += [first["gtex"] | {"benchmark_id": f"bad-{i}", "is_valid": "False"} for i in range(invalid)]
    if erratum:
        e = load_errata().iloc[0]  # as the released CSV has it: the released question
        out.append(first["tcga_slidebench"] | {
            "benchmark_name": e["benchmark_name"], "benchmark_id": "erratum-0", "image_path": e["image_path"],
            "options": str(e["options"]), "answer": e["answer"], "prompt": e["released_question"],
        })  # fmt: skip
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(out)
    return path


def _estimate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, list[str]], str, str]:
    status = main(["--file", str(SHIPPED), "estimate", *args])
    out, err = capsys.readouterr()
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()[2:]
        if not line.startswith(("note", "priced"))
    }
    assert len(out.splitlines()) <= 40
    return status, rows, out, err


def test_csv_alone_prices_every_question_by_benchmark(data_dir: Path, tmp_path: Path, capsys) -> None:
    path = _generated_csv(tmp_path / "lab.csv", COUNTS)
    # patch: 30 calls per question, one run each (invalid rows left out, no tcga_expert_vqa row)
    status, rows, out, err = _estimate(capsys, "gpt5-patch", "--csv", str(path))
    assert status == 0, err
    assert {name: row[1:4] for name, row in rows.items()} == {
        "gtex": ["4", "4", "120"], "panda": ["5", "5", "150"], "tcga": ["7", "7", "210"],
        "tcga_slidebench": ["1", "1", "30"], "total": ["17", "17", "510"],
    }  # fmt: skip
    assert out.splitlines()[-1] == (
        f"priced: the CSV {path} with 17 questions (gtex 4, panda 5, tcga 7, tcga_slidebench 1), each as if "
        "its slide were in place (no slide read)"
    )
    # GIANT x5: five runs per question, 10-20 calls each (max_steps 20); a journalled run of a question
    # read from a CSV alone is not tied to a slide: nothing is subtracted
    x5 = load_experiments(SHIPPED)["gpt5-giant-x5"]
    Journal(data_dir / "journals" / x5.config_hash() / "tcga.jsonl").append(
        [
            {
                "config_hash": x5.config_hash(),
                "benchmark_id": "tcga-0",
                "run_index": 0,
                "agent": "giant",
                "model": "gpt-5",
                "benchmark_name": "tcga",
                "truth_label": 1,
            }
        ]  # fmt: skip
    )
    status, rows, _, _ = _estimate(capsys, "gpt5-giant-x5", "--csv", str(path), "--benchmark", "tcga")
    assert status == 0 and rows["tcga"][1:4] == ["7", "35", "350-700"] and "gtex" not in rows


def test_csv_alone_follows_the_errata_setting(data_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    path = _generated_csv(tmp_path / "lab.csv", {"tcga_slidebench": 2}, invalid=0, erratum=True)
    for mode, n in (("apply", 3), ("flag", 3), ("exclude", 2)):
        monkeypatch.setenv("GIANT_ERRATA", mode)
        status, rows, _, err = _estimate(capsys, "gpt5-thumbnail", "--csv", str(path))
        assert status == 0 and rows["tcga_slidebench"][1] == str(n), (mode, err)
    monkeypatch.setenv("GIANT_ERRATA", "fix")
    status, _, out, err = _estimate(capsys, "gpt5-thumbnail", "--csv", str(path))
    assert status == 1 and out == ""
    assert err == f"error: --csv {path}: GIANT_ERRATA='fix': expected one of apply, flag, exclude\n"


def test_a_bad_csv_names_file_row_and_field(data_dir: Path, tmp_path: Path, capsys) -> None:
    path = _generated_csv(tmp_path / "lab.csv", {"tcga": 2}, invalid=0)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    rows[0]["benchmark_name"] = "evil.example.com"
    rows[1]["answer"] = "9" * 5000  # not an option's number
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    status, _, out, err = _estimate(capsys, "gpt5-giant", "--csv", str(path))
    assert status == 1 and out == "" and "Traceback" not in err
    first, second, *_ = err.splitlines()[1:]
    assert err.startswith(f"error: --csv {path}: 2 malformed row field(s):\n")
    assert first.startswith(
        f"{path}: row 2 (benchmark_id='tcga-0'), field 'benchmark_name': unknown benchmark"
    )
    assert second.startswith(f"{path}: row 3 (benchmark_id='tcga-1'), field 'answer': ") and len(err) < 2000
    status, _, _, err = _estimate(capsys, "gpt5-giant", "--csv", str(tmp_path / "none.csv"))
    assert status == 1 and err == f"error: --csv {tmp_path / 'none.csv'}: MultiPathQA CSV not found\n"


@pytest.mark.parametrize("which", ["sample", "lab"])
def test_the_ingested_item_set_is_named(which: str, data_dir: Path, tmp_path: Path, capsys) -> None:
    """benchmark_items and multipathqa_csv as ingest stores them (the same tables, written to the store)."""
    path = sample_csv_path() if which == "sample" else _generated_csv(tmp_path / "lab.csv", COUNTS)
    raw = read_csv_strings(path)
    items = parse_items(raw, str(path))[0]
    items = items[items["is_valid"]].assign(wsi_status="ok")
    store = ParquetStore(data_dir)
    store.write("multipathqa_csv", raw.assign(source_file=str(path)))
    store.write("benchmark_items", items)
    status, rows, out, err = _estimate(capsys, "gpt5-thumbnail")
    assert status == 0, err
    if which == "sample":
        assert rows["total"][1] == "14" and out.splitlines()[-1] == (
            f"priced: the bundled 14-question sample ({SAMPLE_COUNTS}), not the full MultiPathQA; "
            "`giant-experiments estimate NAME --csv PATH` prices a MultiPathQA CSV before any slide"
        )
    else:
        assert rows["total"][1:4] == ["17", "17", "17"] and out.splitlines()[-1] == (
            f"priced: the ingested CSV {path} with 17 questions (gtex 4, panda 5, tcga 7, tcga_slidebench 1)"
        )
