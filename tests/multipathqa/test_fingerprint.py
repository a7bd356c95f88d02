"""Item fingerprints: the question and the slide's identity (name, size, first and last MiB), not its path."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.fingerprint import (
    DIGEST_SPAN,
    add_fingerprints,
    item_fingerprint,
    item_set_fingerprint,
    question_fingerprint,
    slide_digest,
)
from giant_assets.multipathqa.wsi import resolve_items
from giant_assets.slides.synthetic import SlideDesign
from tests.support.slides import write_pyramidal_slide

OPTIONS = ["Present", "Absent", "Cannot determine", "Not applicable"]


def _rchar() -> int:
    """Bytes this process has read through read(2) and friends (Linux /proc/self/io)."""
    line = next(x for x in Path("/proc/self/io").read_text().splitlines() if x.startswith("rchar:"))
    return int(line.split()[1])


def test_slide_digest_is_name_size_head_and_tail_not_the_path(tmp_path):
    data = os.urandom(3 * DIGEST_SPAN + 17)
    a = tmp_path / "a" / "S.svs"
    a.parent.mkdir()
    a.write_bytes(data)
    # independent oracle: the documented recipe
    header = json.dumps(["slide", 1, "S.svs", len(data)]).encode()
    oracle = hashlib.sha256(header + data[:DIGEST_SPAN] + data[-DIGEST_SPAN:]).hexdigest()
    assert slide_digest(a) == oracle
    moved = tmp_path / "elsewhere" / "deeper" / "S.svs"
    moved.parent.mkdir(parents=True)
    shutil.copyfile(a, moved)
    assert slide_digest(moved) == oracle  # another WSI root: same slide
    renamed = tmp_path / "a" / "T.svs"
    shutil.copyfile(a, renamed)
    assert slide_digest(renamed) != oracle  # another file name: another slide
    tail_changed = bytearray(data)
    tail_changed[-1] ^= 1
    a.write_bytes(bytes(tail_changed))
    assert slide_digest(a) != oracle


def test_small_files_are_hashed_whole(tmp_path):
    path = tmp_path / "small.tiff"
    path.write_bytes(b"abc")
    header = json.dumps(["slide", 1, "small.tiff", 3]).encode()
    assert slide_digest(path) == hashlib.sha256(header + b"abc").hexdigest()


def test_each_slide_is_read_once_and_at_most_two_mib(tmp_path):
    big = tmp_path / "big.tiff"
    with open(big, "wb") as fh:  # 64 MiB, sparse: hashing it whole would read 64 MiB
        fh.truncate(64 * DIGEST_SPAN)
    items = pd.DataFrame(
        {
            "benchmark_name": ["tcga_expert_vqa"] * 3,
            "prompt": ["Q1?", "Q2?", "Q3?"],
            "options": [OPTIONS] * 3,
            "wsi_status": ["ok"] * 3,
            "wsi_path": [str(big)] * 3,
        }
    )
    before = _rchar()
    out = add_fingerprints(items)
    read = _rchar() - before
    assert 2 * DIGEST_SPAN <= read < 2 * DIGEST_SPAN + 64 * 1024, read
    assert out["slide_digest"].nunique() == 1 and out["item_fingerprint"].nunique() == 3


def test_resolved_items_get_fingerprints_over_question_and_slide(tmp_path):
    root = tmp_path / "root"
    write_pyramidal_slide(root / "TCGA-A.svs", SlideDesign(1024, 768), levels=3)
    write_pyramidal_slide(root / "TCGA-B.svs", SlideDesign(1024, 640), levels=3)
    items = pd.DataFrame(
        {
            "benchmark_name": ["tcga_expert_vqa"] * 4,
            "image_path": ["TCGA-A.svs", "TCGA-A.svs", "TCGA-B.svs", "TCGA-gone.svs"],
            "prompt": ["Is it?", "Is it not?", "Is it?", "Is it?"],
            "options": [OPTIONS] * 4,
        }
    )
    out = add_fingerprints(resolve_items(items, root))
    assert out["wsi_status"].tolist() == ["ok", "ok", "ok", "missing"]
    q = question_fingerprint("tcga_expert_vqa", "Is it?", OPTIONS)
    assert out.loc[0, "question_fingerprint"] == q == out.loc[2, "question_fingerprint"]
    assert out.loc[0, "item_fingerprint"] == item_fingerprint(q, slide_digest(root / "TCGA-A.svs"))
    assert out.loc[2, "item_fingerprint"] == item_fingerprint(q, slide_digest(root / "TCGA-B.svs"))
    assert pd.isna(out.loc[3, "slide_digest"]) and out.loc[3, "item_fingerprint"] == item_fingerprint(q, None)
    assert out["item_fingerprint"].nunique() == 4
    assert all(len(fp) == 64 for fp in out["item_fingerprint"])
    # another option list or another benchmark is another question
    assert question_fingerprint("tcga_expert_vqa", "Is it?", OPTIONS[::-1]) != q
    assert question_fingerprint("tcga_slidebench", "Is it?", OPTIONS) != q
    # the same tree copied to another root: the same fingerprints
    shutil.copytree(root, tmp_path / "moved")
    again = add_fingerprints(resolve_items(items, tmp_path / "moved"))
    assert again["item_fingerprint"].tolist() == out["item_fingerprint"].tolist()


def test_item_set_fingerprint_ignores_order_and_sees_every_change():
    frame = pd.DataFrame(
        {
            "benchmark_name": ["gtex", "tcga"],
            "benchmark_id": ["G-1", "0"],
            "item_fingerprint": ["a" * 64, "b" * 64],
            "truth_label": [3, 7],
            "prompt": ["x", "y"],
        }
    )
    fp = item_set_fingerprint(frame)
    assert len(fp) == 64
    assert item_set_fingerprint(frame.iloc[::-1].drop(columns="prompt")) == fp
    assert item_set_fingerprint(frame.assign(truth_label=[3, 8])) != fp
    assert item_set_fingerprint(frame.assign(benchmark_id=["G-1", "1"])) != fp
    assert item_set_fingerprint(frame.assign(item_fingerprint=["a" * 64, "c" * 64])) != fp
    assert item_set_fingerprint(frame.iloc[:1]) != fp
