"""Fingerprints: what identifies one question about one slide, and one set of items.

An answer belongs to one question about one slide. ``question_fingerprint`` hashes what the model is
asked (benchmark, rendered prompt, options); ``slide_digest`` hashes the slide file's identity (its
file name, size and first and last MiB, never its path, so a moved WSI root keeps it); the
``item_fingerprint`` combines both. An item whose slide is not resolved gets a fingerprint over its
question plus a ``no-slide`` marker. ``item_set_fingerprint`` hashes a whole table of items.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

FINGERPRINT_VERSION = 1
DIGEST_SPAN = 1 << 20  # bytes hashed at each end of a slide file: at most 2 MiB read per file
READ_THREADS = 8  # slide files digested at once
NO_SLIDE = "no-slide"  # stands for the slide in the fingerprint of an item whose slide is not resolved
SET_COLUMNS = ("benchmark_name", "benchmark_id", "item_fingerprint", "truth_label")


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()


def question_fingerprint(benchmark_name: str, prompt: str, options: Sequence[str] | None) -> str:
    """sha256 hex of what the model is asked: the benchmark, the rendered prompt and the options."""
    opts = None if options is None else [str(o) for o in options]
    return _sha256_json(["question", FINGERPRINT_VERSION, benchmark_name, prompt, opts])


def slide_digest(path: Path | str) -> str:
    """sha256 hex of a slide file's name, size and its first and last :data:`DIGEST_SPAN` bytes.

    The path's folders are not part of it: the same file under another WSI root has the same digest.
    """
    path = Path(path)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        digest.update(json.dumps(["slide", FINGERPRINT_VERSION, path.name, size]).encode("utf-8"))
        digest.update(fh.read(DIGEST_SPAN))
        if size > DIGEST_SPAN:
            fh.seek(max(DIGEST_SPAN, size - DIGEST_SPAN))
            digest.update(fh.read(DIGEST_SPAN))
    return digest.hexdigest()


def item_fingerprint(question_fp: str, slide_fp: str | None) -> str:
    """sha256 hex of one question about one slide (``slide_fp`` None: no resolved slide)."""
    return _sha256_json(["item", FINGERPRINT_VERSION, question_fp, slide_fp or NO_SLIDE])


def add_fingerprints(items: pd.DataFrame) -> pd.DataFrame:
    """``items`` with ``question_fingerprint``, ``slide_digest`` and ``item_fingerprint`` columns.

    Each resolved slide file (``wsi_status`` ok) is read once, at most 2 MiB, however many questions
    share it. A file that cannot be read now counts as no slide.
    """
    statuses = items["wsi_status"] if "wsi_status" in items else pd.Series("ok", index=items.index)
    paths = items["wsi_path"] if "wsi_path" in items else pd.Series(None, index=items.index)
    slide_paths = [
        p if s == "ok" and isinstance(p, str) and p else None for s, p in zip(statuses, paths, strict=True)
    ]
    unique = sorted({p for p in slide_paths if p})
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:  # a network share's latency overlaps
        digests = dict(zip(unique, pool.map(_digest_or_none, unique), strict=True))
    questions, slides, fingerprints = [], [], []
    for name, prompt, options, path in zip(
        items["benchmark_name"], items["prompt"], items["options"], slide_paths, strict=True
    ):
        opts = None if options is None or (isinstance(options, float) and options != options) else options
        q = question_fingerprint(name, prompt, opts)
        s = digests[path] if path else None
        questions.append(q)
        slides.append(s)
        fingerprints.append(item_fingerprint(q, s))
    return items.assign(question_fingerprint=questions, slide_digest=slides, item_fingerprint=fingerprints)


def _digest_or_none(path: str) -> str | None:
    try:
        return slide_digest(path)
    except OSError:
        return None


def item_set_fingerprint(frame: pd.DataFrame) -> str:
    """sha256 hex of a set of items: its sorted (benchmark_name, benchmark_id, item_fingerprint,
    truth_label) rows. Row order and other columns do not matter; any changed item, label or id does."""
    missing = [c for c in SET_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"item_set_fingerprint needs column(s) {missing}; the frame has {list(frame.columns)}"
        )
    rows = sorted(
        [str(name), str(bid), str(fp), int(truth)]
        for name, bid, fp, truth in zip(*(frame[c] for c in SET_COLUMNS), strict=True)
    )
    return _sha256_json(["item_set", FINGERPRINT_VERSION, rows])
