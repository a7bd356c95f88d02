"""The submissions folder: which files count, and their safe, stable partition keys.

A submission file is a regular, non-hidden ``.csv`` or ``.jsonl`` file directly in the folder. Its key
is the file name itself when that is already safe (``[A-Za-z0-9_.-]+``, not starting with a dot, at most
200 characters); any other name maps to its sanitised form plus ``-`` and 10 hex digits of the name's
SHA-256, e.g. ``my run (2).csv`` → ``my_run_2_.csv-3f1c…``. Hashed keys end in hex digits, never in
``.csv``/``.jsonl``, so they cannot collide with a safe file name.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from giant_assets.grading.reader import SUPPORTED_EXTENSIONS

_SAFE_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.\-]+")
MAX_KEY_LEN = 200


def partition_key_for(file_name: str) -> str:
    """A ParquetStore-safe partition key for ``file_name`` (the name itself when already safe)."""
    if _SAFE_KEY.match(file_name) and not file_name.startswith(".") and len(file_name) <= MAX_KEY_LEN:
        return file_name
    digest = hashlib.sha256(file_name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    stem = _UNSAFE_RUN.sub("_", file_name).strip("._")[:150] or "submission"
    return f"{stem}-{digest}"


def submission_files(folder: Path) -> dict[str, Path]:
    """Partition key → file for every submission file in ``folder`` (empty if it does not exist)."""
    if not folder.is_dir():
        return {}
    files = (
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in SUPPORTED_EXTENSIONS
    )
    return {partition_key_for(p.name): p for p in sorted(files)}


def file_signature(path: Path) -> str:
    """Changes whenever the file is rewritten: modification time (ns) and size."""
    stat = path.stat()
    return f"{stat.st_mtime_ns}-{stat.st_size}"
