"""The JSONL journal: latest row per key, torn and foreign lines skipped, a torn tail sealed, umask."""

from __future__ import annotations

import json
import os
import stat

from giant_assets.runs.journal import Journal


def row(bid: str, run: int = 0, **extra) -> dict:
    return {"config_hash": "h", "benchmark_name": "tcga", "benchmark_id": bid, "run_index": run, **extra}


def test_latest_row_per_key_wins(tmp_path):
    journal = Journal(tmp_path / "j" / "tcga.jsonl")
    journal.append([row("1", error_kind="timeout"), row("2", answer="B")])
    journal.append([row("1", answer="A")])
    latest = journal.read()
    assert len(latest) == 2 and latest[("h", "tcga", "1", 0, None)]["answer"] == "A"


def test_torn_non_utf8_and_foreign_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "tcga.jsonl"
    lines = [
        json.dumps(row("1")),
        "[1, 2]",  # JSON, but not a row
        "3",
        json.dumps({"config_hash": "h"}),  # a row without its key fields
        json.dumps(row(["unhashable"])),
        "[" * 100_000,  # deeper than the recursion limit
        "\xff\xfe not utf-8",
        "",
        json.dumps(row("2")),
        '{"config_hash": "h", "benchmark_na',  # torn by a kill
    ]
    path.write_bytes("\n".join(lines).encode("utf-8").replace("\xff\xfe".encode(), b"\xff\xfe"))
    journal = Journal(path)
    assert sorted(k[2] for k in journal.read()) == ["1", "2"]
    assert journal.skipped_lines == 7
    journal.append([row("3")])  # the torn tail is sealed first, so the new row is a line of its own
    assert sorted(k[2] for k in journal.read()) == ["1", "2", "3"]


def test_journal_files_get_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        Journal(tmp_path / "tcga.jsonl").append([row("1")])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "tcga.jsonl").stat().st_mode) == 0o640
