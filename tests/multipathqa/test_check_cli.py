"""giant-check-data: exit codes, the printed inventory and the --missing-out CSV."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.multipathqa.check_cli import main
from giant_assets.multipathqa.sample import sample_csv_path
from tests.support.wsi_layouts import build_mixed_root

CLI = Path(sys.executable).with_name("giant-check-data")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return build_mixed_root(tmp_path_factory.mktemp("mixed_wsi"))


def _sample_rows() -> list[dict]:
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_incomplete_root_exits_1_and_writes_the_missing_rows(mixed, tmp_path):
    out = tmp_path / "reports" / "missing.csv"
    proc = subprocess.run(
        [str(CLI), "--csv", str(sample_csv_path()), "--wsi-root", str(mixed.root), "--missing-out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "5 question(s) without a usable slide" in proc.stdout and "| all" in proc.stdout
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(written.columns) == [
        "benchmark_name", "benchmark_id", "image_path", "file_id", "status", "reason"
    ]  # fmt: skip
    rows = zip(written["benchmark_name"], written["benchmark_id"], written["status"], strict=True)
    assert sorted(rows) == [
        ("gtex", "GTEX-OIZH-0626", "missing"),
        ("panda", "1", "unreadable"),
        ("panda", "2", "unreadable"),
        ("tcga", "2", "missing"),
        ("tcga_expert_vqa", "1", "ambiguous"),
    ]
    assert written.set_index("benchmark_id").loc["GTEX-OIZH-0626", "image_path"] == "GTEX-OIZH-0626.tiff"
    assert all(written["reason"].str.len() > 0)


def test_complete_root_exits_0(mixed, tmp_path, capsys):
    usable = set(mixed.slides)
    rows = [r for r in _sample_rows() if r["image_path"] in usable]
    assert len(rows) == 9
    out = tmp_path / "missing.csv"
    code = main(["--csv", str(_write_csv(tmp_path / "ok.csv", rows)), "--wsi-root", str(mixed.root),
                 "--missing-out", str(out)])  # fmt: skip
    assert code == 0
    assert "every slide is there and readable" in capsys.readouterr().out
    assert pd.read_csv(out).empty


def test_malformed_row_is_reported_and_fails_the_check(mixed, tmp_path, capsys):
    rows = [r for r in _sample_rows() if r["image_path"] in set(mixed.slides)]
    rows[0]["answer"] = "Appendix"
    code = main(["--csv", str(_write_csv(tmp_path / "bad.csv", rows)), "--wsi-root", str(mixed.root)])
    err = capsys.readouterr().err
    assert code == 1 and "malformed row, slide not checked" in err and "row 2" in err and "'answer'" in err


def test_missing_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--wsi-root", "."])
    assert exited.value.code == 2 and "--csv" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--csv", "MISSING.csv", "--wsi-root", "{root}"], "MISSING.csv: MultiPathQA CSV not found"),
        (["--csv", "{csv}", "--wsi-root", "{root}/nope"], "is not a directory"),
        (["--csv", "{csv}", "--wsi-root", "{root}/GTEX-1117F-0126.tiff"], "is not a directory"),
        (["--csv", "{latin1}", "--wsi-root", "{root}"], "not UTF-8"),
        (["--csv", "{csv}", "--wsi-root", "{root}", "--missing-out", "{root}/GTEX-1117F-0126.tiff/x.csv"],
         "cannot write --missing-out"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2_with_a_message(mixed, tmp_path, capsys, argv, message):
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("benchmark_name,image_path\ngtex,caf\xe9.tiff\n".encode("latin-1"))
    values = {"root": str(mixed.root), "csv": str(sample_csv_path()), "latin1": str(latin1)}
    assert main([a.format(**values) for a in argv]) == 2
    assert message in capsys.readouterr().err


def _without_root_override() -> list[str]:
    """A command prefix under which a folder of mode 000 cannot be listed: root reads any folder unless
    it drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (util-linux ``setpriv``); other users need none."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a folder of mode 000 stays readable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_an_unreadable_folder_is_reported_and_the_check_goes_on(tmp_path):
    mixed = build_mixed_root(tmp_path / "wsi")
    locked = mixed.root / "tcga"
    locked.chmod(0o000)
    out = tmp_path / "missing.csv"
    proc = subprocess.run(
        [*_without_root_override(), str(CLI), "--csv", str(sample_csv_path()), "--wsi-root", str(mixed.root),
         "--missing-out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    written = pd.read_csv(out, dtype=str, keep_default_na=False).set_index("image_path")
    reason = (
        f"folder {locked} cannot be read (Permission denied); fix its permissions or mount and check again"
    )
    for image_path in ("TCGA-A1-A0SK-01Z-00-DX1.svs", "TCGA-EA-A3HT-01Z-00-DX1.svs"):  # both live in tcga/
        rows = written.loc[[image_path]]
        assert set(rows["status"]) == {"unreadable"} and set(rows["reason"]) == {reason}
    # the other rows are checked as before: TCGA-05-4244 is found in its GDC folder past the locked one
    assert "TCGA-05-4244-01Z-00-DX1.svs" not in written.index
    assert written.loc["GTEX-OIZH-0626.tiff", "status"] == "missing"
    assert "14 question(s)" not in proc.stdout and "question(s) without a usable slide" in proc.stdout
    locked.chmod(0o755)  # let pytest clean up
