"""Paths built from data stay inside their folder: every part is one reversible, safe file name."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from giant_assets.core.paths import UnsafePathError, confined_path, decode_component, encode_component
from giant_assets.eval.export import submission_path, write_submission

HOSTILE = [
    "..",
    ".",
    "../../etc",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "x\x00y",
    "tab\there",
    "new\nline",
    ".hidden",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_ids_become_one_name_inside_the_root(tmp_path: Path, value: str):
    path = confined_path(tmp_path / "results", "tcga", value, "run0")
    assert path.parent.parent == tmp_path / "results" / "tcga"
    name = path.parent.name
    assert "/" not in name and "\\" not in name and "\x00" not in name and not name.startswith(".")
    assert decode_component(name) == value
    path.mkdir(parents=True)  # really creatable, and really inside
    (path / "overview.png").write_bytes(b"x")
    inside = [p for p in tmp_path.rglob("overview.png")]
    assert inside == [path / "overview.png"]


def test_ordinary_names_are_unchanged(tmp_path: Path):
    assert confined_path(tmp_path, "TCGA-05-4244-01Z", "GTEX-OIZH-0626", "0", "a.b_c~d") == (
        tmp_path / "TCGA-05-4244-01Z" / "GTEX-OIZH-0626" / "0" / "a.b_c~d"
    )
    assert encode_component("a b%") == "a%20b%25"
    assert encode_component("..") == "%2E."


@pytest.mark.parametrize("value", ["", "x" * 100 + "é" * 30])
def test_empty_or_too_long_parts_are_refused(tmp_path: Path, value: str):
    with pytest.raises(UnsafePathError, match="empty|file-name limit"):
        confined_path(tmp_path, value)


@given(st.text(min_size=1, max_size=40))
def test_any_text_round_trips_and_stays_one_component(value: str):
    # each character is up to 4 UTF-8 bytes, each 3 characters encoded: 40 can exceed the name limit
    encoded_size = sum(1 if c.isascii() and (c.isalnum() or c in "-_.~") else 3 * len(c.encode("utf-8",
                       "surrogateescape")) for c in value) + (2 if value.startswith(".") else 0)  # fmt: skip
    if encoded_size > 255:
        with pytest.raises(UnsafePathError, match="file-name limit"):
            encode_component(value)
        return
    name = encode_component(value)
    assert len(name) == encoded_size and decode_component(name) == value
    assert os.sep not in name and name not in {".", ".."} and not name.startswith(".")
    assert name.isascii() and name.isprintable()


def test_submission_exports_stay_inside_the_data_folder_with_the_users_umask(tmp_path: Path):
    voted = pd.DataFrame({"benchmark_id": ["../x", "b"], "predicted_label": [2, None]})
    old = os.umask(0o022)
    try:
        path = write_submission(voted, submission_path(tmp_path / "data", "../../escape", "/etc/tcga"))
    finally:
        os.umask(old)
    assert path == tmp_path / "data" / "exports" / "%2E.%2F..%2Fescape" / "%2Fetc%2Ftcga.csv"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*.csv")) == [path.name]
    assert pd.read_csv(path, dtype=str, keep_default_na=False).values.tolist() == [["../x", "2"], ["b", ""]]
